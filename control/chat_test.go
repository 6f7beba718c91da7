package control

import (
	"context"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeChat is a fakeBackend with a terminal chat whose turns run turn. Only
// the approval id "live1" is pending.
type fakeChat struct {
	*fakeBackend
	turn  func(ctx context.Context, text string, emit func(ChatEvent) error) error
	busy  bool // ChatReset answers ErrChatBusy
	mu    sync.Mutex
	turns []string
	votes []string
}

func newFakeChat(turn func(context.Context, string, func(ChatEvent) error) error) *fakeChat {
	return &fakeChat{fakeBackend: newFakeBackend(), turn: turn}
}

func (f *fakeChat) ChatInfo(ctx context.Context) (ChatInfo, error) {
	return ChatInfo{Enabled: true, Provider: "anthropic", Model: "claude-test", Workspace: "/w", Messages: 4}, nil
}

func (f *fakeChat) ChatTurn(ctx context.Context, text string, emit func(ChatEvent) error) error {
	f.mu.Lock()
	f.turns = append(f.turns, text)
	f.mu.Unlock()
	return f.turn(ctx, text, emit)
}

func (f *fakeChat) ChatDecide(ctx context.Context, id, decision string) error {
	if id != "live1" {
		return ErrNoApproval
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.votes = append(f.votes, id+" "+decision)
	return nil
}

func (f *fakeChat) ChatReset(ctx context.Context) error {
	if f.busy {
		return ErrChatBusy
	}
	return nil
}

func (f *fakeChat) turnCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.turns)
}

