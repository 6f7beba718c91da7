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
// the previous message, that no text block is empty or only whitespace,
// and that cache_control breakpoints are at most four, of type ephemeral
// and on blocks that can be cached; it records every request it receives.
package anthropictest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/latchd/latch/agent/provider/internal/fakeapi"
)

// Server is a running fake Messages API that accepts one API key. All
// methods are safe for concurrent use.
type Server struct {
	key string
	api *fakeapi.Server[Reply, Request]
}

// New starts a fake on 127.0.0.1 that accepts apiKey.
func New(apiKey string) *Server {
	s := &Server{key: apiKey, api: fakeapi.New[Reply, Request]()}
	s.api.Start("anthropictest", http.HandlerFunc(s.serve))
	return s
}

// URL is the base URL to configure (the API root, without /v1).
func (s *Server) URL() string { return s.api.URL() }

// Close stops the server; stalled and delayed replies end at once.
func (s *Server) Close() { s.api.Close() }

// Script queues replies; each request that passes the checks takes the
// next one. A request with nothing left to take gets a 400 saying so.
func (s *Server) Script(replies ...Reply) { s.api.Script(replies...) }

// Pending is how many scripted replies have not been taken yet.
func (s *Server) Pending() int { return s.api.Pending() }

// Models limits the models the fake knows: a request for another, to the
// Messages or the Models API, gets 404 not_found_error, as from the API.
// GET /v1/models lists them in the order given (the API lists the newest
// first). With no call, every model is known and the list is empty.
func (s *Server) Models(names ...string) { s.api.SetModels(names...) }

// Requests returns every request received so far, in order, including
// those that were refused.
func (s *Server) Requests() []Request { return s.api.Requests() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := fakeapi.ReadBody(w, r)
	if err != nil {
		writeError(w, "", &apiError{status: http.StatusRequestEntityTooLarge, typ: "request_too_large", msg: "Request exceeds the maximum allowed number of bytes."})
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	perr := json.Unmarshal(body, &req.Params)
	reqID := "req_fake_" + strconv.Itoa(s.api.Record(req))

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
	reply, ok := s.api.Take()
	if !ok {
		writeError(w, reqID, invalid("anthropictest: no reply scripted for this request"))
		return
	}
	if !s.api.Wait(r, reply.faults.Delay) {
		return
	}
	if reply.status != 0 {
		writeError(w, reqID, &apiError{status: reply.status, typ: reply.errType, msg: reply.errMessage, header: reply.faults.Header})
		return
	}
	s.stream(w, r, reqID, req, reply)
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
	if model == "" || s.api.KnowsModel(model) {
		return nil
	}
	return &apiError{status: http.StatusNotFound, typ: "not_found_error", msg: "model: " + model}
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
	fakeapi.Answer(w, e.status, withID(e.header, reqID), "application/json", errorBody(e.typ, e.msg, reqID))
}

// withID is h with the Request-Id header every answer of the API carries
// (none for an empty id).
func withID(h http.Header, reqID string) http.Header {
	h = h.Clone()
	if reqID != "" {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Request-Id", reqID)
	}
	return h
}
