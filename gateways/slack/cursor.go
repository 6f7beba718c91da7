package slack

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

const (
	// maxTracked bounds the conversations the cursor remembers; the
	// owner's are kept, so strangers writing cannot push them out.
	maxTracked = 8
	// maxKeys bounds the keys remembered per conversation.
	maxKeys = 48
	// redeliveryWindow: Slack tries an unacknowledged event three times,
	// the last about five minutes after the first
	// (https://api.slack.com/apis/events-api#retries); a message that much
	// older than the newest handled in its conversation was handled.
	redeliveryWindow = 10 * 60
)

// cursor is what latch stores as the gateway's cursor: per conversation,
// the newest message timestamp handled and the keys (message ts, slash
// command and press trigger ids) handled lately.
type cursor struct {
	Chats []mark `json:"chats"`
}

type mark struct {
	Chat  string   `json:"chat"` // team/channel
	Last  string   `json:"last,omitempty"`
	Keys  []string `json:"keys,omitempty"`
	Owner bool     `json:"owner,omitempty"`
}

func parseCursor(s string) cursor {
	var c cursor
	if s != "" && json.Unmarshal([]byte(s), &c) != nil {
		return cursor{}
	}
	return c
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return string(b)
}

func (c cursor) clone() cursor {
	out := cursor{Chats: slices.Clone(c.Chats)}
	for i := range out.Chats {
		out.Chats[i].Keys = slices.Clone(out.Chats[i].Keys)
	}
	return out
}

func (c cursor) find(chat string) int {
	return slices.IndexFunc(c.Chats, func(m mark) bool { return m.Chat == chat })
}

// seen reports whether the message or action key of chat (a message's ts
// when isTS) was handled.
func (c cursor) seen(chat, key string, isTS bool) bool {
	i := c.find(chat)
	if i < 0 {
		return false
	}
	m := c.Chats[i]
	if slices.Contains(m.Keys, key) {
		return true
	}
	return isTS && m.Last != "" && seconds(key)+redeliveryWindow < seconds(m.Last)
}

// add records key as handled in chat (and, for a ts, moves Last on).
func (c *cursor) add(chat, key string, isTS bool) {
	m := &c.Chats[c.slot(chat)]
	if !slices.Contains(m.Keys, key) {
		m.Keys = append(m.Keys, key)
		if len(m.Keys) > maxKeys {
			m.Keys = m.Keys[len(m.Keys)-maxKeys:]
		}
	}
	if isTS && tsAfter(key, m.Last) {
		m.Last = key
	}
}

// slot is chat's index, adding it (and making room) if missing.
func (c *cursor) slot(chat string) int {
	if i := c.find(chat); i >= 0 {
		return i
	}
	if len(c.Chats) >= maxTracked {
		c.evict()
	}
	c.Chats = append(c.Chats, mark{Chat: chat})
	return len(c.Chats) - 1
}

// evict forgets the least recent conversation that is not the owner's.
func (c *cursor) evict() {
	victim := -1
	for i, m := range c.Chats {
		if m.Owner {
			continue
		}
		if victim < 0 || tsAfter(c.Chats[victim].Last, m.Last) {
			victim = i
		}
	}
	if victim < 0 {
		victim = 0
	}
	c.Chats = slices.Delete(c.Chats, victim, victim+1)
}

// markOwners flags the latched conversations, adding them if missing.
func (c *cursor) markOwners(owners map[string]bool) {
	for chat := range owners {
		c.Chats[c.slot(chat)].Owner = true
	}
}

func (c cursor) owners() []mark {
	var out []mark
	for _, m := range c.Chats {
		if m.Owner {
			out = append(out, m)
		}
	}
	return out
}

// tsAfter reports whether Slack timestamp a is later than b ("" is
// earliest). Timestamps are "seconds.micros" with six digits.
func tsAfter(a, b string) bool {
	if b == "" {
		return a != ""
	}
	sa, ma, _ := strings.Cut(a, ".")
	sb, mb, _ := strings.Cut(b, ".")
	if len(sa) != len(sb) {
		return len(sa) > len(sb)
	}
	if sa != sb {
		return sa > sb
	}
	return ma > mb
}

func seconds(ts string) int64 {
	s, _, _ := strings.Cut(ts, ".")
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
