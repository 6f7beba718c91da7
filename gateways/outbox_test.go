package gateways

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/store"
)

// restart shuts f's Hub down (the grace is short) and gives f a new one
// on the same store, its gateway sending again.
func (f *hubFixture) restart(t *testing.T, cancel context.CancelFunc, done <-chan struct{}) {
	t.Helper()
	cancel()
	<-done
	f.gw.mu.Lock()
	f.gw.fail = 0
	f.gw.mu.Unlock()
	f.hub = NewHub(f.hub.cfg)
}

// startHub runs f's Hub until the returned cancel; done closes once Run
// has returned.
func (f *hubFixture) startHub() (cancel context.CancelFunc, done chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { f.hub.Run(ctx); close(done) }()
	return cancel, done
}

func (f *hubFixture) failSends() {
	f.gw.mu.Lock()
	f.gw.fail = 1 << 30
	f.gw.mu.Unlock()
}

// TestCrashedCommandMayHaveRun: a command latch died under (found running,
// with no answer stored) is reported as one that may have run — the crash
// may have come between its exit and the commit of its answer — never as
// "not run".
func TestCrashedCommandMayHaveRun(t *testing.T) {
	f := newHubFixture(t, false)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.ingest(t, "2", private("100", "!touch once"))
	err := f.db.Update(func(tx *store.Tx) error {
		var seq uint64
		tx.ScanInbox(0, func(e store.Entry) bool { seq = e.Seq; return true })
		return tx.SetInboxState(seq, store.Running) // as a kill -9 mid-command leaves it
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 1)
	f.shell = func(_ context.Context, cmd string) string { ran <- cmd; return "" }
	f.run(t)
	var texts []string
	for range 2 {
		texts = append(texts, f.gw.next(t).Text)
	}
	if !slices.Contains(texts, MsgMayHaveRun+"!touch once") {
		t.Errorf("replies %q, want the command reported as one that may have run", texts)
	}
	if len(ran) != 0 {
		t.Error("the command ran again")
	}
}

// TestStoredAnswerComesBeforeNewerWork: an answer stored before a crash is
// sent after the restart, marked as sent again, before what the chat sent
// after the command; the command does not run again and is not reported.
func TestStoredAnswerComesBeforeNewerWork(t *testing.T) {
	f := newHubFixture(t, false)
	f.hub.noticeWait = time.Millisecond
	f.hub.cfg.ShutdownGrace = time.Millisecond
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	cancel, done := f.startHub()
	f.gw.next(t) // the pairing confirmation
	f.failSends()
	f.ingest(t, "2", private("100", "!echo one"))
	waitUntil(t, "the answer is tried", func() bool { f.gw.mu.Lock(); defer f.gw.mu.Unlock(); return f.gw.tries >= 2 })
	f.restart(t, cancel, done)
	f.ingest(t, "3", private("100", "!echo two"))
	runs := make(chan string, 10)
	f.shell = func(_ context.Context, cmd string) string { runs <- cmd; return "ran " + cmd }
	f.run(t)
	if r := f.gw.next(t); r.Text != MsgSentAgain+"ran echo one" || !r.Pre {
		t.Fatalf("first reply after the restart %+v, want the stored answer, marked", r)
	}
	if r := f.gw.next(t); r.Text != "ran echo two" {
		t.Fatalf("second reply %+v, want the newer command's", r)
	}
	if got := <-runs; got != "echo two" || len(runs) != 0 {
		t.Errorf("commands run after the restart: %q and %d more, want only echo two", got, len(runs))
	}
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
}

// answerAgent completes every turn: it shows the final answer, then runs
// the Done hook, as the agent does (Final comes before the save). It
// notes how many replies the gateway had when Final returned.
type answerAgent struct {
	cutAgent
	gw *memGateway
	mu sync.Mutex
	// atFinal: the gateway's replies when Final returned, per turn.
	atFinal []int
}

func (a *answerAgent) TurnWith(_ context.Context, _ agent.SessionKey, text string, ev agent.Events, h agent.Hooks) error {
	if err := a.db.Update(h.Started); err != nil {
		return err
	}
	ev.Final("answer to " + text)
	a.mu.Lock()
	a.atFinal = append(a.atFinal, a.gw.count())
	a.mu.Unlock()
	return a.db.Update(h.Done)
}

// TestTurnAnswerIsStoredBeforeItIsShown: a turn's final answer reaches the
// chat only once it is stored; a crash after the store and before the
// delivery sends it, marked, after the restart, and neither resumes the
// turn nor reports it as interrupted.
func TestTurnAnswerIsStoredBeforeItIsShown(t *testing.T) {
	f := newHubFixture(t, false)
	ag := &answerAgent{cutAgent: cutAgent{db: f.db}, gw: f.gw}
	f.hub.cfg.Agent = ag
	f.hub.noticeWait = time.Millisecond
	f.hub.cfg.ShutdownGrace = time.Millisecond
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	cancel, done := f.startHub()
	f.gw.next(t)
	f.ingest(t, "2", private("100", "hello"))
	if r := f.gw.next(t); r.Text != "answer to hello" {
		t.Fatalf("reply %+v", r)
	}
	ag.mu.Lock()
	atFinal := slices.Clone(ag.atFinal)
	ag.mu.Unlock()
	if !slices.Equal(atFinal, []int{1}) {
		t.Errorf("replies when Final returned %v, want [1]: the answer was shown before it was stored", atFinal)
	}
	f.failSends()
	f.ingest(t, "3", private("100", "again"))
	waitUntil(t, "the answer is tried", func() bool { f.gw.mu.Lock(); defer f.gw.mu.Unlock(); return f.gw.tries >= 4 })
	f.restart(t, cancel, done)
	f.run(t)
	if r := f.gw.next(t); r.Text != MsgSentAgain+"answer to again" {
		t.Fatalf("reply after the restart %+v, want the stored answer, marked", r)
	}
	waitUntil(t, "the inbox empties", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
	if calls := ag.recorded(); slices.Contains(calls, "resume") {
		t.Errorf("agent calls %q: an answered turn was resumed", calls)
	}
}

// TestNoticeTriedBeforeACrashSaysSentAgain: a notice latch was sending
// when it stopped may have been delivered, so the next start sends it
// marked; the pairing reply keeps its Paired flag.
func TestNoticeTriedBeforeACrashSaysSentAgain(t *testing.T) {
	f := newHubFixture(t, false)
	f.hub.noticeWait = time.Millisecond
	f.hub.cfg.ShutdownGrace = time.Millisecond
	f.failSends()
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	cancel, done := f.startHub()
	waitUntil(t, "a few tries", func() bool { f.gw.mu.Lock(); defer f.gw.mu.Unlock(); return f.gw.tries >= 3 })
	f.restart(t, cancel, done)
	f.run(t)
	r := f.gw.next(t)
	if !strings.HasPrefix(r.Text, MsgSentAgain) || !strings.HasSuffix(r.Text, MsgPaired) || !r.Paired {
		t.Fatalf("after the restart %+v, want the pairing reply marked as sent again", r)
	}
}
