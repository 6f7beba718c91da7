package gateways

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/store"
)

// typingGateway is a memGateway that shows "typing…"; each call blocks
// until the test releases it.
type typingGateway struct {
	*memGateway
	typing  chan string
	release chan struct{}
}

func (g *typingGateway) Typing(_ context.Context, chatID string) {
	g.typing <- chatID
	<-g.release
}

func (f *hubFixture) entryStates(t *testing.T) []store.State {
	t.Helper()
	var states []store.State
	err := f.db.View(func(tx *store.Tx) error {
		return tx.ScanInbox(0, func(e store.Entry) bool { states = append(states, e.State); return true })
	})
	if err != nil {
		t.Fatal(err)
	}
	return states
}

// TestTypingDoesNotWaitForTheStore: "typing…" is requested before the
// running mark is stored and does not wait for it; the job itself waits
// for both, so its reply never overtakes the indicator.
func TestTypingDoesNotWaitForTheStore(t *testing.T) {
	f := newHubFixture(t, false)
	tg := &typingGateway{memGateway: f.gw, typing: make(chan string, 1), release: make(chan struct{})}
	f.hub.gateways["telegram"] = tg
	ran := make(chan string, 1)
	f.shell = func(_ context.Context, cmd string) string { ran <- cmd; return "ran " + cmd }
	f.run(t)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.gw.next(t)
	f.ingest(t, "2", private("100", "!true"))
	if chat := <-tg.typing; chat != "100" {
		t.Fatalf("typing in chat %q", chat)
	}
	// Typing is still in flight; the mark commits meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for s := f.entryStates(t); len(s) != 1 || s[0] != store.Running; s = f.entryStates(t) {
		if time.Now().After(deadline) {
			t.Fatalf("entry states %v while typing is in flight; want the mark stored meanwhile", s)
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case cmd := <-ran:
		t.Fatalf("%q ran before typing was out", cmd)
	case <-time.After(20 * time.Millisecond):
	}
	close(tg.release)
	if r := f.gw.next(t); r.Text != "ran true" {
		t.Fatalf("reply %+v", r)
	}
}

// lifecycleAgent records the inbox entry's state around the hooks the Hub
// gives a turn, and runs them in transactions of its own.
type lifecycleAgent struct {
	db        *store.DB
	failStart bool
	mu        sync.Mutex
	seen      []string
}

func (a *lifecycleAgent) Enabled() bool { return true }
func (a *lifecycleAgent) TurnWith(_ context.Context, _ agent.SessionKey, text string, ev agent.Events, h agent.Hooks) error {
	states := func(tx *store.Tx) string {
		var s []store.State
		tx.ScanInbox(0, func(e store.Entry) bool { s = append(s, e.State); return true })
		return fmt.Sprint(s)
	}
	err := a.db.Update(func(tx *store.Tx) error {
		before := states(tx)
		if a.failStart {
			a.record("start failed")
			return errors.New("disk full")
		}
		if err := h.Started(tx); err != nil {
			return err
		}
		a.record("started: " + before + " → " + states(tx))
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", agent.ErrNotStarted, err)
	}
	ev.Final("answer to " + text)
	return a.db.Update(func(tx *store.Tx) error {
		before := states(tx)
		if err := h.Done(tx); err != nil {
			return err
		}
		a.record("done: " + before + " → " + states(tx))
		return nil
	})
}

func (a *lifecycleAgent) record(s string) { a.mu.Lock(); a.seen = append(a.seen, s); a.mu.Unlock() }
func (a *lifecycleAgent) saw(s string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.seen, s)
}
func (a *lifecycleAgent) ResumeWith(context.Context, agent.SessionKey, agent.Events, agent.Hooks) error {
	return agent.ErrNothingToResume
}
func (a *lifecycleAgent) Decide(agent.SessionKey, string, agent.Decision) error { return nil }
func (a *lifecycleAgent) Reset(agent.SessionKey) error                          { return nil }
func (a *lifecycleAgent) Status(agent.SessionKey) (agent.Status, error)         { return agent.Status{}, nil }

// TestTurnEntryLifecycle: an agent turn's entry goes received → running in
// the turn's first transaction and is deleted, counted, in its last; a turn
// that could not record its start leaves the entry received for the next
// start and says nothing.
func TestTurnEntryLifecycle(t *testing.T) {
	f := newHubFixture(t, false)
	ag := &lifecycleAgent{db: f.db}
	f.hub.cfg.Agent = ag
	f.run(t)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.gw.next(t)
	f.ingest(t, "2", private("100", "hello"))
	if r := f.gw.next(t); r.Text != "answer to hello" {
		t.Fatalf("reply %+v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.inboxLen(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("entry not deleted: %v", f.entryStates(t))
		}
		time.Sleep(2 * time.Millisecond)
	}
	ag.mu.Lock()
	got := fmt.Sprint(ag.seen)
	ag.mu.Unlock()
	if want := "[started: [received] → [running] done: [running] → []]"; got != want {
		t.Errorf("lifecycle %s, want %s", got, want)
	}
	var handled uint64
	f.db.View(func(tx *store.Tx) (err error) { handled, err = tx.Counter("telegram", CounterHandled); return err })
	if handled != 1 {
		t.Errorf("handled = %d, want 1", handled)
	}

	ag.failStart = true
	f.ingest(t, "3", private("100", "again"))
	deadline = time.Now().Add(10 * time.Second)
	for !f.hub.idle() || !ag.saw("start failed") {
		if time.Now().After(deadline) {
			t.Fatal("the turn never ended")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if s := f.entryStates(t); len(s) != 1 || s[0] != store.Received {
		t.Errorf("after a failed start the inbox holds %v, want the entry received", s)
	}
	if n := f.gw.count(); n != 2 {
		t.Errorf("%d replies, want 2: a turn that never started says nothing", n)
	}
}

// idle reports whether no chat has a worker.
func (h *Hub) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.chats) == 0
}

