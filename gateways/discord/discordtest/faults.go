package discordtest

import (
	"net/http"
	"strconv"
	"time"

	"github.com/latchd/latch/gateways/internal/faketest"
)

// Fault is a failure injected into one request of a route.
type Fault struct {
	// Status is the HTTP status to answer with. 0 lets the request through
	// (after Delay, with Headers).
	Status int
	// Code and Message make Discord's error JSON; a status-specific default
	// is used when Message is empty.
	Code    int
	Message string
	// RetryAfter is the wait a 429 asks for, in seconds (Discord sends a
	// float). It sets retry_after, Retry-After and X-RateLimit-Reset-After.
	RetryAfter float64
	// Global marks a 429 as the global rate limit.
	Global bool
	// Headers are set on the answer (also when Status is 0): e.g.
	// X-RateLimit-Remaining: 0 with X-RateLimit-Reset-After to make the
	// client wait before its next request to the bucket.
	Headers map[string]string
	// Body replaces the answer's body (a proxy's HTML page, malformed JSON).
	Body string
	// Hangup closes the connection without an answer.
	Hangup bool
	// Delay holds the request this long first.
	Delay time.Duration
	// Times is how many requests the fault applies to: 0 or 1 once, n > 1
	// n times, negative for every request until ClearFaults.
	Times int
}

// Inject queues faults for a route (one of the Route constants). Requests
// with a valid token take them in order, before the route runs.
func (s *Server) Inject(route string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range faults {
		s.faults.Add(route, f, f.Times)
	}
}

// ClearFaults drops the faults still queued for a route.
func (s *Server) ClearFaults(route string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Clear(route)
}

// applyFault carries out f and reports whether it answered the request.
func (s *Server) applyFault(req *request, f Fault) bool {
	if !faketest.Hold(req.r, s.done, f.Delay) {
		return true
	}
	w := req.w
	for k, v := range f.Headers {
		w.Header().Set(k, v)
	}
	switch {
	case f.Hangup:
		faketest.Hangup(w)
		return true
	case f.Body != "":
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(f.Body)))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(f.Body))
		return true
	case f.Status == http.StatusTooManyRequests:
		if req.route == RouteEditMessage {
			s.mu.Lock()
			s.blockEditsLocked(req.args[0], f.RetryAfter, s.editClock())
			s.mu.Unlock()
		}
		s.writeRateLimited(w, f)
		return true
	case f.Status != 0:
		msg := f.Message
		if msg == "" {
			msg = defaultMessage(f.Status)
		}
		writeError(w, f.Status, f.Code, msg)
		return true
	}
	return false
}

// writeRateLimited answers 429 the way Discord does.
func (s *Server) writeRateLimited(w http.ResponseWriter, f Fault) {
	h := w.Header()
	setRateHeaders(h, 5, 0, f.RetryAfter, f.Global)
	h.Set("Retry-After", retryAfterHeader(f.RetryAfter))
	msg := f.Message
	if msg == "" {
		msg = "You are being rate limited."
	}
	writeJSON(w, http.StatusTooManyRequests, struct {
		Message    string  `json:"message"`
		RetryAfter float64 `json:"retry_after"`
		Global     bool    `json:"global"`
		Code       int     `json:"code,omitempty"`
	}{msg, f.RetryAfter, f.Global, f.Code})
}

func defaultMessage(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "401: Unauthorized"
	case http.StatusForbidden:
		return "Missing Access"
	case http.StatusNotFound:
		return "404: Not Found"
	case http.StatusBadGateway:
		return "502: Bad Gateway"
	}
	return strconv.Itoa(status) + ": " + http.StatusText(status)
}
