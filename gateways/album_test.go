package gateways

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/store"
)

// fakeClock is the Hub's clock in the album tests: an album's items are
// received at the time it shows, and its wait ends by it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// albumFixture is a paired Hub with downloads, a workspace, an agent that
// records its turns, the fake clock, and a timer the test fires: each wait
// of an album hands the test its channel on waits.
type albumFixture struct {
	*hubFixture
	bg    *buttonGateway
	ag    *decidingAgent
	clock *fakeClock
	waits chan chan time.Time
}

func newAlbumFixture(t *testing.T) *albumFixture {
	t.Helper()
	hf, bg, ag := newButtonFixture(t)
	ws, err := tools.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	hf.hub.cfg.Files = ws
	f := &albumFixture{hubFixture: hf, bg: bg, ag: ag, clock: &fakeClock{t: time.Now()}, waits: make(chan chan time.Time, 64)}
	hf.hub.cfg.Now = f.clock.now
	f.setTimer()
	// Paired before Run starts: its confirmation waits in the inbox.
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	return f
}

func (f *albumFixture) setTimer() {
	f.hub.after = func(time.Duration) <-chan time.Time {
		ch := make(chan time.Time, 1)
		f.waits <- ch
		return ch
	}
}

// restart gives the fixture a new Hub on the same store, as a new process.
func (f *albumFixture) restart() {
	f.hub = NewHub(f.hub.cfg)
	f.hub.gateways["telegram"] = f.bg
	f.setTimer()
}

// photo is an item of the album group in chat 100; its file holds id.
func (f *albumFixture) photo(id, caption, group string) Message {
	f.bg.files[id] = "bytes of " + id
	return Message{ID: id, ChatID: "100", ChatType: ChatPrivate, UserID: "100", Text: caption, Group: group,
		Files: []Attachment{{ID: id, Kind: "photo", Size: int64(len("bytes of " + id))}}}
}

// waiting waits until an album's turn waits for its timer, and returns it.
func (f *albumFixture) waiting(t *testing.T) chan time.Time {
	t.Helper()
	select {
	case ch := <-f.waits:
		return ch
	case <-time.After(10 * time.Second):
		t.Fatal("no album waited for its quiet window")
		return nil
	}
}

// joined is how many items joined chat 100's open album.
func (h *Hub) joined() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.chats[chatKey{"telegram", "100"}]; c != nil && c.album != nil {
		return len(c.album.items)
	}
	return 0
}

func (f *albumFixture) turns() []string {
	f.ag.mu.Lock()
	defer f.ag.mu.Unlock()
	return slices.Clone(f.ag.turns)
}

// settle waits until the inbox is empty and no chat has a worker.
func (f *albumFixture) settle(t *testing.T) {
	t.Helper()
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
}

// saved is how many files a turn's text says were saved.
func saved(text string) int { return strings.Count(text, "saved in the workspace as") }

// TestAlbumItemsFoldIntoOneTurn: an album whose second item is stored by a
// later Ingest, after the first is queued already (a webhook delivery, or
// a split getUpdates answer), is one turn with both files and the
// caption, answering the first item.
func TestAlbumItemsFoldIntoOneTurn(t *testing.T) {
	f := newAlbumFixture(t)
	f.run(t)
	f.gw.next(t) // the pairing confirmation
	f.ingest(t, "2", f.photo("p1", "what are these?", "0:g"))
	fire := f.waiting(t)
	f.ingest(t, "3", f.photo("p2", "", "0:g"))
	waitUntil(t, "the second item joins", func() bool { return f.hub.joined() == 1 })
	f.clock.advance(2 * time.Second)
	fire <- time.Time{}
	if r := f.gw.next(t); r.Text != "ok" || r.ReplyTo != "p1" {
		t.Fatalf("reply %+v, want the turn's answer to the album's first item", r)
	}
	f.settle(t)
	turns := f.turns()
	if len(turns) != 1 || !strings.HasPrefix(turns[0], "what are these?") || saved(turns[0]) != 2 {
		t.Fatalf("turns %q, want one with the caption and both files", turns)
	}
}

// TestMessageAfterAnAlbumItemEndsTheHold: anything else the chat sends
// ends the wait at once and runs after the album; an item of the same
// album sent after it is not folded in ahead of it.
func TestMessageAfterAnAlbumItemEndsTheHold(t *testing.T) {
	f := newAlbumFixture(t)
	f.run(t)
	f.gw.next(t)
	f.ingest(t, "2", f.photo("p1", "first", "0:g"))
	f.waiting(t) // never fired: the text must end the wait
	f.ingest(t, "3", private("100", "and this?"))
	for range 2 {
		if r := f.gw.next(t); r.Text != "ok" {
			t.Fatalf("reply %+v", r)
		}
	}
	f.ingest(t, "4", f.photo("p2", "", "0:g"))
	fire := f.waiting(t)
	f.clock.advance(2 * time.Second)
	fire <- time.Time{}
	f.gw.next(t)
	f.settle(t)
	turns := f.turns()
	if len(turns) != 3 || !strings.HasPrefix(turns[0], "first") || saved(turns[0]) != 1 ||
		turns[1] != "and this?" || saved(turns[2]) != 1 || strings.Contains(turns[2], "first") {
		t.Fatalf("turns %q, want the album's first item, the text, then the later item, in that order", turns)
	}
}

