package schedule_test

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/schedule"
	"github.com/latchd/latch/schedule/scheduletest"
	"github.com/latchd/latch/store"
)

// chatGateway records what the Hub posts to the chat.
type chatGateway struct {
	mu   sync.Mutex
	sent []string
	ch   chan string
}

func (g *chatGateway) Name() string                                   { return "telegram" }
func (g *chatGateway) Start(context.Context) error                    { return nil }
func (g *chatGateway) Run(ctx context.Context, _ gateways.Sink) error { <-ctx.Done(); return nil }
func (g *chatGateway) Info() gateways.Info                            { return gateways.Info{Connected: true} }
func (g *chatGateway) Send(_ context.Context, _ string, r gateways.Reply) (string, error) {
	g.mu.Lock()
	g.sent = append(g.sent, r.Text)
	g.mu.Unlock()
	g.ch <- r.Text
	return "1", nil
}

// next is the next post to the chat.
func (g *chatGateway) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-g.ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("nothing posted within 10s")
		return ""
	}
}

// fixture is a store, a Hub and a scheduler under a fake clock, with the
// gateway latched to chat 100.
type fixture struct {
	db    *store.DB
	path  string
	clock *scheduletest.Clock
	sched *schedule.Scheduler
	hub   *gateways.Hub
	gw    *chatGateway
	// shell runs a !command: it reports the command on runs and, when
	// block is set, waits for the job's end.
	runs  chan string
	block atomic.Bool
	stop  func()
}

var start = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{path: filepath.Join(t.TempDir(), "latch.db"), clock: scheduletest.NewClock(start),
		gw: &chatGateway{ch: make(chan string, 100)}, runs: make(chan string, 100)}
	f.open(t)
	p, _ := pairing.New(bytes.Repeat([]byte{1}, pairing.KeyLen))
	var code string
	f.db.Update(func(tx *store.Tx) (err error) { code, _, err = p.Mint(tx, "telegram", 0); return err })
	f.build(p)
	f.ingest(t, "/pair "+code)
	f.runHub(t)
	if got := f.gw.next(t); got != gateways.MsgPaired {
		t.Fatalf("pairing: %q", got)
	}
	return f
}

func (f *fixture) open(t *testing.T) {
	t.Helper()
	db, err := store.Open(f.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.db = db
	t.Cleanup(func() { db.Close() })
}

func (f *fixture) build(p *pairing.Pairer) {
	f.sched = schedule.New(schedule.Config{Store: f.db, Clock: f.clock, Location: time.UTC,
		Wake: func() { f.hub.Wake() }})
	f.hub = gateways.NewHub(gateways.Config{Store: f.db, Pairer: p, Gateways: []gateways.Gateway{f.gw}, Jobs: f.sched,
		ShutdownGrace: time.Millisecond,
		Shell: func(ctx context.Context, cmd string) string {
			f.runs <- cmd
			if f.block.Load() {
				<-ctx.Done()
				return "killed " + cmd
			}
			return "ran " + cmd
		}})
}

// runHub runs the Hub until the test ends or stop is called.
func (f *fixture) runHub(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.hub.Run(ctx); close(done) }()
	f.stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(f.stop)
}

func (f *fixture) ingest(t *testing.T, text string) {
	t.Helper()
	m := gateways.Message{ID: "m", ChatID: "100", ChatType: gateways.ChatPrivate, UserID: "100", Text: text}
	if err := f.hub.Ingest(context.Background(), "telegram", "c", []gateways.Message{m}); err != nil {
		t.Fatal(err)
	}
}

// say sends a chat command and returns the reply.
func (f *fixture) say(t *testing.T, text string) string {
	t.Helper()
	f.ingest(t, text)
	return f.gw.next(t)
}

