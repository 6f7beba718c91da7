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
	// waits is signalled each time someone waits on the clock.
	waits chan struct{}
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock {
	return &Clock{now: now, waits: make(chan struct{}, 1024)}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After fires once the clock has moved d on.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, timer{at: c.now.Add(d), c: ch})
	}
	select {
	case c.waits <- struct{}{}:
	default:
	}
	return ch
}

// Waited is signalled whenever After is called: a test can wait for the
// scheduler to go back to sleep.
func (c *Clock) Waited() <-chan struct{} { return c.waits }

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
