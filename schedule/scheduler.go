// Package schedule owns scheduled jobs: parsing when they run (cron lines,
// descriptors, intervals, one-shot times), keeping them in the store, and
// firing them. A fired run becomes an inbox entry of the chat the job
// posts to, in the same transaction that moves the job to its next run,
// so the Hub runs it like anything the chat sent — queued behind a
// running turn, re-checked against the latch, reported and never run
// again when a restart cuts it — and a restart can neither fire a run
// twice nor lose one.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// Clock is the scheduler's time: tests drive a fake one. At fires once the
// clock reads t or later — a deadline, not a duration, so a clock moved on
// between reading it and waiting cannot make the wait overshoot.
type Clock interface {
	Now() time.Time
	At(t time.Time) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) At(t time.Time) <-chan time.Time { return time.After(time.Until(t)) }

// DefaultCatchUp is how late a run may still start (see Config.CatchUp).
const DefaultCatchUp = time.Hour

// minCatchUp keeps a run the scheduler itself is a moment late for from
// being reported missed.
const minCatchUp = time.Minute

// recheck bounds a wait: the monotonic clock a timer waits on stands
// still while the machine sleeps, the wall clock a schedule names does not.
const recheck = time.Minute

// Config wires a Scheduler.
type Config struct {
	Store *store.DB
	// Clock is the time; nil means the system's.
	Clock Clock
	// Location is where calendar schedules are read; nil means time.Local.
	Location *time.Location
	// CatchUp: a run due while latch was down (or the machine asleep) is
	// run late if it is at most this late, else reported missed.
	CatchUp time.Duration
	// Wake tells the Hub that entries wait in the inbox; nil for none.
	Wake func()
	Log  *slog.Logger
}

// Scheduler fires the stored jobs when they are due.
type Scheduler struct {
	cfg  Config
	wake chan struct{}
	// mu orders Tick against the changes of chat and CLI commands, so a
	// job cancelled or paused is never fired from a copy read before.
	mu sync.Mutex
}

// New returns a Scheduler for cfg.
func New(cfg Config) *Scheduler {
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.CatchUp == 0 {
		cfg.CatchUp = DefaultCatchUp
	}
	cfg.CatchUp = max(cfg.CatchUp, minCatchUp)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Wake == nil {
		cfg.Wake = func() {}
	}
	return &Scheduler{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Now is the scheduler's time.
func (s *Scheduler) Now() time.Time { return s.cfg.Clock.Now() }

// Location is where the scheduler reads calendar schedules.
func (s *Scheduler) Location() *time.Location { return s.cfg.Location }

// Run fires jobs as they fall due until ctx ends. Its first round runs
// (or reports missed) what came due while latch was down.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		next, err := s.Tick()
		if err != nil {
			s.cfg.Log.Error("scheduled jobs could not be fired; trying again", logkey.Err, err)
			next = time.Time{}
		}
		at := s.cfg.Clock.Now().Add(recheck)
		if !next.IsZero() && next.Before(at) {
			at = next
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-s.cfg.Clock.At(at):
		}
	}
}

