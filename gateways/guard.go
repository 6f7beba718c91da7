package gateways

import (
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/store"
)

// verdict is what the guard decides about one inbound message.
type verdict int

const (
	// drop: not ours to answer; counted, never stored.
	drop verdict = iota
	// accept: from the latched chat (and user); goes to the inbox.
	accept
	// attempt: a pairing attempt on an unlatched gateway.
	attempt
)

// classify is the chat lock. It runs inside the ingest transaction with the
// latch read in that same transaction. replacing says that the gateway's
// pending code was minted with --replace: then a latched gateway takes
// pairing attempts from other chats too (the latch they make waits for
// the owner's approval; see pairing).
func classify(l *store.Latch, m Message, allowGroups, replacing bool) verdict {
	if l != nil {
		// Only the person who paired counts: in a group latch that is the
		// point; in a private chat it is defence in depth (a button press
		// carries its presser, which must be the owner too).
		if m.ChatID == l.ChatID && (l.UserID == "" || m.UserID == l.UserID) {
			return accept
		}
		if !replacing || m.ChatID == l.ChatID {
			return drop
		}
	}
	if _, ok := pairArgument(m.Text); !ok {
		return drop
	}
	switch m.ChatType {
	case ChatPrivate:
		return attempt
	case ChatGroup:
		if allowGroups {
			return attempt
		}
	}
	return drop
}

// pairArgument extracts CODE from "/pair CODE" or "/start CODE" (also
// "/pair@bot CODE", what Telegram sends in groups). A bare "/start" is not an
// attempt: it is what a client sends when someone opens the bot.
func pairArgument(text string) (string, bool) {
	cmd, arg := splitCommand(text)
	switch cmd {
	case "pair":
		return arg, true
	case "start":
		return arg, arg != ""
	}
	return "", false
}

// splitCommand splits "/name@bot rest" into "name" and "rest". It returns
// "" for text that is not a slash command.
func splitCommand(text string) (name, arg string) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "/") {
		return "", ""
	}
	name, arg, _ = strings.Cut(text[1:], " ")
	name, _, _ = strings.Cut(name, "@")
	return strings.ToLower(name), strings.TrimSpace(arg)
}

// replyLimiter allows one reply per key per interval, in bounded memory:
// past max keys it answers no, so a flood of distinct chats costs nothing.
type replyLimiter struct {
	mu       sync.Mutex
	interval time.Duration
	max      int
	last     map[string]time.Time
}

func newReplyLimiter(interval time.Duration, max int) *replyLimiter {
	return &replyLimiter{interval: interval, max: max, last: make(map[string]time.Time)}
}

func (r *replyLimiter) allow(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.last[key]; ok && now.Sub(t) < r.interval {
		return false
	}
	if len(r.last) >= r.max {
		for k, t := range r.last {
			if now.Sub(t) >= r.interval {
				delete(r.last, k)
			}
		}
		if len(r.last) >= r.max {
			return false
		}
	}
	r.last[key] = now
	return true
}
