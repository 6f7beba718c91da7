// Package typing keeps a chat's "typing…" indicator from being asked for
// again while the one just asked for still shows.
//
// The Hub asks for it as soon as the owner's message is accepted, while
// the message commits; the job that then runs asks again (a command before
// it starts, a turn as its renderer begins). The second request would show
// nothing new, and a turn would wait for it before its first message.
package typing

import (
	"context"
	"sync"
	"time"
)

// Fresh is how long an indicator counts as showing: below Telegram's ~5 s
// and Discord's ~10 s display, and below both renderers' renewal interval.
const Fresh = 2 * time.Second

// Gate remembers, per chat, the last indicator asked for.
type Gate struct {
	fresh time.Duration
	mu    sync.Mutex
	chats map[string]*shown
}

type shown struct {
	at   time.Time
	done chan struct{} // closed when the request has ended
}

// New returns a Gate that treats an indicator as still showing for fresh
// after it was asked for, unless something was posted in the chat since.
// fresh must stay below the platform's display time and below how often a
// running job renews the indicator, so a renewal is never skipped.
func New(fresh time.Duration) *Gate {
	return &Gate{fresh: fresh, chats: make(map[string]*shown)}
}

// Show calls send to show the indicator in chat, unless one was asked for
// less than fresh ago and nothing was posted since. Then it waits for that
// request to end instead (or for ctx), so that what the caller posts next
// cannot overtake it and leave "typing…" showing after the answer.
func (g *Gate) Show(ctx context.Context, chat string, send func(context.Context)) {
	now := time.Now()
	g.mu.Lock()
	if s := g.chats[chat]; s != nil && now.Sub(s.at) < g.fresh {
		g.mu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
		}
		return
	}
	s := &shown{at: now, done: make(chan struct{})}
	g.chats[chat] = s
	g.pruneLocked(now)
	g.mu.Unlock()
	defer close(s.done)
	send(ctx)
}

// Posted records that a message went to chat: clients hide the indicator
// then, so the next Show sends it again.
func (g *Gate) Posted(chat string) {
	g.mu.Lock()
	delete(g.chats, chat)
	g.mu.Unlock()
}

// pruneLocked forgets stale entries once there are a few, so chats typed
// in once and never posted to do not accumulate.
func (g *Gate) pruneLocked(now time.Time) {
	if len(g.chats) < 64 {
		return
	}
	for c, s := range g.chats {
		if now.Sub(s.at) >= g.fresh {
			delete(g.chats, c)
		}
	}
}