func (f *fixture) tick(t *testing.T) {
	t.Helper()
	if _, err := f.sched.Tick(); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) jobs(t *testing.T) []store.Job {
	t.Helper()
	jobs, err := f.sched.Jobs("")
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func want(t *testing.T, got, prefix string) {
	t.Helper()
	if !strings.HasPrefix(got, prefix) {
		t.Fatalf("got %q, want it to start with %q", got, prefix)
	}
}

func noRun(t *testing.T, f *fixture) {
	t.Helper()
	select {
	case r := <-f.runs:
		t.Fatalf("%q ran", r)
	default:
	}
}

func TestJobFiresOnceAndPostsToTheChat(t *testing.T) {
	f := newFixture(t)
	want(t, f.say(t, "/every 30m !uptime"), "⏰ Job #1: 30m — next run Fri 1 May 08:30 UTC")
	f.tick(t)
	noRun(t, f)
	f.clock.Advance(30 * time.Minute)
	f.tick(t)
	want(t, f.gw.next(t), "⏰ Scheduled job #1 (30m):\n!uptime")
	if got := <-f.runs; got != "uptime" {
		t.Fatalf("ran %q", got)
	}
	want(t, f.gw.next(t), "ran uptime")
	f.tick(t) // the same instant again: nothing more
	noRun(t, f)
	if j := f.jobs(t)[0]; j.Runs != 1 || !j.Next.Equal(start.Add(time.Hour)) {
		t.Fatalf("job after its run: %+v", j)
	}
}

func TestPromptGoesToTheAgentMarkedScheduled(t *testing.T) {
	f := newFixture(t)
	want(t, f.say(t, "/every @hourly /new"), "⏰ Job #1")
	f.clock.Advance(time.Hour)
	f.tick(t)
	want(t, f.gw.next(t), "⏰ Scheduled job #1 (@hourly):\n/new")
	// No model in this fixture: the prompt reaches the agent path (which
	// says there is none), not /new's reset.
	if got := f.gw.next(t); got != gateways.MsgNoModel {
		t.Fatalf("scheduled prompt: %q", got)
	}
}

func TestAtRunsOnceAndIsGone(t *testing.T) {
	f := newFixture(t)
	want(t, f.say(t, "/at 09:15 !date"), "⏰ Job #1: once — next run Fri 1 May 09:15 UTC")
	f.clock.Set(start.Add(75 * time.Minute))
	f.tick(t)
	f.gw.next(t)
	<-f.runs
	if n := len(f.jobs(t)); n != 0 {
		t.Fatalf("%d jobs left after a one-shot ran", n)
	}
}

// TestCatchUpAndMissedAcrossARestart: runs due while latch was down run
// once if the latest is within catch_up, the rest are reported missed.
func TestCatchUpAndMissedAcrossARestart(t *testing.T) {
	f := newFixture(t)
	f.say(t, "/every 1h !hourly")       // next 09:00
	f.say(t, "/every 0 9 * * * !daily") // next 09:00
	f.stop()                            // latch goes down at 08:00
	f.clock.Set(start.Add(3*time.Hour + 30*time.Minute))
	f.build(pairerFor(t))
	f.runHub(t)
	f.tick(t) // the start: 09:00, 10:00, 11:00 due for #1; 09:00 for #2
	got := map[string]bool{}
	for range 4 {
		got[f.gw.next(t)] = true
	}
	for _, w := range []string{
		"⏰ Scheduled job #1 (1h) missed 2 runs while latch was not running (the last was due Fri 1 May 10:00 UTC); not run: !hourly",
		"⏰ Scheduled job #1 (1h):\n!hourly",
		"ran hourly",
		"⏰ Scheduled job #2 (0 9 * * *) missed 1 run while latch was not running (the last was due Fri 1 May 09:00 UTC); not run: !daily",
	} {
		if !got[w] {
			t.Errorf("not posted: %q (posted: %v)", w, got)
		}
	}
	if r := <-f.runs; r != "hourly" {
		t.Fatalf("ran %q", r)
	}
	noRun(t, f)
	jobs := f.jobs(t)
	if !jobs[0].Next.Equal(start.Add(4*time.Hour)) || !jobs[1].Next.Equal(start.Add(25*time.Hour)) {
		t.Fatalf("next runs: %v, %v", jobs[0].Next, jobs[1].Next)
	}
}

func pairerFor(t *testing.T) *pairing.Pairer {
	p, err := pairing.New(bytes.Repeat([]byte{1}, pairing.KeyLen))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNoDoubleRunAfterKill9: the process dies while a run is running; the
// next start neither fires the run again nor runs its entry again, and
// the chat is told it was interrupted.
func TestNoDoubleRunAfterKill9(t *testing.T) {
	f := newFixture(t)
	f.say(t, "/every 1h !backup")
	f.block.Store(true)
	f.clock.Advance(time.Hour)
	f.tick(t)
	f.gw.next(t) // the announcement
	<-f.runs     // running now
	// kill -9: nothing more is written; every transaction so far has
	// committed. The Hub is stopped without letting its job finish and
	// the file is opened afresh.
	f.stop()
	f.db.Close()
	f.open(t)
	f.block.Store(false)
	f.build(pairerFor(t))
	f.runHub(t)
	f.tick(t)
	got := f.gw.next(t)
	want(t, got, gateways.MsgInterrupted)
	if !strings.Contains(got, "!backup") {
		t.Fatalf("interrupted notice %q does not name the command", got)
	}
	noRun(t, f)
	if j := f.jobs(t)[0]; j.Runs != 1 || !j.Next.Equal(start.Add(2*time.Hour)) {
		t.Fatalf("job after the restart: %+v", j)
	}
}

// queuedBehindLong makes job #1 (!scheduled, hourly), starts "!long",
// which blocks, and fires the job's run, which queues behind it; /status
// (dispatched after the run) shows it queued.
func queuedBehindLong(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.say(t, "/every 1h !scheduled")
	f.block.Store(true)
	f.ingest(t, "!long")
	if r := <-f.runs; r != "long" {
		t.Fatalf("ran %q", r)
	}
	f.clock.Advance(time.Hour)
	f.tick(t)
	if got := f.say(t, "/status"); !strings.Contains(got, "running: long") || !strings.Contains(got, "queued: 2") {
		t.Fatalf("status while the run waits: %q", got)
	}
	return f
}

// TestRunQueuesBehindARunningCommand: a run that falls due while the chat's
// command runs waits for it, in the chat's queue.
func TestRunQueuesBehindARunningCommand(t *testing.T) {
	f := queuedBehindLong(t)
	f.block.Store(false)
	got := map[string]bool{}
	f.ingest(t, "/stop")
	for range 3 {
		got[f.gw.next(t)] = true
	}
	if !got["Stopping: long"] || !got["killed long"] || !got["⏰ Scheduled job #1 (1h):\n!scheduled"] {
		t.Fatalf("posted: %v", got)
	}
	if r := <-f.runs; r != "scheduled" {
		t.Fatalf("ran %q", r)
	}
	want(t, f.gw.next(t), "ran scheduled")
}

// TestCancelWhileRunning: /cancel stops the job's run in progress and the
// job runs no more.
func TestCancelWhileRunning(t *testing.T) {
	f := newFixture(t)
	f.say(t, "/every 1h !sleep 600")
	f.block.Store(true)
	f.clock.Advance(time.Hour)
	f.tick(t)
	f.gw.next(t)
	<-f.runs
	f.ingest(t, "/cancel 1")
	got := map[string]bool{}
	for range 2 {
		got[f.gw.next(t)] = true
	}
	if !got["Job #1 cancelled.\nIts run in progress was stopped."] || !got["killed sleep 600"] {
		t.Fatalf("posted: %v", got)
	}
	if n := len(f.jobs(t)); n != 0 {
		t.Fatalf("%d jobs after /cancel", n)
	}
	f.clock.Advance(time.Hour)
	f.tick(t)
	noRun(t, f)
	if got := f.say(t, "/cancel 1"); got != "No such job. /jobs lists them." {
		t.Fatalf("second /cancel: %q", got)
	}
}

// TestCancelDropsAQueuedRun: a run waiting behind another job is dropped
// with its announcement.
func TestCancelDropsAQueuedRun(t *testing.T) {
	f := queuedBehindLong(t)
	want(t, f.say(t, "/cancel 1"), "Job #1 cancelled.")
	f.block.Store(false)
	f.ingest(t, "/stop")
	if got := []string{f.gw.next(t), f.gw.next(t)}; !slices.Contains(got, "Stopping: long") || !slices.Contains(got, "killed long") {
		t.Fatalf("after /stop: %q", got)
	}
	if got := f.say(t, "!after"); got != "ran after" {
		t.Fatalf("next reply %q: the cancelled run was not dropped", got)
	}
	if r := <-f.runs; r != "after" {
		t.Fatalf("ran %q", r)
	}
}

func (f *fixture) repair(t *testing.T, p *pairing.Pairer) {
	t.Helper()
	var code string
	if err := f.db.Update(func(tx *store.Tx) (err error) { code, _, err = p.Mint(tx, "telegram", 0); return err }); err != nil {
		t.Fatal(err)
	}
	if got := f.say(t, "/pair "+code); got != gateways.MsgPaired {
		t.Fatalf("pairing again: %q", got)
	}
}

// TestUnpairPausesUntilResumed: an unpair pauses the gateway's jobs;
// pairing again (the same chat, even) does not resume them; /jobs resume
// does.
func TestUnpairPausesUntilResumed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		notify bool // the daemon saw the unpair and paused the jobs
	}{{"unpair seen", true}, {"unpair while down", false}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.say(t, "/every 1h !job")
			p := pairerFor(t)
			// The unpair is dated past its grace period, in which no code
			// could be minted with nothing latched.
			p.Now = func() time.Time { return time.Now().Add(-pairing.GraceAfterUnpair - time.Minute) }
			if err := f.db.Update(func(tx *store.Tx) error { _, err := p.Unpair(tx, "telegram"); return err }); err != nil {
				t.Fatal(err)
			}
			p.Now = time.Now
			if tt.notify {
				if n, err := f.sched.Pause("telegram"); err != nil || n != 1 {
					t.Fatalf("Pause = %d, %v", n, err)
				}
			}
			f.clock.Advance(time.Millisecond) // a new latch is a new Since
			f.repair(t, p)
			f.clock.Advance(time.Hour)
			f.tick(t)
			noRun(t, f)
			if !tt.notify {
				want(t, f.gw.next(t), "⏸ Scheduled job #1 is paused")
			}
			if got := f.say(t, "/jobs"); !strings.Contains(got, "#1 · 1h · ⏸ paused (its gateway was unpaired)") {
				t.Fatalf("/jobs: %q", got)
			}
			f.tick(t)
			noRun(t, f)
			want(t, f.say(t, "/jobs resume"), "Resumed 1 job:\n#1 · 1h · next Fri 1 May 10:00 UTC")
			f.clock.Advance(time.Hour)
			f.tick(t)
			want(t, f.gw.next(t), "⏰ Scheduled job #1")
			if r := <-f.runs; r != "job" {
				t.Fatalf("ran %q", r)
			}
		})
	}
}

