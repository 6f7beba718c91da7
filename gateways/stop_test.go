package gateways

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/store"
)

// stopFixture is a paired hubFixture whose shell records each command and
// runs it until it is stopped, and whose agent records each turn it starts.
type stopFixture struct {
	*hubFixture
	ran chan string
	ag  *lifecycleAgent
}

func newStopFixture(t *testing.T) *stopFixture {
	t.Helper()
	f := &stopFixture{hubFixture: newHubFixture(t, false), ran: make(chan string, 10)}
	f.ag = &lifecycleAgent{db: f.db}
	f.hub.cfg.Agent = f.ag
	f.shell = func(ctx context.Context, cmd string) string {
		f.ran <- cmd
		<-ctx.Done()
		return "stopped"
	}
	// Paired before Run starts: its confirmation waits in the inbox.
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	return f
}

// replies waits for n replies and returns their texts, sorted: the answer
// to /stop and the job's own reply come from different goroutines.
func (f *stopFixture) replies(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	timeout := time.After(10 * time.Second)
	for range n {
		select {
		case r := <-f.gw.ch:
			got = append(got, r.Text)
		case <-timeout:
			t.Fatalf("replies %q, then none within 10s", got)
		}
	}
	slices.Sort(got)
	return got
}

// settled waits until the inbox is empty and no chat has a worker, then
// checks that nothing ran and nothing more was said.
func (f *stopFixture) settled(t *testing.T, replies int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.inboxLen(t) != 0 || !f.hub.idle() {
		if time.Now().After(deadline) {
			t.Fatalf("inbox %v never emptied: the stopped job would run after a restart", f.entryStates(t))
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case cmd := <-f.ran:
		t.Errorf("the shell ran %q after /stop", cmd)
	default:
	}
	f.ag.mu.Lock()
	seen := slices.Clone(f.ag.seen)
	f.ag.mu.Unlock()
	if len(seen) > 0 {
		t.Errorf("the agent started a turn after /stop: %v", seen)
	}
	if n := f.gw.count(); n != replies {
		t.Errorf("%d replies, want %d", n, replies)
	}
}

// TestStopBeforeTheJobStarts: /stop reaches a job from the moment it is
// the chat's next one, not only once its work runs. A /stop in the same
// batch as the job (always so for what was sent while latch was down), or
// one that comes while the job's "typing…" and running mark are still in
// flight, must stop the job, say so, and finish its entry so that no
// restart runs it either.
func TestStopBeforeTheJobStarts(t *testing.T) {
	for _, tc := range []struct {
		name, text, stopping string
		// window: /stop comes while the job waits for its "typing…";
		// otherwise it comes in the job's own batch.
		window bool
	}{
		{"command in the same batch", "!sleep 100", "Stopping: sleep 100", false},
		{"turn in the same batch", "hello", "Stopping: hello", false},
		{"command in its start window", "!sleep 100", "Stopping: sleep 100", true},
		{"turn in its start window", "hello", "Stopping: hello", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStopFixture(t)
			var tg *typingGateway
			if tc.window {
				// Stored before Run starts and before the gateway can
				// type, so the one "typing…" request is the job's own.
				f.ingest(t, "2", private("100", tc.text))
				tg = &typingGateway{memGateway: f.gw, typing: make(chan string, 8), release: make(chan struct{})}
				f.hub.gateways["telegram"] = tg
			}
			f.run(t)
			release := sync.OnceFunc(func() {
				if tg != nil {
					close(tg.release)
				}
			})
			t.Cleanup(release) // before Run's end waits for the job
			if r := f.gw.next(t); r.Text != MsgPaired {
				t.Fatalf("first reply %q, want the pairing confirmation", r.Text)
			}
			if tc.window {
				<-tg.typing // the job is in its start window until released
				f.ingest(t, "3", private("100", "/stop"))
				if r := f.gw.next(t); r.Text != tc.stopping {
					t.Fatalf("/stop in the start window answered %q, want %q", r.Text, tc.stopping)
				}
				release()
				if r := f.gw.next(t); r.Text != MsgStoppedBeforeStart {
					t.Fatalf("the stopped job said %q, want %q", r.Text, MsgStoppedBeforeStart)
				}
			} else {
				f.ingest(t, "2", private("100", tc.text), private("100", "/stop"))
				got, want := f.replies(t, 2), []string{MsgStoppedBeforeStart, tc.stopping}
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("replies %q, want %q", got, want)
				}
			}
			f.settled(t, 3)
			var handled uint64
			f.db.View(func(tx *store.Tx) (err error) { handled, err = tx.Counter("telegram", CounterHandled); return err })
			if handled != 2 {
				t.Errorf("handled = %d, want 2: the stopped job and /stop", handled)
			}
		})
	}
}

