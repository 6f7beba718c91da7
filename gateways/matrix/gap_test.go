package matrix_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/latchd/latch/gateways/matrix/matrixtest"
)

// TestLimitedTimelineBackfilled: while latch was down the owner wrote far
// more than /sync's timeline limit in the latched room; the sync comes
// back limited and the older events are read back with /messages: every
// one is taken, once, in order, with the cursor that covers them. A
// stranger's room with as many events is not read back.
func TestLimitedTimelineBackfilled(t *testing.T) {
	const dm, other, owner, stranger = "!dm:" + matrixtest.Domain, "!other:" + matrixtest.Domain,
		"@owner:" + matrixtest.Domain, "@stranger:" + matrixtest.Domain
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	srv.Room(dm, matrixtest.Bot, owner)
	srv.Room(other, matrixtest.Bot, stranger)
	const n = 230 // past the limit (50) and past one page (100)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("%s: m%d", owner, i))
		srv.Text(owner, dm, fmt.Sprintf("m%d", i))
		srv.Text(stranger, other, fmt.Sprintf("s%d", i))
	}
	// Stored before latch went down: the latched room, the stream's start.
	s := &sink{cursor: `{"b":"0","o":{"r":"` + dm + `","u":"` + owner + `"}}`}
	running(t, newTestGateway(srv, false), s)
	ownerTexts := func() []string {
		var out []string
		for _, m := range s.texts() {
			if strings.HasPrefix(m, owner) {
				out = append(out, m)
			}
		}
		return out
	}
	waitFor(t, "the owner's messages", func() bool { return len(ownerTexts()) >= n })
	srv.Text(owner, dm, "after")
	waitFor(t, "the message after", func() bool { return has(s.texts(), owner+": after") })
	got := ownerTexts()
	if len(got) != n+1 || strings.Join(got[:n], "\n") != strings.Join(want, "\n") {
		t.Fatalf("the owner's messages: %d, want %d in order:\n%s", len(got), n+1, strings.Join(got, "\n"))
	}
	s.mu.Lock()
	first := s.sizes[0]
	s.mu.Unlock()
	if first < n {
		t.Errorf("the first batch stored %d messages, want the %d of the owner's its cursor covers with them", first, n)
	}
	for _, c := range srv.Calls("messages") {
		if strings.Contains(c.Path, other) {
			t.Errorf("a stranger's room was read back: %s", c.Path)
		}
	}
}
