package turnrender

import (
	"context"
	"time"

	"github.com/latchd/latch/logkey"
)

// run is the turn's goroutine: it shows the items, paces what the
// Delivery asks to pace, and renews "typing…".
func (t *Turn[M]) run(exited chan struct{}) {
	defer close(exited)
	typing := time.NewTicker(t.opts.Typing)
	defer typing.Stop()
	t.typing()
	for {
		step, wait, exit := t.next()
		t.notify()
		if exit {
			return
		}
		if step != nil {
			if commit := step(t.ctx); commit != nil {
				t.mu.Lock()
				commit()
				t.mu.Unlock()
			}
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-t.wake:
		case <-typing.C:
			t.typing()
		case <-timer.C:
		case <-t.ctx.Done():
		}
		timer.Stop()
	}
}

// notify wakes everyone waiting in settle.
func (t *Turn[M]) notify() {
	t.mu.Lock()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

func (t *Turn[M]) typing() {
	t.mu.Lock()
	skip := t.ending || t.awaiting
	t.mu.Unlock()
	if !skip && t.ctx.Err() == nil {
		t.d.Typing(t.ctx)
	}
}

// next picks the next call to make, in item order, or how long to wait for
// one; exit is true when the goroutine is to stop (it is then marked
// inactive under the same lock, so a new event starts another).
func (t *Turn[M]) next() (step Step, wait time.Duration, exit bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		t.active = false
		return nil, 0, true
	}
	for _, it := range t.items {
		switch {
		case it.kind == itemText:
			if it.frozen && it.answer.Done() {
				continue
			}
			step, wait = it.answer.Next(it.text, it.frozen)
		case it.done:
			continue
		case it.kind == itemApproval:
			step = t.approvalStep(it)
		case it.kind == itemTool:
			step, wait = t.toolNext(it)
		}
		if step != nil || wait > 0 {
			return step, wait, false
		}
	}
	// Waiting for an approval counts as idle: typing is off then, and the
	// answer's event starts the goroutine again.
	idleFor := time.Since(t.lastEvent)
	if t.ending || t.running == 0 && idleFor >= t.opts.Idle {
		t.active = false
		return nil, 0, true
	}
	wait = t.opts.Idle
	if t.running == 0 {
		wait -= idleFor
	}
	return nil, wait, false
}

// toolNext sends a tool's line or brings it up to date.
func (t *Turn[M]) toolNext(it *item[M]) (Step, time.Duration) {
	line := t.d.ToolLine(it.call, it.result)
	switch {
	case !it.lineSent:
		return t.toolStep(it, line), 0
	case it.line != line:
		if t.opts.LineWait != nil {
			if d := t.opts.LineWait(); d > 0 {
				return nil, d
			}
		}
		return t.toolStep(it, line), 0
	case it.result != nil:
		it.done = true
	}
	return nil, 0
}

// toolStep sends or edits a tool line. A line that cannot be shown is not
// worth a stuck turn: a failed send is not tried again, nor a failed edit
// to the line's final form.
func (t *Turn[M]) toolStep(it *item[M], line string) Step {
	id, sent := it.lineID, it.lineSent
	return func(ctx context.Context) func() {
		var err error
		if sent {
			err = t.d.EditLine(ctx, id, line)
		} else {
			id, err = t.d.SendLine(ctx, line)
		}
		return func() {
			if err != nil {
				t.failed(ctx, "showing a tool call failed", err)
				it.done = !sent || it.result != nil
				if !sent {
					return
				}
			}
			it.lineID, it.lineSent, it.line = id, true, line
		}
	}
}

// approvalStep sends an approval request, once.
func (t *Turn[M]) approvalStep(it *item[M]) Step {
	a := it.approval
	return func(ctx context.Context) func() {
		if err := t.d.Approval(ctx, a); err != nil {
			t.failed(ctx, "sending an approval request failed", err)
		}
		return func() { it.done = true }
	}
}

func (t *Turn[M]) failed(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		t.opts.Log.Warn(what, logkey.Err, err)
	}
}