// TestStopLeavesQueuedJobsQueued: /stop stops the job in progress; a job
// queued behind it was sent on purpose and still runs.
func TestStopLeavesQueuedJobsQueued(t *testing.T) {
	f := newStopFixture(t)
	f.run(t)
	f.gw.next(t)
	f.ingest(t, "2", private("100", "!sleep 100"))
	if cmd := <-f.ran; cmd != "sleep 100" {
		t.Fatalf("ran %q", cmd)
	}
	f.ingest(t, "3", private("100", "!echo after"), private("100", "/stop"))
	if got, want := f.replies(t, 2), []string{"Stopping: sleep 100", "stopped"}; !slices.Equal(got, want) {
		t.Fatalf("replies %q, want %q", got, want)
	}
	if cmd := <-f.ran; cmd != "echo after" {
		t.Fatalf("then ran %q, want the queued command", cmd)
	}
	f.ingest(t, "4", private("100", "/stop"))
	if got, want := f.replies(t, 2), []string{"Stopping: echo after", "stopped"}; !slices.Equal(got, want) {
		t.Fatalf("replies %q, want %q", got, want)
	}
}

// blockingSender is a memGateway whose Send of one text waits until the
// test releases it.
type blockingSender struct {
	*memGateway
	text             string
	blocked, release chan struct{}
}

func (g *blockingSender) Send(ctx context.Context, chatID string, r Reply) (string, error) {
	if r.Text == g.text {
		close(g.blocked)
		<-g.release
	}
	return g.memGateway.Send(ctx, chatID, r)
}

// TestStoppedJobStaysStoppedAcrossShutdown: a job /stop reached while
// something answered at once was still ahead of it, and that Run's end then
// keeps from starting, is finished as stopped — not left in the inbox for
// the next start to run after all.
func TestStoppedJobStaysStoppedAcrossShutdown(t *testing.T) {
	f := newStopFixture(t)
	bs := &blockingSender{memGateway: f.gw, text: MsgPaired, blocked: make(chan struct{}), release: make(chan struct{})}
	f.hub.gateways["telegram"] = bs
	f.ingest(t, "2", private("100", "!sleep 100"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.hub.Run(ctx); close(done) }()
	release := sync.OnceFunc(func() { close(bs.release) })
	t.Cleanup(func() { cancel(); release(); <-done })
	<-bs.blocked // the worker sends the pairing confirmation; the command waits behind it
	f.ingest(t, "3", private("100", "/stop"))
	if r := f.gw.next(t); r.Text != "Stopping: sleep 100" {
		t.Fatalf("/stop answered %q", r.Text)
	}
	cancel()
	release()
	<-done
	if n := f.inboxLen(t); n != 0 {
		t.Fatalf("after shutdown the inbox holds %v: the stopped command would run at the next start", f.entryStates(t))
	}

	var texts []string
	for len(f.gw.ch) > 0 {
		texts = append(texts, (<-f.gw.ch).Text)
	}
	if !slices.Contains(texts, MsgStoppedBeforeStart) {
		t.Errorf("replies %q: the chat was not told the command was stopped", texts)
	}
	select {
	case cmd := <-f.ran:
		t.Errorf("the shell ran %q after /stop", cmd)
	default:
	}
}

// heldStatusAgent is a lifecycleAgent whose Status — /status, answered on
// the dispatch loop itself — holds the loop until released, and which
// reports each turn it is asked to run.
type heldStatusAgent struct {
	*lifecycleAgent
	entered, release chan struct{}
	turns            chan string
}

func (a *heldStatusAgent) Status(agent.SessionKey) (agent.Status, error) {
	close(a.entered)
	<-a.release
	return agent.Status{}, nil
}

func (a *heldStatusAgent) TurnWith(ctx context.Context, key agent.SessionKey, text string, ev agent.Events, h agent.Hooks) error {
	a.turns <- text
	return a.lifecycleAgent.TurnWith(ctx, key, text, ev, h)
}

// TestStopInTheBatchFindsTheJobUnstarted: however long the dispatch loop
// takes over the rest of a batch, no job of it starts before the whole
// batch is dispatched — not even when the chat's worker is free to take it
// meanwhile — so the /stop behind a job always finds it unstarted, not
// only when the loop happens to be faster than the worker.
func TestStopInTheBatchFindsTheJobUnstarted(t *testing.T) {
	f := newStopFixture(t)
	ag := &heldStatusAgent{lifecycleAgent: f.ag, entered: make(chan struct{}), release: make(chan struct{}), turns: make(chan string, 1)}
	f.hub.cfg.Agent = ag
	bs := &blockingSender{memGateway: f.gw, text: MsgPaired, blocked: make(chan struct{}), release: make(chan struct{})}
	f.hub.gateways["telegram"] = bs
	f.run(t)
	releaseStatus := sync.OnceFunc(func() { close(ag.release) })
	releaseSend := sync.OnceFunc(func() { close(bs.release) })
	t.Cleanup(func() { releaseSend(); releaseStatus() })
	<-bs.blocked // the chat's worker is busy with the pairing confirmation
	f.ingest(t, "2", private("100", "hello"), private("100", "/status"), private("100", "/stop"))
	<-ag.entered // the loop is on /status, /stop still to come
	releaseSend()
	if r := f.gw.next(t); r.Text != MsgPaired {
		t.Fatalf("first reply %q, want the pairing confirmation", r.Text)
	}
	select {
	case text := <-ag.turns:
		t.Errorf("the turn %q started while its batch was still being dispatched", text)
	case <-time.After(50 * time.Millisecond):
	}
	releaseStatus()
	got := f.replies(t, 3)
	if !slices.Contains(got, "Stopping: hello") || !slices.Contains(got, MsgStoppedBeforeStart) {
		t.Fatalf("replies %q, want /stop to stop the turn before it started", got)
	}
	f.settled(t, 4)
}
