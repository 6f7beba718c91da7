package telegramtest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// The rate model: about one message per second per chat, with short
// bursts tolerated, and about 20 messages per minute into one group, as
// Telegram documents them. Edits count like sends.
const (
	// ChatRateInterval is the steady rate: one send or edit per interval.
	ChatRateInterval = time.Second
	// ChatRateBurst is how many sends or edits may come back to back.
	ChatRateBurst = 3
	// GroupRateLimit is how many sends or edits a group (or supergroup)
	// takes within any GroupRateWindow.
	GroupRateLimit = 20
	// GroupRateWindow is the sliding window of GroupRateLimit.
	GroupRateWindow = time.Minute
	// chatRateGrace absorbs network jitter between the client's clock and
	// the server's, so a client that keeps the rate is never punished.
	chatRateGrace = 100 * time.Millisecond
)

// chatRated are the methods that post into a chat.
var chatRated = map[string]bool{
	"sendmessage": true, "editmessagetext": true, "editmessagereplymarkup": true,
	"sendphoto": true, "senddocument": true,
}

// chatRate is a generic cell rate algorithm per chat (next is each chat's
// theoretical arrival time) and a sliding window per group (posts holds
// the times of the group's posts within the window, oldest first).
type chatRate struct {
	on              bool
	speed           int // the model's time runs this many times faster; 1 is Telegram's
	next            map[int64]time.Time
	posts           map[int64][]time.Time
	violations      int
	groupViolations int
}

// SetChatRateLimit turns the rate model on or off (off by default). While
// on, a send or edit in a chat beyond ChatRateBurst back to back, then one
// per ChatRateInterval, is answered 429 Too Many Requests with
// retry_after, and so is one into a group or supergroup beyond
// GroupRateLimit within GroupRateWindow; both are counted in
// ChatRateViolations.
func (s *Server) SetChatRateLimit(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate.on = on
	clear(s.rate.next)
	clear(s.rate.posts)
}

// SetRateSpeed makes the rate model's time run factor times faster (1,
// the default, is Telegram's): ChatRateInterval and GroupRateWindow are
// divided by factor, the limits stay. It lets a test play minutes of a
// group's traffic in seconds, against a client whose pacing is sped up by
// the same factor. retry_after still counts whole seconds.
func (s *Server) SetRateSpeed(factor int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate.speed = max(factor, 1)
	clear(s.rate.next)
	clear(s.rate.posts)
}

// ChatRateViolations is how many requests the rate model refused, per chat
// or per group.
func (s *Server) ChatRateViolations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate.violations
}

// GroupRateViolations is how many of ChatRateViolations broke a group's
// limit (GroupRateLimit per GroupRateWindow).
func (s *Server) GroupRateViolations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate.groupViolations
}

// checkChatRate applies the rate model to a request. Only a request both
// models let through counts against them.
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
	speed := time.Duration(max(s.rate.speed, 1))
	interval, window := ChatRateInterval/speed, GroupRateWindow/speed
	now := time.Now()
	tat := s.rate.next[chat]
	if tat.Before(now) {
		tat = now
	}
	tolerance := (ChatRateBurst-1)*interval + chatRateGrace
	if early := tat.Sub(now) - tolerance; early > 0 {
		return s.refuseLocked(early, false)
	}
	if c := s.chats[chat]; c != nil && (c.chat.Type == "group" || c.chat.Type == "supergroup") {
		posts := s.rate.posts[chat]
		for len(posts) > 0 && !posts[0].After(now.Add(-window)) {
			posts = posts[1:]
		}
		if len(posts) >= GroupRateLimit {
			s.rate.posts[chat] = posts
			return s.refuseLocked(posts[0].Add(window).Sub(now), true)
		}
		s.rate.posts[chat] = append(posts, now)
	}
	s.rate.next[chat] = tat.Add(interval)
	return nil
}

// refuseLocked counts a refused request and answers it 429 with the wait
// in whole seconds (at least one).
func (s *Server) refuseLocked(wait time.Duration, group bool) *apiError {
	s.rate.violations++
	if group {
		s.rate.groupViolations++
	}
	s.notifyLocked()
	retry := max(int((wait+time.Second-1)/time.Second), 1)
	return &apiError{code: http.StatusTooManyRequests, desc: fmt.Sprintf("Too Many Requests: retry after %d", retry), retryAfter: retry}
}
