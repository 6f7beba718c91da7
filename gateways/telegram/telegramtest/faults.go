package telegramtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/latchd/latch/gateways/internal/faketest"
)

// Inject queues faults for a method (case-insensitive). Requests with a valid
// token take them in order, before the method runs.
func (s *Server) Inject(method string, faults ...Fault) {
	key := strings.ToLower(method)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range faults {
		s.faults.Add(key, f, f.Times)
	}
}

// ClearFaults drops the faults still queued for a method.
func (s *Server) ClearFaults(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Clear(strings.ToLower(method))
}

// SetInstantEmpty makes getUpdates answer at once with an empty result,
// whatever its timeout and whatever is pending, like a misbehaving proxy. It
// lets a test check that a client does not spin.
func (s *Server) SetInstantEmpty(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instantEmpty = on
	s.notifyLocked()
}

// applyFault carries out f and reports whether it answered the request.
func (s *Server) applyFault(w http.ResponseWriter, r *http.Request, f Fault) bool {
	if !faketest.Hold(r, s.done, f.Delay) {
		return true
	}
	switch {
	case f.Hangup:
		faketest.Hangup(w)
		return true
	case f.Malformed:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"ok":true,"result":[{"update_id":`))
		return true
	case f.Body != "":
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		ctype := "text/html; charset=utf-8"
		if json.Valid([]byte(f.Body)) {
			ctype = "application/json"
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", strconv.Itoa(len(f.Body)))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(f.Body))
		return true
	case f.Status != 0:
		desc := f.Description
		if desc == "" {
			desc = statusDescription(f.Status, f.RetryAfter)
		}
		writeError(w, &apiError{code: f.Status, desc: desc, retryAfter: f.RetryAfter})
		return true
	}
	return false
}

// statusDescription is Telegram's description for an error code.
func statusDescription(code, retryAfter int) string {
	switch code {
	case http.StatusBadRequest:
		return "Bad Request"
	case http.StatusUnauthorized:
		return "Unauthorized"
	case http.StatusForbidden:
		return "Forbidden: bot was blocked by the user"
	case http.StatusNotFound:
		return "Not Found"
	case http.StatusConflict:
		return conflictPoll
	case http.StatusTooManyRequests:
		if retryAfter > 0 {
			return fmt.Sprintf("Too Many Requests: retry after %d", retryAfter)
		}
		return "Too Many Requests"
	}
	if t := http.StatusText(code); t != "" {
		return t
	}
	return fmt.Sprintf("Error %d", code)
}
