package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/logkey"
)

// The terminal chat (`latch chat`) runs agent turns on the daemon's one
// local session. A turn is one POST /v1/chat: its response is NDJSON, one
// ChatEvent per line, each flushed as it happens, ending with a "final" or
// an "error" event. Closing the connection stops the turn. Approvals the
// turn asks for are answered on a second connection, POST /v1/chat/approve.

// Chat event types, the Type of a ChatEvent.
const (
	// EventText is a piece of the model's answer as it streams (Text).
	EventText = "text"
	// EventToolStarted: a tool call runs (Tool, Summary).
	EventToolStarted = "tool_started"
	// EventToolFinished: a tool call ended (Tool, Summary); Error says why
	// it failed or was not run, Denied whether the owner or the policy
	// said no.
	EventToolFinished = "tool_finished"
	// EventApproval: a tool call waits for the owner (ID, Tool, Summary,
	// and Detail: exactly what would run, every line); answer it with
	// ChatDecide.
	EventApproval = "approval"
	// EventFile: the agent handed over a workspace file (Name, Size and
	// Path, where it is on disk). It stays where it is: nothing is copied.
	EventFile = "file"
	// EventFinal ends a turn that the model finished (Text: the whole
	// answer, which also went out as text events).
	EventFinal = "final"
	// EventError ends a turn that did not finish (Text: why, one sentence
	// for the owner).
	EventError = "error"
)

// ChatEvent is one line of the stream of POST /v1/chat.
type ChatEvent struct {
	Type    string `json:"type"`
	Text    string `json:"text,omitempty"`
	ID      string `json:"id,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Summary string `json:"summary,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Error   string `json:"error,omitempty"`
	Denied  bool   `json:"denied,omitempty"`
	Name    string `json:"name,omitempty"`
	Size    int64  `json:"size,omitempty"`
	Path    string `json:"path,omitempty"`
}

// Ends reports whether ev is the last event of a turn.
func (ev ChatEvent) Ends() bool { return ev.Type == EventFinal || ev.Type == EventError }

// The owner's answers to an approval, as POST /v1/chat/approve takes them.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
	// DecisionAlways approves and stops asking for that tool for the rest
	// of the session.
	DecisionAlways = "always"
)

// Errors of the chat routes. Like the Backend sentinels they cross the
// socket, so errors.Is works on the Client's errors.
var (
	// ErrChatBusy: a turn is already running on the local session (409).
	ErrChatBusy = errors.New("a turn is already running in the terminal chat")
	// ErrNoModel: the daemon has no model to chat with (409).
	ErrNoModel = errors.New("no model is configured")
	// ErrNoApproval: no pending approval of the local session has that
	// id; it may have been answered, expired or ended with its turn (404).
	ErrNoApproval = errors.New("no such pending approval (it may have expired)")
)

// Error codes of the chat routes.
const (
	codeBusy       = "busy"
	codeNoModel    = "no_model"
	codeNoApproval = "no_approval"
	codeNoChat     = "no_chat"
)

// chatSentinel maps a chat error code back to its sentinel, or nil.
func chatSentinel(code string) error {
	switch code {
	case codeBusy:
		return ErrChatBusy
	case codeNoModel:
		return ErrNoModel
	case codeNoApproval:
		return ErrNoApproval
	}
	return nil
}

// ChatInfo describes the local session (GET /v1/chat/info).
type ChatInfo struct {
	// Enabled is false when no model is configured; turns then fail with
	// ErrNoModel.
	Enabled   bool   `json:"enabled"`
	Provider  string `json:"provider"`
	Model     string `json:"model,omitempty"`
	Workspace string `json:"workspace"`
	// Messages counts the messages of the conversation so far.
	Messages int `json:"messages"`
}

