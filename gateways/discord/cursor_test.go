package discord

import (
	"fmt"
	"slices"
	"testing"
)

func TestCursor(t *testing.T) {
	var c cursor
	for i := range maxTracked {
		c.advance(fmt.Sprint(100+i), "", uint64(1000+i))
	}
	c.markAnswered(map[string]reply{"100": {owner: true}}, nowhere) // the oldest, but latch answers it
	c.advance("100", "", 999)                                       // never moves back
	c.advance("200", "7", 2000)                                     // a new channel: the oldest unanswered goes
	if c.last("100") != 1000 || c.last("101") != 0 || c.last("200") != 2000 || len(c.Channels) != maxTracked {
		t.Errorf("cursor = %+v, want 100 kept (answered), 101 evicted, 200 added", c.Channels)
	}
	if !c.seen("100", 1000) || c.seen("100", 1001) || c.seen("unknown", 1) {
		t.Error("seen is wrong")
	}
	back, ok := parseCursor(c.encode())
	if !ok || fmt.Sprint(back.Channels) != fmt.Sprint(c.Channels) {
		t.Errorf("round trip: %+v, %v; want %+v", back.Channels, ok, c.Channels)
	}
	for _, bad := range []string{"42", `{"channels":[{"id":"1","last":"x"}]}`, `{"channels":[{"id":"","last":"5"}]}`} {
		if _, ok := parseCursor(bad); ok {
			t.Errorf("parseCursor(%s) accepted it", bad)
		}
	}
	if c, ok := parseCursor(""); !ok || len(c.Channels) != 0 || c.encode() != "" {
		t.Error("the empty cursor does not round-trip")
	}
}

// TestCursorKeepsOwnersChannel: strangers who were all answered (told
// their pairing code was wrong) fill the cursor; the channel a turn was
// rendered in — the latched chat — is never the one to go, however long
// its owner has been quiet.
func TestCursorKeepsOwnersChannel(t *testing.T) {
	var c cursor
	c.advance("owner", "", 1)
	c.markAnswered(map[string]reply{"owner": {owner: true}}, nowhere)
	for i := range 3 * maxTracked {
		ch := fmt.Sprint("stranger", i)
		c.advance(ch, "", uint64(100+i))
		c.markAnswered(map[string]reply{ch: {}}, nowhere)
	}
	if c.last("owner") != 1 || len(c.Channels) != maxTracked {
		t.Errorf("cursor = %+v, want the owner's channel kept among %d", c.Channels, maxTracked)
	}
	back, _ := parseCursor(c.encode())
	back.advance("new", "", 5000)
	if back.last("owner") != 1 {
		t.Errorf("after a round trip the owner's channel went: %+v", back.Channels)
	}
	// Should every channel be an owner's (the chat was latched anew many
	// times), the least recently active one goes.
	var all cursor
	for i := range maxTracked + 1 {
		ch := fmt.Sprint("owner", i)
		all.advance(ch, "", uint64(10+i))
		all.markAnswered(map[string]reply{ch: {owner: true}}, nowhere)
	}
	if all.last("owner0") != 0 || all.last("owner1") != 11 {
		t.Errorf("cursor of owners = %+v, want the oldest gone", all.Channels)
	}
}

// nowhere is a cursor.markAnswered stood that knows no channel.
func nowhere(string) (mark, bool) { return mark{}, false }

// TestCursorLatched: a channel latch was just paired to moves past the
// message that latched it, never back; an owner's channel the cursor let
// go of comes back where it stood then (as the cursor or gone says), else
// past that message; and it is the owner's.
func TestCursorLatched(t *testing.T) {
	full := func() cursor { // "dropped" went to make room
		var c cursor
		c.advance("dropped", "9", 5)
		for i := range maxTracked {
			c.advance(fmt.Sprint("other", i), "", uint64(100+i))
		}
		return c
	}
	gone := func(ch string) (mark, bool) {
		if ch == "earlier" {
			return mark{ID: ch, Guild: "8", last: 80}, true
		}
		return mark{}, false
	}
	tests := []struct {
		name, channel string
		c             cursor
		since         uint64
		last          uint64
		guild         string
	}{
		{"behind the pairing", "dm", cursorWith("dm", 10), 20, 20, ""},
		{"ahead of it", "dm", cursorWith("dm", 50), 40, 50, ""},
		{"dropped from this cursor", "dropped", full(), 3, 5, "9"},
		{"dropped before", "earlier", cursorWith("dm", 10), 30, 80, "8"},
		{"never seen (a /pair command)", "new", cursorWith("dm", 10), 90, 90, ""},
		{"a turn's, dropped before", "earlier", cursorWith("dm", 10), 0, 80, "8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.markAnswered(map[string]reply{tt.channel: {owner: true, since: tt.since}}, gone)
			i := slices.IndexFunc(c.Channels, func(m mark) bool { return m.ID == tt.channel })
			if i < 0 || len(c.Channels) > maxTracked {
				t.Fatalf("cursor = %+v, want %s in it", c.Channels, tt.channel)
			}
			if m := c.Channels[i]; m.last != tt.last || m.Guild != tt.guild || !m.Owner || !m.Answered {
				t.Errorf("%s = %+v, want last %d in guild %q, the owner's", tt.channel, m, tt.last, tt.guild)
			}
		})
	}
}

// TestCursorAnsweredStaysOut: a channel that was only answered (a
// stranger told their code was wrong) does not come back once the cursor
// let go of it.
func TestCursorAnsweredStaysOut(t *testing.T) {
	c := cursorWith("dm", 10)
	c.markAnswered(map[string]reply{"stranger": {}}, func(string) (mark, bool) { return mark{ID: "stranger", last: 5}, true })
	if len(c.Channels) != 1 {
		t.Errorf("cursor = %+v: a stranger's channel came back", c.Channels)
	}
}

func cursorWith(channel string, last uint64) cursor {
	var c cursor
	c.advance(channel, "", last)
	return c
}
