// Package scheduletest is the scheduler's test double: a clock that moves
// only when the test says.
package scheduletest

import (
	"sync"
	"time"
)

// Clock is a fake schedule.Clock. Its timers fire when Set or Advance
// moves it to or past their deadline.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []timer
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock {
	return &Clock{now: now}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At fires once the clock reads t or later.
func (c *Clock) At(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
	} else {
		c.timers = append(c.timers, timer{at: t, c: ch})
	}
	return ch
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t and fires the timers due by then.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(t) {
			kept = append(kept, tm)
			continue
		}
		tm.c <- t
	}
	c.timers = kept
}
