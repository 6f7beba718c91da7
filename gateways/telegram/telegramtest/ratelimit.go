package telegramtest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The per-chat rate model: about one message per second per chat, with
// short bursts tolerated, as Telegram documents it. Edits count like sends.
const (
	// ChatRateInterval is the steady rate: one send or edit per interval.
	ChatRateInterval = time.Second
	// ChatRateBurst is how many sends or edits may come back to back.
	ChatRateBurst = 3
	// chatRateGrace absorbs network jitter between the client's clock and
	// the server's, so a client that keeps the rate is never punished.
	chatRateGrace = 100 * time.Millisecond
)

// chatRated are the methods that post into a chat.
var chatRated = map[string]bool{
	"sendmessage": true, "editmessagetext": true, "editmessagereplymarkup": true,
	"sendphoto": true, "senddocument": true,
}

// chatRate is a generic cell rate algorithm per chat: next is each chat's
// theoretical arrival time.
type chatRate struct {
	on         bool
	next       map[int64]time.Time
	violations int
}

// SetChatRateLimit turns the per-chat rate model on or off (off by
// default). While on, a send or edit in a chat beyond ChatRateBurst back to
// back, then one per ChatRateInterval, is answered 429 Too Many Requests
// with retry_after, and counted in ChatRateViolations.
func (s *Server) SetChatRateLimit(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate.on = on
	clear(s.rate.next)
}

// ChatRateViolations is how many requests the per-chat rate model refused.
func (s *Server) ChatRateViolations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate.violations
}

// checkChatRate applies the rate model to a request.
func (s *Server) checkChatRate(key string, p params) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.rate.on || !chatRated[key] {
		return nil
	}
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		return nil
	}
	now := time.Now()
	tat := s.rate.next[chat]
	if tat.Before(now) {
		tat = now
	}
	tolerance := (ChatRateBurst-1)*ChatRateInterval + chatRateGrace
	if early := tat.Sub(now) - tolerance; early > 0 {
		s.rate.violations++
		s.notifyLocked()
		retry := int((early + time.Second - 1) / time.Second)
		return &apiError{code: http.StatusTooManyRequests, desc: fmt.Sprintf("Too Many Requests: retry after %d", retry), retryAfter: retry}
	}
	s.rate.next[chat] = tat.Add(ChatRateInterval)
	return nil
}
