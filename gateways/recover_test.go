package gateways

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/store"
)

// cutAgent records the turns and resumes the Hub asks of it. The turn "A"
// marks itself started and then runs until its context ends (a shutdown
// cuts it); every other turn completes at once.
type cutAgent struct {
	db *store.DB
	mu sync.Mutex
	// calls: "turn <text>" or "resume", in order.
	calls []string
}

func (a *cutAgent) record(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, s)
}

func (a *cutAgent) recorded() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

func (a *cutAgent) Enabled() bool { return true }

func (a *cutAgent) TurnWith(ctx context.Context, _ agent.SessionKey, text string, _ agent.Events, h agent.Hooks) error {
	if err := a.db.Update(h.Started); err != nil {
		return err
	}
	a.record("turn " + text)
	if text == "A" {
		<-ctx.Done()
		return ctx.Err()
	}
	return a.db.Update(h.Done)
}

// ResumeWith answers at once, storing the answer as the agent does: in a
// transaction with the Hub's Done hook, which deletes the entry.
func (a *cutAgent) ResumeWith(_ context.Context, _ agent.SessionKey, _ agent.Events, h agent.Hooks) error {
	a.record("resume")
	if h.Done == nil {
		a.record("resume without a Done hook")
		return nil
	}
	return a.db.Update(h.Done)
}

func (a *cutAgent) Decide(agent.SessionKey, string, agent.Decision) error { return agent.ErrNoApproval }
func (a *cutAgent) Reset(agent.SessionKey) error                          { return nil }
func (a *cutAgent) Status(agent.SessionKey) (agent.Status, error)         { return agent.Status{}, nil }

// cutTurn pairs chat 100, has it start the turn "A", stores whatever the
// chat sends while A runs (during), shuts the Hub down, which cuts A, and
// stores what the chat sends while latch is down (down). It returns the
// fixture ready to start again.
func cutTurn(t *testing.T, during, down []string) (*hubFixture, *cutAgent) {
	t.Helper()
	f := newHubFixture(t, false)
	ag := &cutAgent{db: f.db}
	f.hub.cfg.Agent = ag
	f.hub.cfg.ShutdownGrace = time.Millisecond
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.hub.Run(ctx); close(done) }()
	f.gw.next(t) // the pairing confirmation
	f.ingest(t, "2", private("100", "A"))
	waitUntil(t, "A runs", func() bool { return slices.Equal(ag.recorded(), []string{"turn A"}) })
	cursor := 3
	for _, text := range during {
		f.ingest(t, string(rune('0'+cursor)), private("100", text))
		cursor++
	}
	cancel()
	<-done
	for _, text := range down {
		f.ingest(t, string(rune('0'+cursor)), private("100", text))
		cursor++
	}
	f.hub = NewHub(f.hub.cfg)
	return f, ag
}

// TestResumedTurnKeepsItsPlace: a turn a restart cut resumes before what
// the chat sent after it. Recovery used to store the resume as a new entry
// at the end of the inbox, so a message sent while the turn ran ran first,
// and the turn it closed as cut short then had nothing to resume.
func TestResumedTurnKeepsItsPlace(t *testing.T) {
	f, ag := cutTurn(t, []string{"B"}, []string{"C"})
	f.run(t)
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
	if got, want := ag.recorded(), []string{"turn A", "resume", "turn B", "turn C"}; !slices.Equal(got, want) {
		t.Errorf("agent calls %q, want %q", got, want)
	}
}

// TestResumedTurnEndsWithItsAnswer: the resumed turn's entry is deleted in
// the transaction that stores its answer, as a turn's is, not after it: a
// crash between the two would make the next start report the answered
// turn as cut.
func TestResumedTurnEndsWithItsAnswer(t *testing.T) {
	f, ag := cutTurn(t, nil, nil)
	handled := func() (n uint64) {
		f.db.View(func(tx *store.Tx) (err error) { n, err = tx.Counter("telegram", CounterHandled); return err })
		return n
	}
	before := handled()
	f.run(t)
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
	if got := ag.recorded(); !slices.Equal(got, []string{"turn A", "resume"}) {
		t.Errorf("agent calls %q", got)
	}
	if n := handled() - before; n != 1 {
		t.Errorf("the resumed turn was counted %d times, want once", n)
	}
}

