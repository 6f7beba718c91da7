// Package transcribetest is a fake OpenAI-compatible transcription
// endpoint: it parses each request as the real API does (POST
// /v1/audio/transcriptions, a bearer key, a multipart/form-data body with
// a "file" part that has a file name and a "model" field), refuses what
// the API would refuse, and answers with the text the test scripted.
package transcribetest

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"sync"
)

// Request is one transcription request as received.
type Request struct {
	Model, Format              string
	FileName, PartType         string
	Data                       []byte
	ContentType, Authorization string
}

// Server is the fake endpoint.
type Server struct {
	srv  *httptest.Server
	key  string
	mu   sync.Mutex
	reqs []Request
	text string
	// status, when not 0, answers with an API error of that status.
	status int
}

// New starts a fake that accepts key ("" for none) and answers text.
func New(key, text string) *Server {
	s := &Server{key: key, text: text}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the API root to configure (…/v1).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Answer sets the text of the next answers.
func (s *Server) Answer(text string) {
	s.mu.Lock()
	s.text = text
	s.mu.Unlock()
}

// Fail makes every answer an API error of status (0: succeed again).
func (s *Server) Fail(status int) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

// Requests returns what was received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/transcriptions" {
		apiError(w, http.StatusNotFound, "no such route")
		return
	}
	auth := r.Header.Get("Authorization")
	if s.key != "" && auth != "Bearer "+s.key {
		apiError(w, http.StatusUnauthorized, "Incorrect API key provided")
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		apiError(w, http.StatusBadRequest, "Content-Type must be multipart/form-data with a boundary")
		return
	}
	req := Request{ContentType: r.Header.Get("Content-Type"), Authorization: auth}
	mr := multipart.NewReader(r.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "malformed multipart body: "+err.Error())
			return
		}
		data, err := io.ReadAll(io.LimitReader(p, 26<<20))
		if err != nil {
			apiError(w, http.StatusBadRequest, "malformed multipart body")
			return
		}
		switch p.FormName() {
		case "file":
			if p.FileName() == "" {
				apiError(w, http.StatusBadRequest, "the file part has no filename")
				return
			}
			req.FileName, req.PartType, req.Data = p.FileName(), p.Header.Get("Content-Type"), data
		case "model":
			req.Model = string(data)
		case "response_format":
			req.Format = string(data)
		}
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	text, status := s.text, s.status
	s.mu.Unlock()
	switch {
	case req.Data == nil:
		apiError(w, http.StatusBadRequest, "you must provide a file")
		return
	case req.Model == "":
		apiError(w, http.StatusBadRequest, "you must provide a model parameter")
		return
	case status != 0:
		apiError(w, status, "the fake was told to fail")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"text": text})
}
