// Package fakeapi is what the fakes of the provider APIs (anthropictest,
// openaitest) share beneath their protocols: a loopback HTTP server, the
// queue of scripted replies, the record of the requests received, the
// models a fake knows, and the writing of a server-sent event stream with
// the faults a reply can carry — a slow first byte, a dropped connection,
// a clean end too early, a stall, a pause filled with keep-alives, an
// error event part-way.
//
// What each protocol says — paths, credential checks, the shapes of its
// events and errors — stays in the fake that speaks it; this package
// writes the bytes it is given as they are.
package fakeapi

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"
)

// MaxRequestBody bounds the body of a request a fake reads.
const MaxRequestBody = 32 << 20

// Server is the HTTP side of a fake whose replies are Reply and whose
// record of requests holds Request. All methods are safe for concurrent
// use.
type Server[Reply, Request any] struct {
	srv       *httptest.Server
	done      chan struct{}
	closeOnce sync.Once

	mu        sync.Mutex
	script    []Reply
	requests  []Request
	models    map[string]bool // nil: every model is known
	modelList []string
}

// New makes a Server; Start starts it.
func New[Reply, Request any]() *Server[Reply, Request] {
	return &Server[Reply, Request]{done: make(chan struct{})}
}

// Start serves h on 127.0.0.1; name is the fake's, for the panic when no
// loopback port can be had.
func (s *Server[Reply, Request]) Start(name string, h http.Handler) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("%s: listen on loopback: %v", name, err))
	}
	s.srv = httptest.NewUnstartedServer(h)
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
}

// URL is the root of the server: http://127.0.0.1:port.
func (s *Server[Reply, Request]) URL() string { return s.srv.URL }

// Close stops the server; stalled and delayed replies end at once.
func (s *Server[Reply, Request]) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Script queues replies.
func (s *Server[Reply, Request]) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Pending is how many scripted replies have not been taken yet.
func (s *Server[Reply, Request]) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Take takes the next scripted reply; false if none is left.
func (s *Server[Reply, Request]) Take() (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		var none Reply
		return none, false
	}
	r := s.script[0]
	s.script = s.script[1:]
	return r, true
}

// Record keeps req and returns how many requests have been kept, this one
// included: a number for the ids a fake gives its answers.
func (s *Server[Reply, Request]) Record(req Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	return len(s.requests)
}

// Requests returns every request recorded so far, in order.
func (s *Server[Reply, Request]) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// SetModels limits the models the fake knows to names, kept in this order.
func (s *Server[Reply, Request]) SetModels(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = map[string]bool{}
	s.modelList = slices.Clone(names)
	for _, n := range names {
		s.models[n] = true
	}
}

// KnowsModel reports whether the fake knows the model name: every name
// does until SetModels is called.
func (s *Server[Reply, Request]) KnowsModel(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.models == nil || s.models[name]
}

// ModelList is the models given to SetModels, in order.
func (s *Server[Reply, Request]) ModelList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.modelList)
}

// Wait sleeps for d unless the client leaves or the server closes first;
// it reports whether to go on answering.
func (s *Server[Reply, Request]) Wait(r *http.Request, d time.Duration) bool {
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

// ReadBody reads the body of r, up to MaxRequestBody.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBody))
}

// Answer writes a whole response, not a stream: the headers in h, then
// Content-Type and Content-Length, then status and body.
func Answer(w http.ResponseWriter, status int, h http.Header, contentType string, body []byte) {
	setHeader(w, h)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// setHeader gives w's response the headers in h, each replacing what w
// had under that name.
func setHeader(w http.ResponseWriter, h http.Header) {
	for k, vs := range h {
		w.Header()[k] = slices.Clone(vs)
	}
}
