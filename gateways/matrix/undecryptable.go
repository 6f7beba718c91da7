package matrix

import (
	"errors"
	"strconv"

	"maunium.net/go/mautrix/event"
)

// errNoE2EE: an encrypted event reached a gateway without encryption.
var errNoE2EE = errors.New("latch has no end-to-end encryption here")

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
