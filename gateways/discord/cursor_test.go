package discord

import (
	"fmt"
	"testing"
)

func TestCursor(t *testing.T) {
	var c cursor
	for i := range maxTracked {
		c.advance(fmt.Sprint(100+i), "", uint64(1000+i))
	}
	c.markAnswered(map[string]bool{"100": true}) // the oldest, but latch answers it
	c.advance("100", "", 999)                    // never moves back
	c.advance("200", "7", 2000)                  // a new channel: the oldest unanswered goes
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
	c.markAnswered(map[string]bool{"owner": true})
	for i := range 3 * maxTracked {
		ch := fmt.Sprint("stranger", i)
		c.advance(ch, "", uint64(100+i))
		c.markAnswered(map[string]bool{ch: false})
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
		all.markAnswered(map[string]bool{ch: true})
	}
	if all.last("owner0") != 0 || all.last("owner1") != 11 {
		t.Errorf("cursor of owners = %+v, want the oldest gone", all.Channels)
	}
}