// TestStopSentWhileDownStopsTheResumedTurn: a /stop the owner sent while
// latch was down (after the turn it means) stops that turn's resumption
// instead of finding "Nothing is running." and letting it go on.
func TestStopSentWhileDownStopsTheResumedTurn(t *testing.T) {
	f, ag := cutTurn(t, nil, []string{"/stop"})
	f.run(t)
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
	if got := ag.recorded(); !slices.Equal(got, []string{"turn A"}) {
		t.Errorf("agent calls %q: the turn resumed after the /stop", got)
	}
	f.gw.mu.Lock()
	defer f.gw.mu.Unlock()
	var texts []string
	for _, r := range f.gw.sent[1:] {
		texts = append(texts, r.Text)
	}
	if !slices.Contains(texts, "Stopping: A") || !slices.Contains(texts, MsgStoppedBeforeStart) {
		t.Errorf("replies after the restart %q, want the /stop answered and the turn stopped before it resumed", texts)
	}
}

// queueNotice stores a notice to chat 100, as the CLI does for a mint made
// while latch was stopped.
func (f *hubFixture) queueNotice(t *testing.T, text string) {
	t.Helper()
	err := f.db.Update(func(tx *store.Tx) error {
		_, err := tx.AppendInbox(store.Entry{Kind: store.KindNotice, Gateway: "telegram", ChatID: "100", Text: text})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoticeIsTriedUntilDelivered: a notice — a mint announced after a
// restart, an unpair notice, an interrupted command — is sent again while
// sending fails (at start the gateway may not have connected yet), and
// deleted only once delivered. It used to be deleted after one failed try.
func TestNoticeIsTriedUntilDelivered(t *testing.T) {
	f := newHubFixture(t, false)
	f.hub.noticeWait = time.Millisecond
	f.queueNotice(t, "a code was minted")
	f.gw.mu.Lock()
	f.gw.fail = 3
	f.gw.mu.Unlock()
	f.run(t)
	if r := f.gw.next(t); r.Text != "a code was minted" {
		t.Fatalf("sent %q", r.Text)
	}
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
}

// TestNoticeStaysWhenShutdownCutsItsTries: a notice still failing at
// shutdown stays in the inbox for the next start.
func TestNoticeStaysWhenShutdownCutsItsTries(t *testing.T) {
	f := newHubFixture(t, false)
	f.hub.noticeWait = time.Millisecond
	f.hub.cfg.ShutdownGrace = time.Millisecond
	f.queueNotice(t, "a code was minted")
	f.gw.mu.Lock()
	f.gw.fail = 1 << 30
	f.gw.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.hub.Run(ctx); close(done) }()
	waitUntil(t, "a few tries", func() bool { f.gw.mu.Lock(); defer f.gw.mu.Unlock(); return f.gw.tries >= 3 })
	cancel()
	<-done
	if n := f.inboxLen(t); n != 1 {
		t.Errorf("inbox holds %d entries after the shutdown, want the notice", n)
	}
}

// TestRefusedNoticeDoesNotHoldUpTheChat: a notice the platform refuses
// (ErrRejected: the chat is gone, a topic is closed) is dropped at once,
// not tried for a day while the chat's messages wait behind it.
func TestRefusedNoticeDoesNotHoldUpTheChat(t *testing.T) {
	f := newHubFixture(t, false)
	f.hub.noticeWait = time.Hour
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.queueNotice(t, "a code was minted")
	f.gw.mu.Lock()
	f.gw.fail, f.gw.failErr = 1, fmt.Errorf("%w: Bad Request: TOPIC_CLOSED", ErrRejected)
	f.gw.mu.Unlock()
	f.run(t)
	f.gw.next(t) // the pairing confirmation
	f.ingest(t, "2", private("100", "!echo next"))
	if r := f.gw.next(t); r.Text != "ran echo next" {
		t.Fatalf("reply %q, want the command's output", r.Text)
	}
}
