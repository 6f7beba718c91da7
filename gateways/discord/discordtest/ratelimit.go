package discordtest

import (
	"net/http"
	"time"
)

// Discord's limit on editing messages, as observed: about five edits per
// five seconds in one channel (the route's bucket is per channel). The fake
// enforces it by default; SetEditRate changes it.
const (
	DefaultEditLimit  = 5
	DefaultEditWindow = 5 * time.Second
)

// retrySlack forgives a retry that comes this much before its retry_after
// has passed: clients turn the float seconds into a duration and may lose
// a fraction of a millisecond doing so.
const retrySlack = 2 * time.Millisecond

// RateStats counts what the edit rate model saw.
type RateStats struct {
	// Injected is the number of 429s answered to edits through Inject.
	Injected int
	// Exceeded is the number of edits refused because the client edited
	// too often: over the limit of the window, or before an earlier 429's
	// retry_after had passed.
	Exceeded int
	// Early counts those of Exceeded that came while a 429's retry_after
	// (injected or not) still ran: the client ignored it.
	Early int
}

// editBucket is one channel's window of edits.
type editBucket struct {
	start   time.Time // the window's first edit
	count   int       // edits in the window
	blocked time.Time // a 429 asked the client to wait until then
}

// SetEditRate changes the edit rate model: at most limit edits of messages
// in one channel per window (a fixed window from its first edit, as
// Discord's buckets reset). limit 0 turns the model off. Past the limit an
// edit gets 429 with retry_after (until the window ends) and is not
// applied. Every edit's answer carries the bucket's X-RateLimit-* headers,
// so a client with a limiter waits without being refused.
func (s *Server) SetEditRate(limit int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.editLimit, s.editWindow = limit, window
}

// SetEditClock replaces the clock of the edit rate model (time.Now), so a
// test can move past a window without waiting for it.
func (s *Server) SetEditClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.editClock = now
}

// RateStats returns the counts of the edit rate model.
func (s *Server) RateStats() RateStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rates
}

// blockEditsLocked records an injected 429 on an edit in a channel: edits
// before retry_after has passed are early.
func (s *Server) blockEditsLocked(channelID string, retryAfter float64, now time.Time) {
	b := s.editBucketLocked(channelID)
	b.blocked = now.Add(seconds(retryAfter))
	s.rates.Injected++
	s.notifyLocked()
}

func (s *Server) editBucketLocked(channelID string) *editBucket {
	b := s.editBuckets[channelID]
	if b == nil {
		b = &editBucket{}
		s.editBuckets[channelID] = b
	}
	return b
}

// admitEditLocked applies the edit rate model to an edit in a channel.
// It sets the bucket's headers on h and returns 0 if the edit may go
// ahead, else the retry_after (seconds) to answer 429 with.
func (s *Server) admitEditLocked(h http.Header, channelID string, now time.Time) float64 {
	if s.editLimit <= 0 {
		return 0
	}
	b := s.editBucketLocked(channelID)
	if now.Add(retrySlack).Before(b.blocked) {
		s.rates.Exceeded++
		s.rates.Early++
		s.notifyLocked()
		wait := b.blocked.Sub(now).Seconds()
		setRateHeaders(h, s.editLimit, 0, wait, false)
		return wait
	}
	if b.count == 0 || !now.Before(b.start.Add(s.editWindow)) {
		b.start, b.count = now, 0
	}
	resetAfter := b.start.Add(s.editWindow).Sub(now).Seconds()
	if b.count >= s.editLimit {
		s.rates.Exceeded++
		b.blocked = b.start.Add(s.editWindow)
		s.notifyLocked()
		setRateHeaders(h, s.editLimit, 0, resetAfter, false)
		return resetAfter
	}
	b.count++
	setRateHeaders(h, s.editLimit, s.editLimit-b.count, resetAfter, false)
	return 0
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
