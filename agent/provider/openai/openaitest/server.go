// Package openaitest is a fake of the OpenAI Chat Completions API that
// speaks real HTTP and server-sent events on loopback, so tests drive
// latch's openai adapter — and the go-openai SDK under it — the way OpenAI
// or a compatible server (Ollama, vLLM, llama.cpp, OpenRouter) would.
//
// Each request takes the next scripted Reply: a model turn streamed as
// chat.completion.chunk events (content in pieces, tool calls with their
// arguments split over several chunks, finish_reason, a usage chunk when
// asked for, data: [DONE]), or an HTTP error in OpenAI's error shape.
// Replies can be slowed, stalled, cut or broken part-way by an error event,
// in OpenAI's shape or OpenRouter's. The fake checks the Bearer key — or,
// started with an empty key, accepts any request, like a local server —
// and, like OpenAI, that tool messages answer the tool calls before them
// and, like Ollama and vLLM, that tool call arguments are JSON objects; it
// records every request it receives.
package openaitest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/latchd/latch/agent/provider/internal/fakeapi"
)

// Server is a running fake Chat Completions API. All methods are safe for
// concurrent use.
type Server struct {
	key string
	api *fakeapi.Server[Reply, Request]

	mu      sync.Mutex
	refused []string
}

// New starts a fake on 127.0.0.1 that accepts apiKey. With an empty key it
// accepts every request, with or without an Authorization header.
func New(apiKey string) *Server {
	s := &Server{key: apiKey, api: fakeapi.New[Reply, Request]()}
	s.api.Start("openaitest", http.HandlerFunc(s.serve))
	return s
}

// URL is the base URL to configure, /v1 included.
func (s *Server) URL() string { return s.api.URL() + "/v1" }

// Close stops the server; stalled and delayed replies end at once.
func (s *Server) Close() { s.api.Close() }

// Script queues replies; each request that passes the checks takes the
// next one. A request with nothing left to take gets a 400 saying so.
func (s *Server) Script(replies ...Reply) { s.api.Script(replies...) }

// Pending is how many scripted replies have not been taken yet.
func (s *Server) Pending() int { return s.api.Pending() }

// Models limits the models the fake knows; a request for another gets 404
// model_not_found, as from OpenAI. With no call, every model is known.
func (s *Server) Models(names ...string) { s.api.SetModels(names...) }

// RejectFields makes the fake refuse requests that carry any of these
// top-level fields with 400 "Unrecognized request argument supplied", as
// servers that implement only the oldest part of the API do.
func (s *Server) RejectFields(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = append(s.refused, names...)
}

// Requests returns every request received so far, in order, including
// those that were refused.
func (s *Server) Requests() []Request { return s.api.Requests() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := fakeapi.ReadBody(w, r)
	if err != nil {
		writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", msg: "Request too large."})
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	perr := json.Unmarshal(body, &req.Params)
	id := "chatcmpl-fake" + strconv.Itoa(s.api.Record(req))

	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error",
			msg: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
		return
	}
	if aerr := s.authorize(r.Header); aerr != nil {
		writeError(w, aerr)
		return
	}
	if perr != nil {
		writeError(w, invalid("", "We could not parse the JSON body of your request."))
		return
	}
	if aerr := s.checkFields(req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := s.checkModel(req.Params.Model); aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := validate(req.Params); aerr != nil {
		writeError(w, aerr)
		return
	}
	if !req.Params.Stream {
		writeError(w, invalid("stream", "openaitest: only streaming requests are faked"))
		return
	}
	reply, ok := s.api.Take()
	if !ok {
		writeError(w, invalid("", "openaitest: no reply scripted for this request"))
		return
	}
	if !s.api.Wait(r, reply.faults.Delay) {
		return
	}
	if reply.status != 0 {
		writeRaw(w, reply)
		return
	}
	s.stream(w, r, id, req, reply)
}

func (s *Server) authorize(h http.Header) *apiError {
	if s.key == "" {
		return nil
	}
	key, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	switch {
	case !ok || key == "":
		return &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error",
			msg: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}
	case key != s.key:
		return &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key",
			msg: "Incorrect API key provided: " + mask(key) + ". You can find your API key at https://platform.openai.com/account/api-keys."}
	}
	return nil
}

// mask shows a key the way OpenAI's 401 does: its ends only.
func mask(key string) string {
	if len(key) < 8 {
		return strings.Repeat("*", len(key))
	}
	return key[:3] + strings.Repeat("*", len(key)-7) + key[len(key)-4:]
}

func (s *Server) checkFields(req Request) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range req.Fields() {
		if slices.Contains(s.refused, f) {
			return invalid("", "Unrecognized request argument supplied: "+f)
		}
	}
	return nil
}

func (s *Server) checkModel(model string) *apiError {
	if model == "" || s.api.KnowsModel(model) {
		return nil
	}
	return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found",
		msg: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)}
}

// apiError is an error answer in OpenAI's shape.
type apiError struct {
	status int
	typ    string
	code   string
	param  string
	msg    string
}

func invalid(param, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, msg: msg}
}

func errorBody(typ, code, msg string) []byte {
	return errorBodyParam(typ, code, "", msg)
}

func errorBodyParam(typ, code, param, msg string) []byte {
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nullable(param), "code": nullable(code),
	}})
	return b
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeRaw(w, Reply{status: e.status, body: string(errorBodyParam(e.typ, e.code, e.param, e.msg))})
}

func writeRaw(w http.ResponseWriter, r Reply) {
	fakeapi.Answer(w, r.status, r.faults.Header, cmp.Or(r.ctype, "application/json"), []byte(r.body))
}
