package telegram

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// The tests here pin polling across a restart of Telegram's update ids:
// after a week without updates the next id is chosen at random, often far
// below latch's stored offset (see translate).

// texts lists the texts of the messages a sink stored, in order.
func texts(sink *memSink) []string {
	var out []string
	for _, m := range sink.storedMsgs() {
		out = append(out, m.Text)
	}
	return out
}

// say sends text from alice in her private chat and returns its update id.
func say(srv *telegramtest.Server, text string) int {
	return srv.SendText(telegramtest.Private(alice), alice, text)
}

// settled waits until the update id is stored and Telegram has been told
// so: a later poll confirmed it, so it cannot come back.
func settled(t *testing.T, srv *telegramtest.Server, sink *memSink, id int) {
	t.Helper()
	next := strconv.Itoa(id + 1)
	eventually(t, "cursor "+next, func() bool { return sink.storedNext() == next })
	waitFake(t, srv, "confirmation of "+next, func() bool { return srv.ConfirmedOffset() == id+1 })
}

// skipWeek makes the fake choose new, lower update ids and checks that they
// are far enough below offset for getUpdates to answer from the head.
func skipWeek(t *testing.T, srv *telegramtest.Server, offset int) int {
	t.Helper()
	next := srv.SkipWeek()
	if next >= offset-10 {
		t.Fatalf("SkipWeek chose %d, want far below the offset %d", next, offset)
	}
	t.Logf("update ids start again at %d (offset was %d)", next, offset)
	return next
}

func TestRunFollowsRestartedUpdateIDs(t *testing.T) {
	for _, down := range []bool{false, true} {
		t.Run(map[bool]string{false: "while running", true: "while stopped"}[down], func(t *testing.T) {
			srv := newFake(t)
			sink := &memSink{}
			g, logs := started(t, srv)
			stop := run(t, g, sink)
			before := say(srv, "before")
			settled(t, srv, sink, before)
			if down {
				_ = stop()
			}
			skipWeek(t, srv, before+1)
			after := say(srv, "after")
			if down {
				g, logs = started(t, srv) // latch starts again, with the same store
				stop = run(t, g, sink)
			}
			settled(t, srv, sink, after)
			more := say(srv, "more")
			settled(t, srv, sink, more)
			if len(logs.lines("level=WARN", "update ids started again")) != 1 {
				t.Errorf("want one warning about the restarted ids; logs:\n%s", logs)
			}

			// A later restart of latch neither loses nor repeats anything.
			_ = stop()
			g, _ = started(t, srv)
			run(t, g, sink)
			last := say(srv, "after restart")
			settled(t, srv, sink, last)
			want := []string{"before", "after", "more", "after restart"}
			if got := texts(sink); !slices.Equal(got, want) {
				t.Errorf("stored %q, want each message once: %q", got, want)
			}
		})
	}
}

// TestRunRestartBatchSurvivesCrash: latch stores the first batch of the new
// ids and dies before the next poll confirms it to Telegram. Started again,
// it must not take that batch a second time.
func TestRunRestartBatchSurvivesCrash(t *testing.T) {
	srv := newFake(t)
	sink := &memSink{}
	g, _ := started(t, srv)
	stop := run(t, g, sink)
	before := say(srv, "before")
	settled(t, srv, sink, before)
	_ = stop()

	skipWeek(t, srv, before+1)
	after := say(srv, "after")
	// The poll after the batch (the one that would confirm it) hangs.
	srv.Inject("getUpdates", telegramtest.Fault{}, telegramtest.Fault{Delay: time.Hour})
	polls := srv.Count("getUpdates")
	g, _ = started(t, srv)
	stop = run(t, g, sink)
	eventually(t, "the batch stored", func() bool { return slices.Contains(texts(sink), "after") })
	waitFake(t, srv, "the confirming poll", func() bool { return srv.Count("getUpdates") >= polls+2 })
	_ = stop() // the crash
	if srv.Pending() != 1 || srv.ConfirmedOffset() > after {
		t.Fatalf("Telegram holds %d updates, confirmed %d; want the stored one still pending", srv.Pending(), srv.ConfirmedOffset())
	}

	srv.ClearFaults("getUpdates")
	g, _ = started(t, srv)
	run(t, g, sink)
	later := say(srv, "later")
	settled(t, srv, sink, later)
	if got, want := texts(sink), []string{"before", "after", "later"}; !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q: the batch stored before the crash ran again", got, want)
	}
}

