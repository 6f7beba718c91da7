package discord

import (
	"encoding/json"
	"slices"
	"strconv"
)

// maxTracked bounds the channels the cursor remembers. Once latched, only
// the latched chat matters; the others are strangers' DMs.
const maxTracked = 8

// cursor is what latch stores as the gateway's cursor: per recently active
// channel, the id of the last message handled there. Snowflakes grow with
// time, so a message at or below it was handled already, and a backfill
// asks for the messages after it.
//
// Which channel is the latched one is the Hub's business, not the
// adapter's; but the Hub answers only that chat and pairing attempts, runs
// agent turns (RenderTurn) only in that chat, and marks a reply Paired
// (gateways.Reply) only in the chat it has just latched. So a channel latch sent to is
// "answered", one told it is paired or one a turn was rendered in is the
// owner's, and when the list is full the owner's channels go last,
// answered ones before them, the others first: strangers who were told
// their code was wrong can never push the latched chat out, which would
// lose what its owner sends while latch is down.
type cursor struct {
	Channels []mark `json:"channels"`
	// dropped are the channels advance let go of to make room since the
	// cursor was cloned, as they stood then (not stored).
	dropped []mark
}

type mark struct {
	ID       string `json:"id"`
	Last     string `json:"last"`            // snowflake of the last message handled
	Guild    string `json:"guild,omitempty"` // guild id; "" for a DM
	Answered bool   `json:"answered,omitempty"`
	Owner    bool   `json:"owner,omitempty"` // latched here, or a turn was rendered here
	last     uint64
}

// keep ranks how long a channel stays in a full cursor.
func (m mark) keep() int {
	switch {
	case m.Owner:
		return 2
	case m.Answered:
		return 1
	}
	return 0
}

// parseCursor reads a stored cursor; ok is false if it is not one.
func parseCursor(s string) (cursor, bool) {
	var c cursor
	if s == "" {
		return c, true
	}
	if json.Unmarshal([]byte(s), &c) != nil {
		return cursor{}, false
	}
	out := c.Channels[:0]
	for _, m := range c.Channels {
		n, ok := snowflake(m.Last)
		if !ok || m.ID == "" {
			return cursor{}, false
		}
		m.last = n
		out = append(out, m)
	}
	c.Channels = out
	return c, true
}

func (c cursor) encode() string {
	if len(c.Channels) == 0 {
		return ""
	}
	b, _ := json.Marshal(c)
	return string(b)
}

func (c cursor) clone() cursor {
	return cursor{Channels: slices.Clone(c.Channels)}
}

// last returns the last handled id in a channel (0: none).
func (c cursor) last(channel string) uint64 {
	for _, m := range c.Channels {
		if m.ID == channel {
			return m.last
		}
	}
	return 0
}

// seen reports whether message id of channel was handled already.
func (c cursor) seen(channel string, id uint64) bool {
	return id <= c.last(channel)
}

// advance records id as handled in channel (never moving back), making
// room by forgetting the least recently active channel, answered ones
// after the others and the owner's last.
func (c *cursor) advance(channel, guild string, id uint64) {
	for i := range c.Channels {
		if c.Channels[i].ID == channel {
			if id > c.Channels[i].last {
				c.Channels[i].last, c.Channels[i].Last = id, strconv.FormatUint(id, 10)
			}
			return
		}
	}
	if len(c.Channels) >= maxTracked {
		c.evict()
	}
	c.Channels = append(c.Channels, mark{ID: channel, Last: strconv.FormatUint(id, 10), Guild: guild, last: id})
}

func (c *cursor) evict() {
	victim := -1
	for i, m := range c.Channels {
		if victim < 0 {
			victim = i
			continue
		}
		v := c.Channels[victim]
		if m.keep() < v.keep() || m.keep() == v.keep() && m.last < v.last {
			victim = i
		}
	}
	c.dropped = append(c.dropped, c.Channels[victim])
	c.Channels = slices.Delete(c.Channels, victim, victim+1)
}

// reply is what latch's sending to a channel says about it (see cursor).
type reply struct {
	owner bool // it is the latched chat
	// since is the message (or /pair command) that latched it; 0 when
	// the reply was not the answer to it.
	since uint64
}

// markAnswered flags the channels latch sent to (the keys of channels), as
// the owner's those whose reply says so. A channel that was just latched
// (since) moves past the message that latched it: what its chat sent
// before was not the owner's, and a backfill must not hand it in as theirs
// now. Should the cursor not have an owner's channel — a /pair command is
// not a message, so nothing put it there; or strangers pushed it out
// before the Hub's answer or the turn came — it comes back where it stood
// when it went (as dropped says, or else gone, for channels dropped before
// the cursor was cloned), or else just past the message that latched it:
// a backfill then fetches what the owner sent after that, and nothing
// latch handled already.
func (c *cursor) markAnswered(channels map[string]reply, gone func(channel string) (mark, bool)) {
	for id, a := range channels {
		switch {
		case c.last(id) != 0:
			if a.since > 0 {
				c.advance(id, "", a.since) // never moves back
			}
		case a.owner:
			if m, ok := c.stood(id, gone); ok || a.since > 0 {
				c.advance(id, m.Guild, max(a.since, m.last))
			}
		}
		if i := slices.IndexFunc(c.Channels, func(m mark) bool { return m.ID == id }); i >= 0 {
			c.Channels[i].Answered = true
			c.Channels[i].Owner = c.Channels[i].Owner || a.owner
		}
	}
}

// stood returns where a channel stood when it was last dropped.
func (c *cursor) stood(channel string, gone func(string) (mark, bool)) (mark, bool) {
	for _, m := range slices.Backward(c.dropped) {
		if m.ID == channel {
			return m, true
		}
	}
	return gone(channel)
}

// forget drops a channel (it is gone or latch lost access to it).
func (c *cursor) forget(channel string) {
	c.Channels = slices.DeleteFunc(c.Channels, func(m mark) bool { return m.ID == channel })
}

// snowflake parses a Discord id.
func snowflake(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}
