package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/store"
)

// DefaultStartDelay is how long a turn's first model call runs before the turn's
// start (Hooks.Started, with the user's message) is stored on its own. A
// call that is done sooner — a model on loopback or the local network
// answering a short question — has the start stored with its step instead
// (the answer, or the tool calls before they run), which saves the answer a
// commit and its disk syncs. Longer than such a call, shorter than anything
// a person sees: the text held meanwhile is shown once the start is in.
const DefaultStartDelay = 20 * time.Millisecond

// firstCall is a turn's first model request and, until it is stored, the
// turn's start.
type firstCall struct {
	req provider.Request
	// started is the caller's Started hook while no committed
	// transaction has carried it; nil once one has.
	started func(*store.Tx) error

	mu sync.Mutex
	// wait waits for the start's own save, once the delay began it.
	wait func() error
	// closed: the call is over, the delay begins nothing any more.
	closed bool
	// held is the text streamed while the start was not stored.
	held []string
	// final is the answer of a first step that ended while the start was
	// not stored (answered): Events get it in the save that stores both.
	final    string
	answered bool
}

// callStarting makes a turn's first model call. If the call outlasts
// Config.StartDelay, the turn's start is saved while it goes on, and its
// text is held until that commit is done (a failed commit cancels the
// call, and the turn ends having stored and shown nothing); a quicker call
// leaves the start to the step's save (saveStarting), its text held until
// then. A crash before the start is stored leaves the message to run again
// after the restart: the model may then be asked twice (as when a step is
// resumed), but nothing it said was shown and no tool ran.
//
// ev gets text from the call's deltas and, once the delayed save is in,
// from the goroutine that waited for it (text held through a pause in the
// stream must not wait for its end); first.mu orders the two, so ev sees
// one call at a time, in order, and none after callStarting returns.
func (a *Agent) callStarting(ctx context.Context, key SessionKey, s *session, first *firstCall, ev Events) (provider.Response, error) {
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var waiter sync.WaitGroup
	defer waiter.Wait()
	// Until Stream returns, s is the save's: Stream reads only first.req.
	timer := time.AfterFunc(a.cfg.StartDelay, func() {
		first.mu.Lock()
		if first.closed || first.wait != nil {
			first.mu.Unlock()
			return
		}
		wait := a.saveAsync(key, s, first.started)
		first.wait = wait
		waiter.Add(1) // before callStarting can wait: under mu, before closed
		first.mu.Unlock()
		defer waiter.Done()
		if err := wait(); err != nil {
			cancel(err)
			return
		}
		first.mu.Lock()
		defer first.mu.Unlock()
		if !first.closed {
			first.flushLocked(ev)
		}
	})
	resp, err := a.cfg.Provider.Stream(callCtx, first.req, func(delta string) {
		first.mu.Lock()
		wait := first.wait
		if wait == nil {
			first.held = append(first.held, delta)
		}
		first.mu.Unlock()
		if wait == nil {
			return
		}
		if serr := wait(); serr != nil {
			cancel(serr)
			return
		}
		first.mu.Lock()
		defer first.mu.Unlock()
		first.flushLocked(ev)
		ev.Text(delta)
	})
	timer.Stop()
	first.mu.Lock()
	first.closed = true
	wait := first.wait
	first.mu.Unlock()
	if wait == nil {
		return resp, err // the step's save stores the start
	}
	if serr := wait(); serr != nil {
		return provider.Response{}, fmt.Errorf("%w: %w", ErrNotStarted, serr)
	}
	first.started = nil
	first.flush(ev)
	return resp, err
}

// flush shows the text held while the start was not stored.
func (f *firstCall) flush(ev Events) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushLocked(ev)
}

func (f *firstCall) flushLocked(ev Events) {
	for _, d := range f.held {
		ev.Text(d)
	}
	f.held = nil
}

// saveStarting is save with also, and with the turn's start when no
// commit has carried it yet: then a failure wraps ErrNotStarted (nothing of
// the turn is stored), and once it commits the text held is shown. A
// first step's answer (first.answered) reaches ev inside the transaction,
// after the start and before also (the Done hook, which stores it), as
// Final comes before Done otherwise: the caller holds it until Done has
// committed.
func (a *Agent) saveStarting(key SessionKey, s *session, ev Events, first *firstCall, also func(*store.Tx) error) error {
	if first == nil || first.started == nil {
		return a.saveWith(key, s, also)
	}
	started := first.started
	err := a.saveWith(key, s, func(tx *store.Tx) error {
		if err := started(tx); err != nil {
			return err
		}
		if first.answered {
			ev.Final(first.final)
		}
		if also == nil {
			return nil
		}
		return also(tx)
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotStarted, err)
	}
	first.started = nil
	first.flush(ev)
	return nil
}

// saveAsync saves s in a goroutine of its own and returns the func that
// waits for the outcome, from any goroutine. Until then s belongs to that
// goroutine: the caller may only read what the save does not change (the
// messages).
func (a *Agent) saveAsync(key SessionKey, s *session, also func(*store.Tx) error) (wait func() error) {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = a.saveWith(key, s, also)
	}()
	return func() error {
		<-done
		return err
	}
}
