package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/latchd/latch/logkey"
)

// authorize admits only requests whose connection's peer uid is the
// daemon's own. It runs before routing, so a stranger learns nothing,
// not even which routes exist, and the backend is never called for one.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := r.Context().Value(peerKey{}).(*peerResult)
		switch {
		case res == nil:
			s.log.Warn("control: refused request without peer credentials", "path", r.URL.Path)
			writeError(w, http.StatusForbidden, codeRefused, "refused: cannot verify the caller's identity")
		case res.err != nil:
			s.log.Warn("control: refused request, peer credentials unreadable", "path", r.URL.Path, logkey.Err, res.err)
			writeError(w, http.StatusForbidden, codeRefused, "refused: cannot verify the caller's identity")
		case res.peer.UID != s.uid:
			s.log.Warn("control: refused request from another user",
				"path", r.URL.Path, "peer_uid", res.peer.UID, "peer_pid", res.peer.PID)
			writeError(w, http.StatusForbidden, codeRefused,
				fmt.Sprintf("refused: caller uid %d is not the uid the daemon runs as", res.peer.UID))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

type route struct {
	method  string
	handler http.HandlerFunc
}

// routes dispatches by exact path, then method. It is written out rather
// than left to http.ServeMux so that 404 and 405 answer in JSON like
// everything else.
func (s *Server) routes() http.Handler {
	table := map[string]route{
		"/v1/pair":   {http.MethodPost, s.handlePair},
		"/v1/unpair": {http.MethodPost, s.handleUnpair},
		"/v1/status": {http.MethodGet, s.handleStatus},
		// The terminal chat (chat.go).
		"/v1/chat":         {http.MethodPost, s.handleChat},
		"/v1/chat/info":    {http.MethodGet, s.handleChatInfo},
		"/v1/chat/approve": {http.MethodPost, s.handleChatApprove},
		"/v1/chat/new":     {http.MethodPost, s.handleChatNew},
		// Scheduled jobs (jobs.go).
		"/v1/jobs":     {http.MethodGet, s.handleJobs},
		"/v1/jobs/add": {http.MethodPost, s.handleJobsAdd},
		"/v1/jobs/rm":  {http.MethodPost, s.handleJobsRemove},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := table[r.URL.Path]
		if !ok {
			writeError(w, http.StatusNotFound, codeNotFound, "no such endpoint: "+r.URL.Path)
			return
		}
		if r.Method != rt.method {
			w.Header().Set("Allow", rt.method)
			writeError(w, http.StatusMethodNotAllowed, codeBadMethod,
				fmt.Sprintf("%s needs %s, not %s", r.URL.Path, rt.method, r.Method))
			return
		}
		rt.handler(w, r)
	})
}

func (s *Server) handlePair(w http.ResponseWriter, r *http.Request) {
	var req MintRequest
	if !decodeBody(w, r, &req) {
		return
	}
	switch {
	case req.Gateway == "":
		writeError(w, http.StatusBadRequest, codeBadRequest, "gateway is required")
		return
	case req.TTL < 0:
		writeError(w, http.StatusBadRequest, codeBadRequest, "ttl must not be negative")
		return
	}
	res, err := s.backend.Mint(r.Context(), req)
	if err != nil {
		s.backendError(w, "pair", err)
		return
	}
	// Never log res.Code: the log outlives the code's TTL and may be read
	// by others (journald, support bundles).
	peer, _ := PeerFromContext(r.Context())
	s.log.Info("control: pairing code minted", logkey.Gateway, res.Gateway,
		"expires_at", res.ExpiresAt, "replace", req.Replace, "peer_pid", peer.PID)
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) handleUnpair(w http.ResponseWriter, r *http.Request) {
	var req unpairRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Gateway == "" {
		writeError(w, http.StatusBadRequest, codeBadRequest, "gateway is required")
		return
	}
	if err := s.backend.Unpair(r.Context(), req.Gateway); err != nil {
		s.backendError(w, "unpair", err)
		return
	}
	peer, _ := PeerFromContext(r.Context())
	s.log.Info("control: gateway unpaired", logkey.Gateway, req.Gateway, "peer_pid", peer.PID)
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.backend.Status(r.Context())
	if err != nil {
		s.backendError(w, "status", err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// backendError answers with the status a Backend sentinel maps to. Other
// errors are logged here and hidden from the caller.
func (s *Server) backendError(w http.ResponseWriter, op string, err error) {
	var status int
	var code string
	switch {
	case errors.Is(err, ErrUnknownGateway):
		status, code = http.StatusNotFound, codeUnknownGateway
	case errors.Is(err, ErrNotLatched):
		status, code = http.StatusConflict, codeNotLatched
	case errors.Is(err, ErrRefused):
		status, code = http.StatusForbidden, codeRefused
	case errors.Is(err, ErrBadJob):
		status, code = http.StatusBadRequest, codeBadJob
	case errors.Is(err, ErrLatched):
		status, code = http.StatusConflict, codeLatched
	default:
		s.log.Error("control: backend failed", "op", op, logkey.Err, err)
		writeError(w, http.StatusInternalServerError, codeInternal,
			op+" failed inside the daemon; see its log")
		return
	}
	writeError(w, status, code, err.Error())
}

// decodeBody reads exactly one JSON value of at most maxBodyBytes into v,
// or answers with an error and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		switch _, terr := dec.Token(); {
		case terr == nil:
			err = errors.New("unexpected data after the JSON value")
		case terr != io.EOF:
			err = terr
		}
	}
	if err == nil {
		return true
	}
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge,
			fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
		return false
	}
	writeError(w, http.StatusBadRequest, codeBadRequest, "invalid request body: "+err.Error())
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// The status is sent; an encoding or write error can only mean the
	// caller went away.
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Code: code})
}
