package discord

import (
	"context"
	"sync"
	"time"

	"github.com/latchd/latch/gateways/internal/retry"
)

// DefaultEditInterval is the least time between two edits of messages in
// one channel. Discord lets a bot edit about five messages per five
// seconds in a channel; one edit a second stays inside that with a
// streaming answer, tool lines and button outcomes sharing the budget.
const DefaultEditInterval = time.Second

// editPacer spaces the edits of each channel: one at a time, each starting
// at least interval after the previous one ended (so Discord sees them at
// least interval apart, whatever the latency). It sits in front of
// discordgo's limiter, which still applies: a 429 or an exhausted bucket
// makes the edit wait longer, never shorter.
type editPacer struct {
	interval time.Duration

	mu    sync.Mutex
	chans map[string]*paceSlot
}

// paceSlot is one channel's state.
type paceSlot struct {
	turn  chan struct{} // holds a token while an edit is in flight
	last  time.Time     // when the last edit ended
	users int           // edits holding or waiting for turn
}

func newEditPacer(interval time.Duration) *editPacer {
	return &editPacer{interval: interval, chans: map[string]*paceSlot{}}
}

// due is how long until an edit in channel may start; 0 means now. An edit
// in flight is not counted: do still waits for it.
func (p *editPacer) due(channel string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sl := p.chans[channel]; sl != nil {
		return max(time.Until(sl.last.Add(p.interval)), 0)
	}
	return 0
}

// do runs edit (one REST call) in its turn in channel, once the interval
// since the channel's previous edit has passed, or fails when ctx ends
// first.
func (p *editPacer) do(ctx context.Context, channel string, edit func() error) error {
	sl := p.join(channel)
	defer p.leave(sl)
	select {
	case sl.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() {
		p.mu.Lock()
		sl.last = time.Now()
		p.mu.Unlock()
		<-sl.turn
	}()
	if !retry.Sleep(ctx, p.due(channel)) {
		return ctx.Err()
	}
	return edit()
}

func (p *editPacer) join(channel string) *paceSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	sl := p.chans[channel]
	if sl == nil {
		sl = &paceSlot{turn: make(chan struct{}, 1)}
		p.chans[channel] = sl
	}
	sl.users++
	return sl
}

// leave forgets the channels nobody edits whose interval has passed, so
// the map holds only channels edited lately.
func (p *editPacer) leave(sl *paceSlot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sl.users--
	for ch, s := range p.chans {
		if s.users == 0 && time.Since(s.last) >= p.interval {
			delete(p.chans, ch)
		}
	}
}