// TestStopDuringTheHoldStopsTheAlbum: /stop reaches an album waiting for
// its items as any job about to start: nothing of it runs, and no item is
// left to run after a restart.
func TestStopDuringTheHoldStopsTheAlbum(t *testing.T) {
	f := newAlbumFixture(t)
	f.run(t)
	f.gw.next(t)
	f.ingest(t, "2", f.photo("p1", "look", "0:g"))
	f.waiting(t)
	f.ingest(t, "3", f.photo("p2", "", "0:g"))
	waitUntil(t, "the second item joins", func() bool { return f.hub.joined() == 1 })
	f.ingest(t, "4", private("100", "/stop"))
	got := []string{f.gw.next(t).Text, f.gw.next(t).Text}
	slices.Sort(got)
	if want := []string{MsgStoppedBeforeStart, "Stopping: look"}; !slices.Equal(got, want) { // sorted
		t.Fatalf("replies %q, want %q", got, want)
	}
	f.settle(t)
	if turns := f.turns(); len(turns) != 0 {
		t.Fatalf("turns %q after /stop", turns)
	}
}

// TestAlbumStoredBeforeAStartRunsOnce: items stored and not folded when
// latch stopped (a crash, or items that came while it was down) are
// folded at the next start: one turn, each file once.
func TestAlbumStoredBeforeAStartRunsOnce(t *testing.T) {
	f := newAlbumFixture(t)
	f.ingest(t, "2", f.photo("p1", "both?", "0:g"))
	f.ingest(t, "3", f.photo("p2", "", "0:g"))
	f.clock.advance(10 * time.Second) // latch was down: the window is over
	f.run(t)
	f.gw.next(t)
	if r := f.gw.next(t); r.Text != "ok" {
		t.Fatalf("reply %+v", r)
	}
	f.settle(t)
	if turns := f.turns(); len(turns) != 1 || saved(turns[0]) != 2 || !strings.HasPrefix(turns[0], "both?") {
		t.Fatalf("turns %q, want one with both files", turns)
	}
}

// TestAlbumHeldAtShutdownRunsOnceAfter: Run's end during the wait starts
// nothing and loses nothing: the album stays in the inbox, not started,
// and the next start runs it once with every file.
func TestAlbumHeldAtShutdownRunsOnceAfter(t *testing.T) {
	f := newAlbumFixture(t)
	f.hub.cfg.ShutdownGrace = time.Minute // a job started now would run
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.hub.Run(ctx); close(done) }()
	f.gw.next(t)
	f.ingest(t, "2", f.photo("p1", "both?", "0:g"))
	f.waiting(t)
	f.ingest(t, "3", f.photo("p2", "", "0:g"))
	waitUntil(t, "the second item joins", func() bool { return f.hub.joined() == 1 })
	cancel()
	<-done
	if turns := f.turns(); len(turns) != 0 {
		t.Fatalf("turns %q started at shutdown", turns)
	}
	for _, s := range f.entryStates(t) {
		if s != store.Received {
			t.Fatalf("inbox %v after shutdown, want the album received", f.entryStates(t))
		}
	}
	f.restart()
	f.clock.advance(10 * time.Second)
	f.run(t)
	if r := f.gw.next(t); r.Text != "ok" {
		t.Fatalf("reply %+v", r)
	}
	f.settle(t)
	if turns := f.turns(); len(turns) != 1 || saved(turns[0]) != 2 {
		t.Fatalf("turns %q, want one with both files", turns)
	}
}

// TestEntriesWithoutAnAlbumAreNotHeld: files without a Group, and a Group
// without files, start at once: with a window of an hour and a timer that
// never fires, every turn still runs.
func TestEntriesWithoutAnAlbumAreNotHeld(t *testing.T) {
	f := newAlbumFixture(t)
	f.hub.albumWait, f.hub.albumMax = time.Hour, time.Hour
	f.run(t)
	f.gw.next(t)
	// One at a time: nothing that comes after may end a wait.
	for i, m := range []Message{
		f.photo("p1", "one", ""),
		{ID: "t", ChatID: "100", ChatType: ChatPrivate, UserID: "100", Text: "two", Group: "0:g"},
		private("100", "three"),
	} {
		f.ingest(t, string(rune('2'+i)), m)
		if r := f.gw.next(t); r.Text != "ok" {
			t.Fatalf("reply %+v", r)
		}
	}
	f.settle(t)
	if n := len(f.waits); n != 0 {
		t.Errorf("%d waits for entries of no album", n)
	}
	if turns := f.turns(); len(turns) != 3 || !strings.HasPrefix(turns[0], "one") || turns[1] != "two" || turns[2] != "three" {
		t.Fatalf("turns %q", turns)
	}
}
