package matrix

import (
	"context"
	"errors"
	"strconv"
	"time"

	"maunium.net/go/mautrix/event"

	"github.com/latchd/latch/gateways/adapter"
)

// errNoE2EE: an encrypted event reached a gateway without encryption.
var errNoE2EE = errors.New("latch has no end-to-end encryption here")

// errNoRoomKey: no room key (yet) for an event's Megolm session.
var errNoRoomKey = errors.New("no room key for its session (not shared with latch's device)")

// maxHeld bounds the latched room's events held for their room key;
// heldWait is how long the sync that tries them again waits at most for
// the key's to-device message.
const (
	maxHeld  = 16
	heldWait = 2 * time.Second
)

// hold keeps an event of the latched room whose room key has not come
// (the key's to-device message may come after the event): the next sync
// tries it once more, after its to-device events. It reports whether evt
// was held; anything else is refused at once.
func (g *Gateway) hold(evt *event.Event, err error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !errors.Is(err, errNoRoomKey) || evt.RoomID != g.owner.Room || len(g.held) >= maxHeld {
		return false
	}
	g.held = append(g.held, evt)
	g.log.Debug("an encrypted event waits for its room key", "chat", string(evt.RoomID), "event", string(evt.ID))
	return true
}

// retryHeld tries the held events once more, oldest first, and refuses
// those that still cannot be decrypted.
func (g *Gateway) retryHeld(ctx context.Context) []adapter.Message {
	g.mu.Lock()
	held := g.held
	g.held = nil
	g.mu.Unlock()
	var msgs []adapter.Message
	for _, evt := range held {
		if m, ok := g.message(ctx, evt, false); ok {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// undecryptable refuses an encrypted event latch cannot decrypt: it is
// never taken for a message. The log says so with the room, the sender
// and why; Info (latch status) counts them.
func (g *Gateway) undecryptable(evt *event.Event, err error) {
	g.mu.Lock()
	g.undecrypt++
	g.mu.Unlock()
	g.log.Warn("an encrypted event could not be decrypted; it is not taken as a message",
		"chat", string(evt.RoomID), "user", string(evt.Sender), "event", string(evt.ID), "err", err)
}

func undecryptableNote(n int) string {
	return strconv.Itoa(n) + " encrypted event(s) could not be decrypted and were not taken as messages (see the log)"
}
