// Package anthropictest is a fake of Anthropic's Messages API that speaks
// real HTTP and server-sent events on loopback, so tests drive latch's
// anthropic client the way api.anthropic.com would.
//
// Each request to POST /v1/messages takes the next scripted Reply: a model
// turn streamed as the API streams it (message_start,
// content_block_start/delta/stop with text_delta, input_json_delta and
// thinking_delta split into pieces, a ping, message_delta with stop_reason
// and usage, message_stop), or an HTTP error in the API's error shape.
// Replies can be slowed, stalled, cut or broken by an error event
// part-way, and written with every framing the event-stream format allows
// (see Framing). The fake also serves the Models API (GET /v1/models and
// /v1/models/{id}) for the models set with Models. It checks the
// credential (x-api-key or Authorization: Bearer), the anthropic-version
// header and, like the API, that every tool_result answers a tool_use of
// the previous message; it records every request it receives.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const maxRequestBody = 32 << 20

// Server is a running fake Messages API that accepts one API key. All
// methods are safe for concurrent use.
type Server struct {
	key       string
	srv       *httptest.Server
	done      chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	script    []Reply
	requests  []Request
	models    map[string]bool // nil: every model is known
	modelList []string
	nextID    int
}

// New starts a fake on 127.0.0.1 that accepts apiKey.
func New(apiKey string) *Server {
	s := &Server{key: apiKey, done: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("anthropictest: listen on loopback: %v", err))
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	return s
}

// URL is the base URL to configure (the API root, without /v1).
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server; stalled and delayed replies end at once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Script queues replies; each request that passes the checks takes the
// next one. A request with nothing left to take gets a 400 saying so.
func (s *Server) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Pending is how many scripted replies have not been taken yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Models limits the models the fake knows: a request for another, to the
// Messages or the Models API, gets 404 not_found_error, as from the API.
// GET /v1/models lists them in the order given (the API lists the newest
// first). With no call, every model is known and the list is empty.
func (s *Server) Models(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = map[string]bool{}
	s.modelList = slices.Clone(names)
	for _, n := range names {
		s.models[n] = true
	}
}

// Requests returns every request received so far, in order, including
// those that were refused.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		writeError(w, "", &apiError{status: http.StatusRequestEntityTooLarge, typ: "request_too_large", msg: "Request exceeds the maximum allowed number of bytes."})
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	perr := json.Unmarshal(body, &req.Params)
	reqID := s.record(req)

	models := r.Method == http.MethodGet && (r.URL.Path == "/v1/models" || strings.HasPrefix(r.URL.Path, "/v1/models/"))
	if !models && (r.Method != http.MethodPost || r.URL.Path != "/v1/messages") {
		writeError(w, reqID, &apiError{status: http.StatusNotFound, typ: "not_found_error", msg: "Not Found"})
		return
	}
	if aerr := s.authorize(r.Header); aerr != nil {
		writeError(w, reqID, aerr)
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		writeError(w, reqID, invalid("anthropic-version: header is required"))
		return
	}
	if models {
		s.serveModels(w, r, reqID)
		return
	}
	if perr != nil {
		writeError(w, reqID, invalid("There was an issue with your request body: invalid JSON"))
		return
	}
	if aerr := s.checkModel(req.Params.Model); aerr != nil {
		writeError(w, reqID, aerr)
		return
	}
	if aerr := validate(req.Params); aerr != nil {
		writeError(w, reqID, aerr)
		return
	}
	if !req.Params.Stream {
		writeError(w, reqID, invalid("anthropictest: only streaming requests are faked"))
		return
	}
	reply, ok := s.take()
	if !ok {
		writeError(w, reqID, invalid("anthropictest: no reply scripted for this request"))
		return
	}
	if !s.wait(r, reply.delay) {
		return
	}
	if reply.status != 0 {
		writeError(w, reqID, &apiError{status: reply.status, typ: reply.errType, msg: reply.errMessage, header: reply.header})
		return
	}
	s.stream(w, r, reqID, req, reply)
}

// record keeps req and returns the request id the response carries.
func (s *Server) record(req Request) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	s.nextID++
	return "req_fake_" + strconv.Itoa(s.nextID)
}

func (s *Server) authorize(h http.Header) *apiError {
	key := h.Get("X-Api-Key")
	if bearer, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer "); ok && key == "" {
		key = bearer
	}
	switch {
	case key == "":
		return &apiError{status: http.StatusUnauthorized, typ: "authentication_error", msg: "x-api-key header is required"}
	case key != s.key:
		return &apiError{status: http.StatusUnauthorized, typ: "authentication_error", msg: "invalid x-api-key"}
	}
	return nil
}

func (s *Server) checkModel(model string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.models == nil || model == "" || s.models[model] {
		return nil
	}
	return &apiError{status: http.StatusNotFound, typ: "not_found_error", msg: "model: " + model}
}

func (s *Server) take() (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		return Reply{}, false
	}
	r := s.script[0]
	s.script = s.script[1:]
	return r, true
}

// wait sleeps for d unless the client leaves or the server closes first;
// it reports whether to go on answering.
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
	case <-s.done:
	}
	return false
}

// apiError is an error answer in the API's shape.
type apiError struct {
	status int
	typ    string
	msg    string
	header http.Header
}

func invalid(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: msg}
}

func errorBody(typ, msg, reqID string) []byte {
	body := map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	}
	if reqID != "" {
		body["request_id"] = reqID
	}
	b, _ := json.Marshal(body)
	return b
}

func writeError(w http.ResponseWriter, reqID string, e *apiError) {
	for k, vs := range e.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	b := errorBody(e.typ, e.msg, reqID)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	if reqID != "" {
		w.Header().Set("Request-Id", reqID)
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

func itoa(n int) string { return strconv.Itoa(n) }