// rawAnswer is a getUpdates answer holding a text message from alice for
// each id, as a proxy might replay it.
func rawAnswer(ids ...int) string {
	var ups []string
	for _, id := range ids {
		ups = append(ups, fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"date":1700000000,`+
			`"chat":{"id":1111,"type":"private","first_name":"Alice"},`+
			`"from":{"id":1111,"is_bot":false,"first_name":"Alice"},"text":"replayed %d"}}`, id, id, id))
	}
	return `{"ok":true,"result":[` + strings.Join(ups, ",") + `]}`
}

// TestRunDropsRepeatedAnswer: an answer of updates already stored, served
// again (by a proxy, or for a retried request), is not taken for a restart
// of the ids and does not run again.
func TestRunDropsRepeatedAnswer(t *testing.T) {
	srv := newFake(t)
	sink := &memSink{}
	g, logs := started(t, srv)
	run(t, g, sink)
	one, two := say(srv, "one"), say(srv, "two")
	settled(t, srv, sink, two)
	polls := srv.Count("getUpdates") // the poll under way included
	srv.Inject("getUpdates", telegramtest.Fault{Body: rawAnswer(one, two)})
	say(srv, "three") // the poll under way returns it; the next gets the replay
	// A poll after the replayed one: the client is done with the replay.
	waitFake(t, srv, "a poll after the replay", func() bool { return srv.Count("getUpdates") >= polls+2 })
	four := say(srv, "four")
	settled(t, srv, sink, four)
	if got, want := texts(sink), []string{"one", "two", "three", "four"}; !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q", got, want)
	}
	if len(logs.lines("update ids started again")) != 0 || len(logs.lines("repeated updates already stored")) != 1 {
		t.Errorf("want the replay dropped as a repeat, not taken for a restart of the ids; logs:\n%s", logs)
	}
}

func TestTranslateBelowOffset(t *testing.T) {
	window := seen{}.withAll([]int{900, 901, 902, 903, 904})
	tests := []struct {
		name        string
		offset      int
		ids         []int
		wantIDs     []int
		wantRestart bool
		wantRepeats int
	}{
		{"no offset yet", 0, []int{5, 6}, []int{5, 6}, false, 0},
		{"in order", 905, []int{905, 906}, []int{905, 906}, false, 0},
		{"ids restarted lower", 905, []int{12, 13, 14}, []int{12, 13, 14}, true, 0},
		{"repeat of the last batch", 905, []int{903, 904}, nil, false, 2},
		{"repeat and restart mixed", 905, []int{904, 12}, []int{12}, true, 1},
		// New ids that overlap the window (a server counting from 1, an old
		// plain cursor's guessed window): what is new is taken, so the
		// offset moves and latch does not go deaf until the ids pass it.
		{"restart overlapping the window", 905, []int{899, 900, 901}, []int{899}, true, 2},
		{"below the offset among new ones", 905, []int{850, 905}, []int{905}, false, 1},
		{"same id twice", 905, []int{12, 12}, []int{12}, true, 1},
		{"invalid ids", 905, []int{0, -3, maxUpdateID + 1}, nil, false, 0},
	}
	g := New(Config{Token: testToken}, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raws []json.RawMessage
			for _, id := range tt.ids {
				raws = append(raws, json.RawMessage(fmt.Sprintf(`{"update_id":%d}`, id)))
			}
			b := g.translate(raws, tt.offset, window)
			if !slices.Equal(b.ids, tt.wantIDs) || b.restart != tt.wantRestart || b.repeats != tt.wantRepeats {
				t.Errorf("translate(%v, offset %d) took %v (restart %t, %d repeats); want %v (restart %t, %d repeats)",
					tt.ids, tt.offset, b.ids, b.restart, b.repeats, tt.wantIDs, tt.wantRestart, tt.wantRepeats)
			}
		})
	}
}

// TestRunCursorAfterRestart: the cursor stored with the first batch of new
// ids moves the offset down to them and still names the ids of before, so
// that a repeat of either is known.
func TestRunCursorAfterRestart(t *testing.T) {
	srv := newFake(t)
	sink := &memSink{}
	g, _ := started(t, srv)
	run(t, g, sink)
	before := say(srv, "before")
	settled(t, srv, sink, before)
	first := skipWeek(t, srv, before+1)
	after := say(srv, "after")
	settled(t, srv, sink, after)
	want := fmt.Sprintf("%d;%d,%d", after+1, before, first)
	if got := sink.storedCursor(); got != want || after != first {
		t.Errorf("cursor = %q, want %q", got, want)
	}
}