// ChatBackend runs the terminal chat. A Backend may implement it too; the
// server answers the chat routes with 404 when it does not. The daemon
// implements it, `latch chat` runs an in-process one when no daemon runs,
// and the Client implements it across the socket, so the terminal does not
// care which it talks to.
//
// Errors wrapping ErrChatBusy, ErrNoModel or ErrNoApproval are shown
// verbatim, like the Backend sentinels.
type ChatBackend interface {
	ChatInfo(ctx context.Context) (ChatInfo, error)
	// ChatTurn runs one turn with the owner's text and calls emit with
	// each event, in order, from one goroutine at a time. When it returns
	// nil, the last event it emitted ended the turn (final or error); an
	// error means the turn could not run (ErrChatBusy, ErrNoModel, …).
	// When emit fails, the turn is stopped. Ending ctx stops the turn.
	ChatTurn(ctx context.Context, text string, emit func(ChatEvent) error) error
	// ChatDecide answers the pending approval id with one of the
	// Decision values.
	ChatDecide(ctx context.Context, id, decision string) error
	// ChatReset starts a fresh conversation (ErrChatBusy during a turn).
	ChatReset(ctx context.Context) error
}

var _ ChatBackend = (*Client)(nil)

type chatRequest struct {
	Text string `json:"text"`
}

type decideRequest struct {
	ID       string `json:"id"`
	Decision string `json:"decision"`
}

// maxChatLine bounds one event the client reads: a final answer is at most
// the model's output limit, well under this even JSON-escaped.
const maxChatLine = 8 << 20

// ChatInfo describes the daemon's local session.
func (c *Client) ChatInfo(ctx context.Context) (ChatInfo, error) {
	var info ChatInfo
	if err := c.do(ctx, http.MethodGet, "/v1/chat/info", nil, &info); err != nil {
		return ChatInfo{}, fmt.Errorf("chat: %w", err)
	}
	return info, nil
}

// ChatTurn runs a turn in the daemon and calls emit with each event as it
// arrives. Unlike the other calls it has no overall time limit: a turn may
// wait for an approval for minutes. Cancel ctx to stop it.
func (c *Client) ChatTurn(ctx context.Context, text string, emit func(ChatEvent) error) error {
	resp, err := c.stream(ctx, "/v1/chat", chatRequest{Text: text})
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxChatLine)
	for sc.Scan() {
		var ev ChatEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("chat: decode daemon event: %w", err)
		}
		if err := emit(ev); err != nil {
			return err
		}
		if ev.Ends() {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	return errors.New("chat: the daemon ended the stream before the turn ended")
}

// ChatDecide answers a pending approval of the daemon's local session.
func (c *Client) ChatDecide(ctx context.Context, id, decision string) error {
	if err := c.do(ctx, http.MethodPost, "/v1/chat/approve", decideRequest{ID: id, Decision: decision}, nil); err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	return nil
}

// ChatReset starts a fresh conversation on the daemon's local session.
func (c *Client) ChatReset(ctx context.Context) error {
	if err := c.do(ctx, http.MethodPost, "/v1/chat/new", struct{}{}, nil); err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	return nil
}

// stream POSTs in to path and returns the 200 response with its body
// unread, through an http.Client without the overall timeout of c.http.
func (c *Client) stream(ctx context.Context, path string, in any) (*http.Response, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Transport: c.http.Transport, CheckRedirect: c.http.CheckRedirect}
	resp, err := hc.Do(req)
	if err != nil {
		if nd, ok := errors.AsType[*noDaemonError](err); ok {
			return nil, nd
		}
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp.StatusCode, io.LimitReader(resp.Body, maxResponseBytes))
	}
	return resp, nil
}

// chatBackend returns the backend's chat, or answers 404 for a backend
// without one.
func (s *Server) chatBackend(w http.ResponseWriter) (ChatBackend, bool) {
	cb, ok := s.backend.(ChatBackend)
	if !ok {
		writeError(w, http.StatusNotFound, codeNoChat, "this daemon has no terminal chat")
	}
	return cb, ok
}