// TestRunLoopFiresUnderTheClock: Run sleeps on the clock and fires when it
// is moved past the job's time.
func TestRunLoopFiresUnderTheClock(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.sched.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	f.say(t, "/every 5m !tick")
	// Whether Run sleeps already or not yet, it wakes for this.
	f.clock.Advance(5 * time.Minute)
	want(t, f.gw.next(t), "⏰ Scheduled job #1 (5m)")
	if r := <-f.runs; r != "tick" {
		t.Fatalf("ran %q", r)
	}
}

func TestChatCommandErrors(t *testing.T) {
	f := newFixture(t)
	for text, prefix := range map[string]string{
		"/every":                 "no schedule given",
		"/every 5s !x":           "schedule \"5s\": an interval must be at least 1m0s",
		"/every 1h":              "say what to run",
		"/every 0 9 * *":         "the schedule is incomplete",
		"/at 25:00 x":            "\"25:00\" is not a time",
		"/at 2026-04-01 10:00 x": "2026-04-01 10:00 UTC is not in the future",
		"/cancel x":              "Usage: /cancel <id>",
		"/jobs":                  "No scheduled jobs.",
	} {
		want(t, f.say(t, text), prefix)
	}
}

// TestUnpairDropsAQueuedRunSilently: a run queued when the chat is
// unpaired is dropped, and so is the notice that announces it: an
// unpaired chat hears nothing more of its jobs.
func TestUnpairDropsAQueuedRunSilently(t *testing.T) {
	f := queuedBehindLong(t)
	if err := f.db.Update(func(tx *store.Tx) error { _, err := pairerFor(t).Unpair(tx, "telegram"); return err }); err != nil {
		t.Fatal(err)
	}
	f.hub.Unlatched("telegram")
	deadline := time.Now().Add(10 * time.Second)
	for n := -1; n != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d inbox entries left", n)
		}
		f.db.View(func(tx *store.Tx) (err error) { n, err = tx.InboxLen(); return err })
		runtime.Gosched()
	}
	f.stop() // every send has returned
	f.gw.mu.Lock()
	defer f.gw.mu.Unlock()
	for _, s := range f.gw.sent {
		if strings.HasPrefix(s, "⏰ Scheduled job #1 (1h):") {
			t.Fatalf("the unpaired chat was sent %q", s)
		}
	}
	noRun(t, f)
}