// recordingTyper is a memGateway that records "typing…" requests.
type recordingTyper struct {
	*memGateway
	mu    sync.Mutex
	chats []string
}

func (g *recordingTyper) Typing(_ context.Context, chatID string) {
	g.mu.Lock()
	g.chats = append(g.chats, chatID)
	g.mu.Unlock()
}

func (g *recordingTyper) typed() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.chats)
}

// TestIngestTypesForTheOwnersWork: Ingest itself asks for "typing…" in the
// latched chat when a message there starts a job — once per chat and
// batch — and never for a stranger, a failed pairing attempt, a button
// press or a command answered at once. Its goroutines belong to the Hub:
// Run's end (stopEarly) waits for them, and none start after it.
func TestIngestTypesForTheOwnersWork(t *testing.T) {
	f := newHubFixture(t, false)
	tg := &recordingTyper{memGateway: f.gw}
	f.hub.gateways["telegram"] = tg
	// Paired with the Hub not running: nothing is dispatched, so every
	// "typing…" below is Ingest's own.
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	press := private("100", "")
	press.Callback = &Callback{ID: "q1", Data: "approve:x", MessageID: "7"}
	f.ingest(t, "2", private("200", "!id"), private("300", "/pair AAAA-BBBB"), press,
		private("100", "/status"), private("100", "/help"))
	f.hub.stopEarly()
	if got := tg.typed(); len(got) != 0 {
		t.Fatalf("typing in %v for no job of the owner's", got)
	}

	f = newHubFixture(t, false)
	tg = &recordingTyper{memGateway: f.gw}
	f.hub.gateways["telegram"] = tg
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.ingest(t, "2", private("200", "!id"), private("100", "!uptime"), private("100", "what now?"), private("100", "/new"))
	f.hub.stopEarly()
	if got := tg.typed(); !slices.Equal(got, []string{"100"}) {
		t.Fatalf("typing in %v, want once in the latched chat", got)
	}
	f.ingest(t, "3", private("100", "!uptime"))
	if got := tg.typed(); len(got) != 1 {
		t.Fatalf("typing in %v: a request started after the Hub stopped", got)
	}
}

// ctxTyper is a memGateway whose "typing…" request lasts until released
// and then reports whether its context had ended.
type ctxTyper struct {
	*memGateway
	started, release chan struct{}
	ended            chan error
}

func (g *ctxTyper) Typing(ctx context.Context, _ string) {
	close(g.started)
	<-g.release
	g.ended <- ctx.Err()
}

// TestEarlyTypingOutlivesIngestsContext: a webhook's Ingest runs under the
// request's context, which ends with the response — right after the
// commit, possibly before "typing…" is out. The request must go on.
func TestEarlyTypingOutlivesIngestsContext(t *testing.T) {
	f := newHubFixture(t, false)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	tg := &ctxTyper{memGateway: f.gw, started: make(chan struct{}), release: make(chan struct{}), ended: make(chan error, 1)}
	f.hub.gateways["telegram"] = tg
	ctx, cancel := context.WithCancel(context.Background())
	if err := f.hub.Ingest(ctx, "telegram", "2", []Message{private("100", "!uptime")}); err != nil {
		t.Fatal(err)
	}
	<-tg.started
	cancel() // the webhook's response is written
	close(tg.release)
	if err := <-tg.ended; err != nil {
		t.Fatalf("the typing request's context ended with Ingest's: %v", err)
	}
	f.hub.stopEarly()
}

// TestTypingDoesNotWaitForAnotherWriter: while another transaction holds
// the store's write lock (a turn saving, the held count being stored),
// Ingest waits to commit the owner's message, but its "typing…" is out
// already.
func TestTypingDoesNotWaitForAnotherWriter(t *testing.T) {
	f := newHubFixture(t, false)
	tg := &recordingTyper{memGateway: f.gw}
	f.hub.gateways["telegram"] = tg
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	writing, release := make(chan struct{}), make(chan struct{})
	writer := make(chan error, 1)
	go func() {
		writer <- f.db.Update(func(*store.Tx) error { close(writing); <-release; return nil })
	}()
	<-writing
	ingested := make(chan error, 1)
	go func() {
		ingested <- f.hub.Ingest(context.Background(), "telegram", "2", []Message{private("100", "!uptime")})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(tg.typed()) == 0 {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("no typing while another writer holds the store")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-ingested:
		t.Fatalf("Ingest returned (%v) while another writer held the store", err)
	default:
	}
	close(release)
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	if err := <-ingested; err != nil {
		t.Fatal(err)
	}
	f.hub.stopEarly()
	if got := tg.typed(); !slices.Equal(got, []string{"100"}) {
		t.Fatalf("typing in %v, want once in the latched chat", got)
	}
}

// TestTypingForTheChatABatchLatches: the read before the transaction does
// not know the latch the batch's own /pair makes; the transaction asks for
// "typing…" for the owner's work behind it, once.
func TestTypingForTheChatABatchLatches(t *testing.T) {
	f := newHubFixture(t, false)
	tg := &recordingTyper{memGateway: f.gw}
	f.hub.gateways["telegram"] = tg
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)), private("100", "!uptime"), private("100", "!id"))
	f.hub.stopEarly()
	if got := tg.typed(); !slices.Equal(got, []string{"100"}) {
		t.Fatalf("typing in %v, want once in the chat the batch latched", got)
	}
}