func (s *Server) handleChatInfo(w http.ResponseWriter, r *http.Request) {
	cb, ok := s.chatBackend(w)
	if !ok {
		return
	}
	info, err := cb.ChatInfo(r.Context())
	if err != nil {
		s.chatError(w, "chat info", err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	cb, ok := s.chatBackend(w)
	if !ok {
		return
	}
	var req chatRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		writeError(w, http.StatusBadRequest, codeBadRequest, "text is required")
		return
	}
	// The server's write timeout is for short calls, and a turn may wait
	// minutes for the model or an approval: each line gets a deadline of
	// its own instead, so a caller that stops reading still cannot hold
	// the turn. (Once the body is read, net/http lifts the read deadline
	// itself.)
	st := &chatStream{w: w, rc: http.NewResponseController(w), timeout: s.http.WriteTimeout}
	err := cb.ChatTurn(r.Context(), req.Text, st.emit)
	switch {
	case err == nil:
	case !st.started():
		s.chatError(w, logkey.Chat, err)
	default:
		s.log.Error("control: chat turn failed", logkey.Err, err)
		st.emit(ChatEvent{Type: EventError, Text: "The turn failed inside the daemon; see its log."})
	}
}

func (s *Server) handleChatApprove(w http.ResponseWriter, r *http.Request) {
	cb, ok := s.chatBackend(w)
	if !ok {
		return
	}
	var req decideRequest
	if !decodeBody(w, r, &req) {
		return
	}
	switch {
	case req.ID == "":
		writeError(w, http.StatusBadRequest, codeBadRequest, "id is required")
		return
	case req.Decision != DecisionApprove && req.Decision != DecisionDeny && req.Decision != DecisionAlways:
		writeError(w, http.StatusBadRequest, codeBadRequest,
			fmt.Sprintf("decision must be %q, %q or %q", DecisionApprove, DecisionDeny, DecisionAlways))
		return
	}
	if err := cb.ChatDecide(r.Context(), req.ID, req.Decision); err != nil {
		s.chatError(w, "chat approve", err)
		return
	}
	peer, _ := PeerFromContext(r.Context())
	s.log.Info("control: chat approval answered", "decision", req.Decision, "peer_pid", peer.PID)
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) handleChatNew(w http.ResponseWriter, r *http.Request) {
	cb, ok := s.chatBackend(w)
	if !ok {
		return
	}
	var req struct{}
	if !decodeBody(w, r, &req) {
		return
	}
	if err := cb.ChatReset(r.Context()); err != nil {
		s.chatError(w, "chat new", err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// chatError answers with the status of a chat sentinel, or hands the
// error to backendError.
func (s *Server) chatError(w http.ResponseWriter, op string, err error) {
	switch {
	case errors.Is(err, ErrChatBusy):
		writeError(w, http.StatusConflict, codeBusy, err.Error())
	case errors.Is(err, ErrNoModel):
		writeError(w, http.StatusConflict, codeNoModel, err.Error())
	case errors.Is(err, ErrNoApproval):
		writeError(w, http.StatusNotFound, codeNoApproval, err.Error())
	default:
		s.backendError(w, op, err)
	}
}

// chatStream writes a turn's events as NDJSON. The status line goes out
// with the first event, so an error before it still gets a proper status.
type chatStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration

	mu    sync.Mutex
	begun bool
	err   error // the first write error; the caller is gone
}

func (st *chatStream) started() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.begun
}

func (st *chatStream) emit(ev ChatEvent) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return st.err
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if !st.begun {
		h := st.w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("X-Content-Type-Options", "nosniff")
		st.w.WriteHeader(http.StatusOK)
		st.begun = true
	}
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
	if _, err := st.w.Write(append(line, '\n')); err != nil {
		st.err = err
		return err
	}
	if err := st.rc.Flush(); err != nil {
		st.err = err
		return err
	}
	return nil
}
