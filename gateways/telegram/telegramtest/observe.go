package telegramtest

import (
	"context"
	"slices"
	"strings"

	"github.com/latchd/latch/gateways/internal/faketest"
)

// Sent returns a snapshot of every message the bot sent, oldest first.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sent, len(s.sent))
	for i, m := range s.sent {
		out[i] = m.clone()
	}
	return out
}

// SentTo returns the messages the bot sent to one chat, oldest first.
func (s *Server) SentTo(chatID int64) []Sent {
	var out []Sent
	for _, m := range s.Sent() {
		if m.ChatID == chatID {
			out = append(out, m)
		}
	}
	return out
}

func (m Sent) clone() Sent {
	m.Entities = slices.Clone(m.Entities)
	m.Edits = slices.Clone(m.Edits)
	m.Keyboard = cloneKeyboard(m.Keyboard)
	if m.File != nil {
		f := *m.File
		f.Data = slices.Clone(f.Data)
		m.File = &f
	}
	p := make(map[string]string, len(m.Params))
	for k, v := range m.Params {
		p[k] = v
	}
	m.Params = p
	return m
}

// WaitSent waits until a sent message (already sent or sent later) satisfies
// match and returns the first that does. It fails when ctx ends or the server
// closes.
func (s *Server) WaitSent(ctx context.Context, match func(Sent) bool) (Sent, error) {
	return faketest.First(ctx, s.Wait, s.Sent, match)
}

// Wait waits until cond returns true. cond is evaluated now and after every
// change of the server's state (a request, an update, a sent message), so it
// may call the server's other methods. It fails when ctx ends or the server
// closes.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	return s.changes.Wait(ctx, s.done, ErrClosed, cond)
}

// Count is the number of requests made to a method (case-insensitive),
// including rejected and faulted ones.
func (s *Server) Count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[strings.ToLower(method)]
}

// Calls returns the requests made to a method (case-insensitive), oldest
// first: all of them, or as many as KeepCalls keeps.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls[strings.ToLower(method)]
	if n, ok := s.keepCalls[strings.ToLower(method)]; ok && len(calls) > n {
		calls = calls[len(calls)-n:]
	}
	out := make([]Call, len(calls))
	for i, c := range calls {
		c.Params = params(c.Params).clone()
		out[i] = c
	}
	return out
}

// Current is what the user sees of the message now: Plain after the last
// editMessageText, if any.
func (m Sent) Current() string {
	for i := len(m.Edits) - 1; i >= 0; i-- {
		if m.Edits[i].Method == "editMessageText" {
			return m.Edits[i].Plain
		}
	}
	return m.Plain
}

// KeepCalls bounds what Calls returns for a method (case-insensitive) to
// its newest n requests, and what the server keeps to about twice that;
// Count still counts every request. It is for load tests that make far more
// requests than they look at, such as a flood of getUpdates calls, so that
// the fake's memory does not grow with the test's length.
func (s *Server) KeepCalls(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepCalls[strings.ToLower(method)] = max(n, 1)
}

// KeepUserMessages keeps at most n of the users' messages per chat, from
// messages delivered from now on (n <= 0 keeps all, the default). An older
// one is forgotten as if its sender had deleted it: a reply to it fails
// with "message to be replied not found" unless
// allow_sending_without_reply is set. The bot's own messages are always
// kept. It is for load tests that push far more messages than anyone
// answers.
func (s *Server) KeepUserMessages(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keepUser = max(n, 0)
}
