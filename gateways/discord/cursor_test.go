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
