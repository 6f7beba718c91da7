package discordtest

import (
	"context"
	"slices"

	"github.com/latchd/latch/gateways/internal/faketest"
)

// Sent returns a snapshot of every message the bot sent (follow-ups
// included), oldest first.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sent, len(s.sent))
	for i, m := range s.sent {
		out[i] = m.clone()
	}
	return out
}

// SentTo returns the messages the bot sent to one channel, oldest first.
func (s *Server) SentTo(channelID string) []Sent {
	var out []Sent
	for _, m := range s.Sent() {
		if m.ChannelID == channelID {
			out = append(out, m)
		}
	}
	return out
}

// WaitSent waits until a sent message (already sent or sent later)
// satisfies match and returns the first that does. It fails when ctx ends
// or the server closes.
func (s *Server) WaitSent(ctx context.Context, match func(Sent) bool) (Sent, error) {
	return faketest.First(ctx, s.Wait, s.Sent, match)
}

// Wait waits until cond returns true. cond is evaluated now and after every
// change of the server's state (a request, a message, a gateway event), so
// it may call the server's other methods. It fails when ctx ends or the
// server closes.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	return s.changes.Wait(ctx, s.done, ErrClosed, cond)
}

// Calls returns the requests made to a route, oldest first, including
// rejected and faulted ones.
func (s *Server) Calls(route string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.calls[route])
	for i := range out {
		out[i].Body = slices.Clone(out[i].Body)
	}
	return out
}

// Count is the number of requests made to a route.
func (s *Server) Count(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls[route])
}

// Identifies returns the IDENTIFYs the gateway received, oldest first.
func (s *Server) Identifies() []Identify {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.gw.identifies)
}

// Resumes returns the RESUMEs the gateway received, oldest first.
func (s *Server) Resumes() []Resume {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.gw.resumes)
}

// Heartbeats is the number of heartbeats the gateway received.
func (s *Server) Heartbeats() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw.heartbeats
}

// Connected reports whether the current session has a live connection.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw.current != nil && s.gw.current.conn != nil
}

// SessionID is the id of the current gateway session, "" before the first
// IDENTIFY.
func (s *Server) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gw.current == nil {
		return ""
	}
	return s.gw.current.id
}