// emitAll emits evs in order.
func emitAll(emit func(ChatEvent) error, evs ...ChatEvent) error {
	for _, ev := range evs {
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// TestChatStreamsEachEvent shows every event reaches the client as soon as
// it is emitted: the backend waits for the client to have seen the first
// one before it sends the rest, which deadlocks unless each line is
// flushed.
func TestChatStreamsEachEvent(t *testing.T) {
	seen := make(chan struct{})
	want := []ChatEvent{
		{Type: EventText, Text: "Hel"},
		{Type: EventText, Text: "lo"},
		{Type: EventApproval, ID: "live1", Tool: "bash", Summary: "make test"},
		{Type: EventToolStarted, Tool: "bash", Summary: "make test"},
		{Type: EventToolFinished, Tool: "bash", Summary: "make test", Error: "exit status 2"},
		{Type: EventFile, Name: "r.pdf", Size: 1234, Path: "/w/out/r.pdf"},
		{Type: EventFinal, Text: "Hello"},
	}
	b := newFakeChat(func(ctx context.Context, text string, emit func(ChatEvent) error) error {
		if err := emit(want[0]); err != nil {
			return err
		}
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
			return errors.New("the client never saw the first event: it was not flushed")
		}
		return emitAll(emit, want[1:]...)
	})
	ts := startServer(t, b, nil, nil)
	var got []ChatEvent
	err := NewClient(ts.path).ChatTurn(t.Context(), "say hello", func(ev ChatEvent) error {
		if len(got) == 0 {
			close(seen)
		}
		got = append(got, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("ChatTurn: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %+v\nwant %+v", got, want)
	}
	if b.turns[0] != "say hello" {
		t.Errorf("backend got text %q", b.turns[0])
	}
}

func TestChatRoundTrip(t *testing.T) {
	b := newFakeChat(nil)
	ts := startServer(t, b, nil, nil)
	c := NewClient(ts.path)
	info, err := c.ChatInfo(t.Context())
	if want := (ChatInfo{Enabled: true, Provider: "anthropic", Model: "claude-test", Workspace: "/w", Messages: 4}); err != nil || info != want {
		t.Errorf("ChatInfo = %+v, %v; want %+v", info, err, want)
	}
	if err := c.ChatDecide(t.Context(), "live1", DecisionAlways); err != nil {
		t.Errorf("ChatDecide: %v", err)
	}
	if err := c.ChatDecide(t.Context(), "gone1", DecisionApprove); !errors.Is(err, ErrNoApproval) {
		t.Errorf("ChatDecide of an unknown id = %v, want ErrNoApproval", err)
	}
	if want := []string{"live1 always"}; !reflect.DeepEqual(b.votes, want) {
		t.Errorf("decisions = %q, want %q", b.votes, want)
	}
	if err := c.ChatReset(t.Context()); err != nil {
		t.Errorf("ChatReset: %v", err)
	}
	b.busy = true
	if err := c.ChatReset(t.Context()); !errors.Is(err, ErrChatBusy) {
		t.Errorf("ChatReset during a turn = %v, want ErrChatBusy", err)
	}
}

func TestChatTurnErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		turn     func(context.Context, string, func(ChatEvent) error) error
		sentinel error  // what the error must wrap
		wantMsg  string // what it must say
		wantLast ChatEvent
	}{
		{name: "busy", sentinel: ErrChatBusy, wantMsg: "already running",
			turn: func(context.Context, string, func(ChatEvent) error) error { return ErrChatBusy }},
		{name: "no model", sentinel: ErrNoModel, wantMsg: "no model",
			turn: func(context.Context, string, func(ChatEvent) error) error { return ErrNoModel }},
		{name: "internal before the stream", wantMsg: "chat failed inside the daemon",
			turn: func(context.Context, string, func(ChatEvent) error) error {
				return errors.New("open /home/owner/.latch/secret-db: broken")
			}},
		{name: "internal during the stream",
			wantLast: ChatEvent{Type: EventError, Text: "The turn failed inside the daemon; see its log."},
			turn: func(_ context.Context, _ string, emit func(ChatEvent) error) error {
				emit(ChatEvent{Type: EventText, Text: "hi"})
				return errors.New("open /home/owner/.latch/secret-db: broken")
			}},
		{name: "stream cut without an end", wantMsg: "before the turn ended",
			turn: func(_ context.Context, _ string, emit func(ChatEvent) error) error {
				return emit(ChatEvent{Type: EventText, Text: "hi"})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			ts := startServer(t, newFakeChat(tc.turn), testLogger(t, &logs), nil)
			var last ChatEvent
			err := NewClient(ts.path).ChatTurn(t.Context(), "hi", func(ev ChatEvent) error { last = ev; return nil })
			if tc.wantLast.Type != "" {
				if err != nil || last != tc.wantLast {
					t.Fatalf("got %v, last event %+v; want nil and %+v", err, last, tc.wantLast)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("ChatTurn = %v, want an error saying %q", err, tc.wantMsg)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("ChatTurn = %v, want it to wrap %v", err, tc.sentinel)
			}
			if strings.Contains(err.Error(), "secret-db") {
				t.Errorf("the error leaks the daemon's internals: %v", err)
			}
		})
	}
}

func TestChatBadRequests(t *testing.T) {
	b := newFakeChat(func(context.Context, string, func(ChatEvent) error) error { return nil })
	ts := startServer(t, b, nil, nil)
	for _, tc := range []struct {
		name, method, url, body string
		wantStatus              int
	}{
		{"no text", "POST", "/v1/chat", `{}`, http.StatusBadRequest},
		{"blank text", "POST", "/v1/chat", `{"text":" \n"}`, http.StatusBadRequest},
		{"unknown field", "POST", "/v1/chat", `{"text":"hi","session":"telegram/1001"}`, http.StatusBadRequest},
		{"text over 64 KiB", "POST", "/v1/chat", `{"text":"` + strings.Repeat("x", maxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge},
		{"GET turn", "GET", "/v1/chat", ``, http.StatusMethodNotAllowed},
		{"approve without id", "POST", "/v1/chat/approve", `{"decision":"approve"}`, http.StatusBadRequest},
		{"approve bad decision", "POST", "/v1/chat/approve", `{"id":"live1","decision":"yes"}`, http.StatusBadRequest},
		{"approve unknown id", "POST", "/v1/chat/approve", `{"id":"nope1","decision":"deny"}`, http.StatusNotFound},
		{"new with a body", "POST", "/v1/chat/new", `{"all":true}`, http.StatusBadRequest},
		{"POST info", "POST", "/v1/chat/info", `{}`, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, eb := rawDo(t, ts.path, tc.method, tc.url, tc.body)
			if status != tc.wantStatus || eb.Error == "" {
				t.Errorf("got %d %+v, want %d with a JSON error", status, eb, tc.wantStatus)
			}
		})
	}
	if n := b.turnCount(); n != 0 {
		t.Errorf("%d turns ran for bad requests, want 0", n)
	}
}

// TestChatWithoutChatBackend: a daemon whose backend has no chat says so.
func TestChatWithoutChatBackend(t *testing.T) {
	ts := startServer(t, newFakeBackend(), nil, nil)
	_, err := NewClient(ts.path).ChatInfo(t.Context())
	if err == nil || !strings.Contains(err.Error(), "no terminal chat") {
		t.Errorf("ChatInfo = %v, want an error saying the daemon has no terminal chat", err)
	}
	status, eb := rawDo(t, ts.path, "POST", "/v1/chat", `{"text":"hi"}`)
	if status != http.StatusNotFound || eb.Code != codeNoChat {
		t.Errorf("POST /v1/chat: %d %+v, want 404 %s", status, eb, codeNoChat)
	}
}

// TestChatDisconnectStopsTurn: when the terminal goes away, the turn's
// context ends, so its tools are stopped and nobody waits on an approval.
func TestChatDisconnectStopsTurn(t *testing.T) {
	ended := make(chan error, 1)
	b := newFakeChat(func(ctx context.Context, _ string, emit func(ChatEvent) error) error {
		emit(ChatEvent{Type: EventApproval, ID: "live1", Tool: "bash"})
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-time.After(20 * time.Second):
			ended <- errors.New("still running 20s after the client left")
		}
		return nil
	})
	ts := startServer(t, b, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	err := NewClient(ts.path).ChatTurn(ctx, "hi", func(ChatEvent) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ChatTurn after cancel = %v, want context.Canceled", err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("turn context: %v, want canceled", err)
	}
}

// TestChatOutlivesServerTimeouts: the server's read and write timeouts are
// for short calls; a turn that takes longer than both (an approval can take
// minutes) must neither be cut off nor have its context ended.
func TestChatOutlivesServerTimeouts(t *testing.T) {
	const timeout = 100 * time.Millisecond
	b := newFakeChat(func(ctx context.Context, _ string, emit func(ChatEvent) error) error {
		emit(ChatEvent{Type: EventText, Text: "thinking"})
		select {
		case <-ctx.Done():
			return emit(ChatEvent{Type: EventError, Text: "turn context ended: " + ctx.Err().Error()})
		case <-time.After(5 * timeout):
		}
		return emit(ChatEvent{Type: EventFinal, Text: "done"})
	})
	ts := startServer(t, b, nil, func(s *Server) {
		s.http.ReadTimeout, s.http.WriteTimeout = timeout, timeout
	})
	var last ChatEvent
	err := NewClient(ts.path).ChatTurn(t.Context(), "hi", func(ev ChatEvent) error { last = ev; return nil })
	if err != nil || last != (ChatEvent{Type: EventFinal, Text: "done"}) {
		t.Errorf("ChatTurn = %v, last event %+v; want the final answer", err, last)
	}
}

// TestChatRefusedForOtherUID: the chat routes sit behind the same peer
// check as the rest; another user cannot run or approve anything.
func TestChatRefusedForOtherUID(t *testing.T) {
	b := newFakeChat(func(context.Context, string, func(ChatEvent) error) error { return nil })
	ts := startServer(t, b, nil, func(s *Server) { s.uid = uint32(os.Getuid()) + 1 })
	for _, tc := range []struct{ method, url, body string }{
		{"POST", "/v1/chat", `{"text":"hi"}`},
		{"POST", "/v1/chat/approve", `{"id":"live1","decision":"always"}`},
		{"POST", "/v1/chat/new", `{}`},
		{"GET", "/v1/chat/info", ``},
	} {
		if status, eb := rawDo(t, ts.path, tc.method, tc.url, tc.body); status != http.StatusForbidden || eb.Code != codeRefused {
			t.Errorf("%s %s: got %d %q, want 403 %q", tc.method, tc.url, status, eb.Code, codeRefused)
		}
	}
	if b.turnCount() != 0 || len(b.votes) != 0 {
		t.Errorf("backend ran %d turns and took %d decisions for another uid", b.turnCount(), len(b.votes))
	}
}