// changed tells Run that the jobs changed.
func (s *Scheduler) changed() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Tick fires every job that is due now and returns when the next one is
// (zero: none).
func (s *Scheduler) Tick() (next time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock.Now()
	queued := false
	err = s.cfg.Store.Update(func(tx *store.Tx) error {
		next, queued = time.Time{}, false
		jobs, err := tx.Jobs()
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if j.Paused == "" && !j.Next.IsZero() && !j.Next.After(now) {
				q, err := s.fire(tx, &j, now)
				if err != nil {
					return fmt.Errorf("job %d: %w", j.ID, err)
				}
				queued = queued || q
			}
			if j.Paused == "" && !j.Next.IsZero() && (next.IsZero() || j.Next.Before(next)) {
				next = j.Next
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	if queued {
		s.cfg.Wake()
	}
	return next, nil
}

// maxCount bounds the count of missed runs (an interval of a minute
// over a month away is 43200).
const maxCount = 100000

// fire handles a due job inside tx: the latest due run is queued if it is
// at most CatchUp late, every other due run is reported missed, and the
// job moves to its next run (a one-shot job is deleted). A job whose
// latch is gone is paused instead. queued says whether an inbox entry was
// added.
func (s *Scheduler) fire(tx *store.Tx, j *store.Job, now time.Time) (queued bool, err error) {
	l, err := tx.Latch(j.Gateway)
	if err != nil {
		return false, err
	}
	if !boundTo(l, j) {
		s.cfg.Log.Warn("scheduled job paused: its gateway was unpaired", logkey.Gateway, j.Gateway, "job", j.ID)
		j.Paused = pausedUnpaired
		if err := tx.PutJob(j); err != nil {
			return false, err
		}
		if l == nil {
			return false, nil
		}
		// The gateway was paired again while latch did not see the
		// unpair: the new chat hears of the job, but not what it runs.
		return true, notice(tx, now, l.Gateway, l.ChatID, l.UserID, 0,
			fmt.Sprintf("⏸ Scheduled job #%d is paused: it was made for an earlier pairing of this bot. /jobs lists it; /jobs resume runs it here.", j.ID))
	}
	var sched Schedule
	// prev is the due run before last, the latest missed one when last
	// runs.
	count, last, prev := uint64(1), j.Next, time.Time{}
	if j.Spec != "" {
		if sched, err = Parse(j.Spec, s.cfg.Location); err != nil {
			j.Paused = "its schedule no longer parses: " + err.Error()
			return false, tx.PutJob(j)
		}
		for n := sched.Next(j.Next); !n.IsZero() && !n.After(now) && count < maxCount; n = sched.Next(n) {
			count, last, prev = count+1, n, last
		}
	}
	run := now.Sub(last) <= s.cfg.CatchUp
	missed, lastMissed := count, last
	if run {
		missed, lastMissed = missed-1, prev
	}
	if missed > 0 {
		j.Missed += missed
		s.cfg.Log.Warn("scheduled runs missed", logkey.Gateway, j.Gateway, "job", j.ID, "missed", missed)
		text := fmt.Sprintf("⏰ Scheduled job #%d (%s) missed %s while latch was not running (the last was due %s); not run: %s",
			j.ID, describe(*j), plural(missed, "run"), lastMissed.In(s.cfg.Location).Format("Mon 2 Jan 15:04 MST"), clip(j.Text, 200))
		if err := notice(tx, now, j.Gateway, j.ChatID, j.UserID, j.ID, text); err != nil {
			return false, err
		}
	}
	if run {
		j.Runs++
		s.cfg.Log.Info("scheduled job fired", logkey.Gateway, j.Gateway, "job", j.ID)
		if err := notice(tx, now, j.Gateway, j.ChatID, j.UserID, j.ID,
			fmt.Sprintf("⏰ Scheduled job #%d (%s):\n%s", j.ID, describe(*j), j.Text)); err != nil {
			return false, err
		}
		if _, err := tx.AppendInbox(store.Entry{Kind: store.KindMessage, Gateway: j.Gateway, ChatID: j.ChatID,
			UserID: j.UserID, Text: runText(*j), Received: now, Job: j.ID}); err != nil {
			return false, err
		}
	}
	if j.Spec == "" {
		j.Next = time.Time{}
		return true, tx.DeleteJob(j.ID)
	}
	// On the schedule's own grid, so an interval does not drift by how
	// late each run was fired.
	if j.Next = sched.Next(last); !j.Next.After(now) {
		j.Next = sched.Next(now)
	}
	return true, tx.PutJob(j)
}

// pausedUnpaired is why an unpair paused a job.
const pausedUnpaired = "its gateway was unpaired"

// runText is what a run hands the Hub: a !command as it is, a prompt
// behind a line that tells the agent it was scheduled — which also keeps
// a prompt that starts with "/" from being taken for a chat command.
func runText(j store.Job) string {
	if isCommand(j.Text) {
		return j.Text
	}
	return fmt.Sprintf("[Scheduled job #%d (%s), set up by the owner earlier; nobody is waiting at the chat.]\n%s", j.ID, describe(j), j.Text)
}

// boundTo: l is the very latch j was made under.
func boundTo(l *store.Latch, j *store.Job) bool {
	return l != nil && l.ChatID == j.ChatID && l.UserID == j.UserID && l.Since.Equal(j.LatchSince)
}

// notice queues a message to a chat. One that belongs to a job carries
// its ID, which makes the Hub drop it like the job's run when the chat is
// unpaired or the job cancelled before it is sent.
func notice(tx *store.Tx, now time.Time, gateway, chatID, userID string, job uint64, text string) error {
	_, err := tx.AppendInbox(store.Entry{Kind: store.KindNotice, Gateway: gateway, ChatID: chatID, UserID: userID,
		Text: text, Received: now, Job: job})
	return err
}

// ErrNoJob: no job of that ID (for that gateway).
var ErrNoJob = errors.New("no such job")

// ErrNotLatched: the gateway has no latched chat to post to.
var ErrNotLatched = errors.New("the gateway is not paired with a chat")

// NewJob is a job to add.
type NewJob struct {
	Gateway string
	// ChatID is the chat the request came from; empty from the machine,
	// which means the gateway's latched chat.
	ChatID string
	// Spec is the recurring schedule; empty for a one-shot job at At.
	Spec string
	At   time.Time
	Text string
	By   string
}

// Add stores a job for the gateway's latched chat and returns it.
func (s *Scheduler) Add(n NewJob) (store.Job, error) {
	j := store.Job{Gateway: n.Gateway, Spec: n.Spec, Text: n.Text, By: n.By, Created: s.cfg.Clock.Now()}
	if err := checkText(n.Text); err != nil {
		return j, &userError{err.Error()}
	}
	if n.Spec != "" {
		sched, err := Parse(n.Spec, s.cfg.Location)
		if err != nil {
			return j, &userError{err.Error()}
		}
		j.Spec = sched.String()
		if j.Next = sched.Next(j.Created); j.Next.IsZero() {
			return j, userErrorf("schedule %q never runs", n.Spec)
		}
	} else {
		if !n.At.After(j.Created) {
			return j, userErrorf("%s is not in the future", n.At.In(s.cfg.Location).Format("2006-01-02 15:04 MST"))
		}
		j.Next = n.At
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.cfg.Store.Update(func(tx *store.Tx) error {
		l, err := tx.Latch(n.Gateway)
		if err != nil {
			return err
		}
		if l == nil || (n.ChatID != "" && l.ChatID != n.ChatID) {
			return ErrNotLatched
		}
		j.ChatID, j.UserID, j.LatchSince = l.ChatID, l.UserID, l.Since
		return tx.PutJob(&j)
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("add job: %w", err)
	}
	s.cfg.Log.Info("scheduled job added", logkey.Gateway, j.Gateway, "job", j.ID, "by", j.By)
	s.changed()
	return j, nil
}

// maxText bounds a job's prompt or command.
const maxText = 4000

func checkText(text string) error {
	switch {
	case text == "":
		return errors.New("say what to run: a prompt for the agent or a !command")
	case len(text) > maxText:
		return fmt.Errorf("the text is longer than %d bytes", maxText)
	case isCommand(text) && len(text) == 1:
		return errors.New("a bare ! runs nothing; write !<command>")
	}
	return nil
}

// Jobs lists the jobs of gateway ("" for every gateway's).
func (s *Scheduler) Jobs(gateway string) ([]store.Job, error) {
	var out []store.Job
	err := s.cfg.Store.View(func(tx *store.Tx) error {
		jobs, err := tx.Jobs()
		for _, j := range jobs {
			if gateway == "" || j.Gateway == gateway {
				out = append(out, j)
			}
		}
		return err
	})
	return out, err
}

// Remove deletes job id of gateway ("" for any gateway) and returns it.
// A run of it already queued or running is the Hub's to stop.
func (s *Scheduler) Remove(gateway string, id uint64) (store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var j *store.Job
	err := s.cfg.Store.Update(func(tx *store.Tx) (err error) {
		if j, err = tx.Job(id); err != nil {
			return err
		}
		if j == nil || (gateway != "" && j.Gateway != gateway) {
			return fmt.Errorf("#%d: %w", id, ErrNoJob)
		}
		return tx.DeleteJob(id)
	})
	if err != nil {
		return store.Job{}, err
	}
	s.cfg.Log.Info("scheduled job removed", logkey.Gateway, j.Gateway, "job", id)
	s.changed()
	return *j, nil
}

// Pause pauses every running job of gateway and returns how many; the
// daemon calls it when the gateway is unpaired. PauseIn is the same
// inside a transaction of the caller's.
func (s *Scheduler) Pause(gateway string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int
	err := s.cfg.Store.Update(func(tx *store.Tx) (err error) {
		n, err = PauseIn(tx, gateway)
		return err
	})
	return n, err
}

// PauseIn pauses gateway's running jobs in tx (see Pause).
func PauseIn(tx *store.Tx, gateway string) (int, error) {
	jobs, err := tx.Jobs()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, j := range jobs {
		if j.Gateway != gateway || j.Paused != "" {
			continue
		}
		j.Paused = pausedUnpaired
		if err := tx.PutJob(&j); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// Resume binds gateway's paused jobs (all, or only id when it is not 0)
// to the gateway's latch as it is now, and runs them again from their
// next run after now; what fell due while they were paused is not run.
func (s *Scheduler) Resume(gateway string, id uint64) ([]store.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock.Now()
	var out []store.Job
	err := s.cfg.Store.Update(func(tx *store.Tx) error {
		out = nil
		l, err := tx.Latch(gateway)
		if err != nil {
			return err
		}
		if l == nil {
			return ErrNotLatched
		}
		jobs, err := tx.Jobs()
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if j.Gateway != gateway || (id != 0 && j.ID != id) || (j.Paused == "" && boundTo(l, &j)) {
				continue
			}
			if j.Spec != "" {
				sched, err := Parse(j.Spec, s.cfg.Location)
				if err != nil {
					continue // stays paused, with its reason
				}
				j.Next = sched.Next(now)
			}
			j.Paused, j.ChatID, j.UserID, j.LatchSince = "", l.ChatID, l.UserID, l.Since
			if err := tx.PutJob(&j); err != nil {
				return err
			}
			out = append(out, j)
		}
		if id != 0 && len(out) == 0 {
			return fmt.Errorf("#%d: %w (or it is not paused)", id, ErrNoJob)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.changed()
	return out, nil
}

// describe is a job's schedule for the chat.
func describe(j store.Job) string {
	if j.Spec == "" {
		return "once"
	}
	return j.Spec
}

func plural(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
