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
// adapter's; but the Hub answers only that chat (and pairing attempts), so
// a channel latch sent to is "answered" and kept over the others when the
// list is full.
type cursor struct {
	Channels []mark `json:"channels"`
}

type mark struct {
	ID       string `json:"id"`
	Last     string `json:"last"`            // snowflake of the last message handled
	Guild    string `json:"guild,omitempty"` // guild id; "" for a DM
	Answered bool   `json:"answered,omitempty"`
	last     uint64
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
// room by forgetting the least recently active channel, answered ones last.
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
		if victim < 0 || m.Answered != c.Channels[victim].Answered && !m.Answered ||
			m.Answered == c.Channels[victim].Answered && m.last < c.Channels[victim].last {
			victim = i
		}
	}
	c.Channels = slices.Delete(c.Channels, victim, victim+1)
}

// markAnswered flags the channels latch sent to.
func (c *cursor) markAnswered(channels map[string]bool) {
	for i := range c.Channels {
		if channels[c.Channels[i].ID] {
			c.Channels[i].Answered = true
		}
	}
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
