package gateways

import (
	"context"
	"testing"
	"time"

	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// unpairFixture is a paired hubFixture (chat 100) whose shell records each
// command and runs it until the test releases it or the job is cancelled.
type unpairFixture struct {
	*hubFixture
	ran     chan string
	ctxs    chan context.Context // each command's context
	release chan struct{}
}

func newUnpairFixture(t *testing.T) *unpairFixture {
	t.Helper()
	f := &unpairFixture{hubFixture: newHubFixture(t, false), ran: make(chan string, 10),
		ctxs: make(chan context.Context, 10), release: make(chan struct{})}
	f.shell = func(ctx context.Context, cmd string) string {
		f.ran <- cmd
		f.ctxs <- ctx
		select {
		case <-f.release:
		case <-ctx.Done():
		}
		return "out " + cmd
	}
	f.run(t)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	if r := f.gw.next(t); r.Text != MsgPaired {
		t.Fatalf("first reply %q, want the pairing confirmation", r.Text)
	}
	return f
}

// busy has chat 100 run "!sleep 100" and queue "!rm -rf important" behind
// it; it returns the running command's context.
func (f *unpairFixture) busy(t *testing.T) context.Context {
	t.Helper()
	f.ingest(t, "2", private("100", "!sleep 100"))
	if cmd := <-f.ran; cmd != "sleep 100" {
		t.Fatalf("ran %q", cmd)
	}
	ctx := <-f.ctxs
	f.ingest(t, "3", private("100", "!rm -rf important"))
	waitUntil(t, "the second command is queued", func() bool { return f.hub.queuedIn("100") == 1 })
	return ctx
}

// unpair unlatches the gateway as `latch unpair` does: through the pairer,
// then, when unlatched is true, Hub.Unlatched.
func (f *unpairFixture) unpair(t *testing.T, unlatched bool) {
	t.Helper()
	err := f.db.Update(func(tx *store.Tx) error {
		old, err := f.pairer.Unpair(tx, "telegram")
		if err == nil && old == nil {
			t.Error("the gateway was not latched")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if unlatched {
		f.hub.Unlatched("telegram")
	}
}

// settled waits until the inbox is empty and no chat has a worker, then
// checks that the queued command never ran and that chat 100 was sent
// nothing beyond its want replies.
func (f *unpairFixture) settled(t *testing.T, want int) {
	t.Helper()
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
	select {
	case cmd := <-f.ran:
		t.Errorf("the shell ran %q after the unpair", cmd)
	default:
	}
	f.gw.mu.Lock()
	defer f.gw.mu.Unlock()
	n := 0
	for _, r := range f.gw.sent {
		if r.chatID == "100" {
			n++
			if n > want {
				t.Errorf("chat 100 was told %q after the unpair", r.Text)
			}
		}
	}
}

func (h *Hub) queuedIn(chatID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chats[chatKey{"telegram", chatID}]
	if c == nil {
		return 0
	}
	n := 0
	for _, q := range c.queue {
		if q.j != c.running {
			n++
		}
	}
	return n
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestUnpairDropsQueuedWork: `latch unpair` is the owner's emergency brake.
// A command the chat queued behind a running one must not run once the
// gateway is unpaired — whether Unlatched drops it at once or, without
// it, the worker finds the latch gone when the command's turn comes.
func TestUnpairDropsQueuedWork(t *testing.T) {
	for _, tc := range []struct {
		name      string
		unlatched bool
		// replies chat 100 may get: the pairing confirmation, and the
		// running command's output when nothing stops it.
		replies int
	}{
		{"with Unlatched", true, 1},
		{"worker re-check alone", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newUnpairFixture(t)
			f.busy(t)
			f.unpair(t, tc.unlatched)
			close(f.release)
			f.settled(t, tc.replies)
		})
	}
}

// TestUnpairThenPairAgainDropsQueuedWork: what the unpaired chat queued
// stays dropped when the gateway is paired again before it would have run,
// to another chat or to the same one, and the old chat is told nothing.
func TestUnpairThenPairAgainDropsQueuedWork(t *testing.T) {
	for _, chat := range []string{"200", "100"} {
		t.Run("paired to "+chat, func(t *testing.T) {
			f := newUnpairFixture(t)
			f.busy(t)
			f.unpair(t, true)
			later := time.Now().Add(pairing.GraceAfterUnpair)
			f.pairer.Now = func() time.Time { return later }
			f.ingest(t, "4", private(chat, "/pair "+f.mint(t)))
			if r := f.gw.next(t); r.chatID != chat || r.Text != MsgPaired {
				t.Fatalf("reply %+v, want the pairing confirmation to chat %s", r, chat)
			}
			close(f.release)
			want := 1
			if chat == "100" {
				want = 2 // paired twice
			}
			f.settled(t, want)
		})
	}
}

// TestUnlatchedCancelsTheRunningJob: the running command is cancelled as
// /stop cancels it — its processes are killed through its context — and
// its entry is finished, so no restart runs or reports it.
func TestUnlatchedCancelsTheRunningJob(t *testing.T) {
	f := newUnpairFixture(t)
	ctx := f.busy(t)
	f.unpair(t, true)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the running command was not cancelled by Unlatched")
	}
	f.settled(t, 1)
	close(f.release)
}

// TestUnpairedChatIsNotToldOfACutJob: an unpair that lands while the
// daemon shuts down leaves the chat's cut command "running" in the inbox.
// The next start must drop it silently rather than tell the unpaired chat
// that it was interrupted (and show it the command), as it tells a chat
// that is still latched (TestRunningCommandIsNotRerunAfterRestart).
func TestUnpairedChatIsNotToldOfACutJob(t *testing.T) {
	f := newHubFixture(t, false)
	cutCommand(t, f, "!cat secret-plan") // shutdown cuts the command...
	uf := &unpairFixture{hubFixture: f}
	uf.unpair(t, false) // ...and the unpair commits before the next start

	f.shell = func(ctx context.Context, cmd string) string { t.Errorf("ran %q after the restart", cmd); return "" }
	f.hub = NewHub(f.hub.cfg)
	f.run(t)
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
	f.gw.mu.Lock()
	defer f.gw.mu.Unlock()
	for _, r := range f.gw.sent[1:] {
		t.Errorf("chat %s was told %q after the unpair", r.chatID, r.Text)
	}
}
