package matrix

import (
	"encoding/json"
	"slices"

	"maunium.net/go/mautrix/id"
)

// maxSeen bounds the event IDs the cursor keeps to drop an event served
// again: far more than a sync batch holds of the owner's.
const maxSeen = 256

// cursor is what the gateway stores through Sink.Ingest: /sync's
// next_batch, the IDs of the events handled recently, and the latched
// room with its user (the Hub's latch is the authority; this lets the
// gateway decline invites from anyone else).
type cursor struct {
	Batch string       `json:"b,omitempty"`
	Seen  []id.EventID `json:"s,omitempty"`
	Owner owner        `json:"o,omitzero"`
}

// owner is the latched room and the user in it, as far as the gateway
// knows: set from the Hub's Paired reply.
type owner struct {
	Room id.RoomID `json:"r,omitempty"`
	User id.UserID `json:"u,omitempty"`
}

func parseCursor(s string) cursor {
	var c cursor
	if s != "" && json.Unmarshal([]byte(s), &c) != nil {
		// An old or damaged cursor: start from now, as on a first start.
		return cursor{}
	}
	if len(c.Seen) > maxSeen {
		c.Seen = c.Seen[len(c.Seen)-maxSeen:]
	}
	return c
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return string(b)
}

func (c cursor) seen(e id.EventID) bool { return slices.Contains(c.Seen, e) }

// clone copies c, for a batch that may fail to store.
func (c cursor) clone() cursor {
	c.Seen = slices.Clone(c.Seen)
	return c
}

func (c *cursor) add(e id.EventID) {
	c.Seen = append(c.Seen, e)
	if len(c.Seen) > maxSeen {
		c.Seen = slices.Delete(c.Seen, 0, len(c.Seen)-maxSeen)
	}
}
