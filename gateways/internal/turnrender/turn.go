// Package turnrender shows one agent turn in a chat, whatever the platform.
// It keeps the turn's events as the list of what the chat is to show, in
// order — answers that stream and freeze, tool lines that turn into ✓ or ✗,
// approval requests, files — and runs one goroutine that brings the chat in
// line with that list through a Delivery, which each chat adapter
// implements with its own API calls, message limits and pacing.
//
// Events only change the list under a lock and wake the goroutine, which
// makes every call to the platform; so a slow or rate-limited chat never
// holds up the agent, and pieces of a streaming answer that arrive while a
// call is under way go out together. The goroutine is started on demand,
// stops when the turn ends, when its context ends, or after a while without
// events while no tool runs; End waits for it.
package turnrender

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/turn"
)

// Delivery is what a chat adapter does for a rendered turn; M identifies a
// message of the platform. NewAnswer and ToolLine are called with the
// turn's lock held and must not block. The calls to the platform come
// without the lock: from the turn's goroutine, one at a time, except File,
// which comes from the agent's goroutine once everything before it is
// shown (typing may be renewed meanwhile).
type Delivery[M any] interface {
	// NewAnswer starts the adapter's view of one answer (a step's text).
	NewAnswer() Answer
	// ToolLine is the text of a tool call's line; r is nil while it runs.
	ToolLine(c turn.ToolCall, r *turn.ToolResult) string
	// SendLine sends a tool line as a new message.
	SendLine(ctx context.Context, line string) (M, error)
	// EditLine changes a tool line's message (an edit that changes nothing
	// is not an error).
	EditLine(ctx context.Context, id M, line string) error
	// Approval sends an approval request with its buttons.
	Approval(ctx context.Context, a turn.Approval) error
	// File sends a file.
	File(ctx context.Context, f turn.File) error
	// Typing shows "typing…" once.
	Typing(ctx context.Context)
}

// Answer shows one answer: its text streams in, and is frozen (complete)
// at the first event of another kind, at Final or at End. How it is shown
// — a placeholder, chunks, edits and their pace, formatting once frozen —
// is the adapter's.
//
// Next, Done and Shown are called with the turn's lock held, and so is
// every commit a Step returns: the answer's state needs no lock of its
// own, and the adapter may keep per-turn state (a pace) that only they
// touch.
type Answer interface {
	// Next returns the next call that brings the chat in line with the
	// answer, or how long to wait before one may be made. A nil step and
	// no wait: nothing to do now (a frozen answer then is Done).
	Next(text string, frozen bool) (step Step, wait time.Duration)
	// Done reports whether the frozen answer is shown in its final form
	// (or given up on).
	Done() bool
	// Shown reports whether the streaming answer is far enough in the chat
	// for what follows it (a file) to be shown.
	Shown(text string) bool
}

// Step is one call to the platform, made without the turn's lock. It
// returns how to record the outcome (nil: nothing), run under the lock.
type Step func(ctx context.Context) (commit func())

// Options tune a rendered turn.
type Options struct {
	// Typing is how often "typing…" is renewed while the turn runs.
	Typing time.Duration
	// Idle stops the goroutine when no event came for this long and no
	// tool runs, in case End is never called. A later event starts it
	// again.
	Idle time.Duration
	// HideTools leaves out the tool lines (an approval still shows).
	HideTools bool
	// LineWait, if set, is how long until a tool line may be edited; 0
	// means now.
	LineWait func() time.Duration
	// Log takes the failed calls, and should name the chat. nil discards.
	Log *slog.Logger
}

// Events is what a renderer returns: turn.Events and End, which the Hub
// calls after every turn.
type Events interface {
	turn.Events
	End()
}

type itemKind int

const (
	itemText itemKind = iota
	itemTool
	itemApproval
)

// item is one thing a turn shows, in order.
type item[M any] struct {
	kind itemKind
	// answers
	text   string // Markdown so far
	frozen bool   // complete
	answer Answer
	// tool lines
	call     turn.ToolCall
	result   *turn.ToolResult
	lineID   M
	lineSent bool   // lineID is set
	line     string // what lineID shows
	// approvals
	approval turn.Approval

	done bool // tool lines and approvals: shown in final form, or given up
}

// Turn implements Events for one turn in one chat.
type Turn[M any] struct {
	ctx  context.Context
	d    Delivery[M]
	opts Options
	wake chan struct{}

	mu        sync.Mutex
	items     []*item[M]
	tools     map[string]*item[M] // tool lines by call id
	running   int                 // tools started and not finished
	awaiting  bool                // an approval is waiting for the owner
	ending    bool                // Final or End: no more typing, stop when settled
	lastEvent time.Time
	active    bool          // the goroutine runs
	exited    chan struct{} // closed when the current goroutine returns
	changed   chan struct{} // closed and replaced after every step
}

var _ Events = (*Turn[int])(nil)

// Start renders a turn in the chat d delivers to, until End or ctx ends.
// The goroutine starts at once, to show "typing…".
func Start[M any](ctx context.Context, d Delivery[M], opts Options) *Turn[M] {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	t := &Turn[M]{ctx: ctx, d: d, opts: opts, wake: make(chan struct{}, 1),
		changed: make(chan struct{}), tools: map[string]*item[M]{}, lastEvent: time.Now()}
	t.mu.Lock()
	t.startLocked()
	t.mu.Unlock()
	return t
}

// Active reports whether the turn's goroutine runs (for tests and
// diagnostics).
func (t *Turn[M]) Active() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active
}

// event applies change under the lock and wakes the goroutine, starting it
// again if it had gone idle.
func (t *Turn[M]) event(change func()) {
	t.mu.Lock()
	change()
	t.lastEvent = time.Now()
	t.startLocked()
	t.mu.Unlock()
	t.poke()
}

func (t *Turn[M]) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *Turn[M]) startLocked() {
	if t.active || t.ctx.Err() != nil {
		return
	}
	t.active = true
	t.exited = make(chan struct{})
	go t.run(t.exited)
}

// liveLocked is the answer still streaming, or nil.
func (t *Turn[M]) liveLocked() *item[M] {
	if n := len(t.items); n > 0 && t.items[n-1].kind == itemText && !t.items[n-1].frozen {
		return t.items[n-1]
	}
	return nil
}

// freezeLocked completes the streaming answer: any event but Text ends a
// step's text.
func (t *Turn[M]) freezeLocked() {
	if it := t.liveLocked(); it != nil {
		it.frozen = true
	}
}

func (t *Turn[M]) newAnswerLocked() *item[M] {
	it := &item[M]{kind: itemText, answer: t.d.NewAnswer()}
	t.items = append(t.items, it)
	return it
}

// Text appends a piece of the answer.
func (t *Turn[M]) Text(delta string) {
	if delta == "" {
		return
	}
	t.event(func() {
		it := t.liveLocked()
		if it == nil {
			it = t.newAnswerLocked()
		}
		it.text += delta
	})
}

// ToolStarted shows a line for the call (unless tool lines are hidden).
func (t *Turn[M]) ToolStarted(c turn.ToolCall) {
	t.event(func() {
		t.freezeLocked()
		t.awaiting = false
		t.running++
		if t.opts.HideTools {
			t.tools[c.ID] = nil // counted, so ToolFinished uncounts it; no line
			return
		}
		it := &item[M]{kind: itemTool, call: c}
		t.tools[c.ID] = it
		t.items = append(t.items, it)
	})
}

// ToolFinished brings the call's line up to date with its result. A call
// that never started (denied) gets a line of its own.
func (t *Turn[M]) ToolFinished(c turn.ToolCall, r turn.ToolResult) {
	t.event(func() {
		t.freezeLocked()
		t.awaiting = false
		it, started := t.tools[c.ID]
		if started {
			t.running--
			delete(t.tools, c.ID)
		} else if !t.opts.HideTools {
			it = &item[M]{kind: itemTool, call: c}
			t.items = append(t.items, it)
		}
		if it != nil {
			it.result = &r
		}
	})
}

// Approval shows the request; typing pauses until the next event.
func (t *Turn[M]) Approval(a turn.Approval) {
	t.event(func() {
		t.freezeLocked()
		t.awaiting = true
		t.items = append(t.items, &item[M]{kind: itemApproval, approval: a})
	})
}

// File sends a file once everything before it is shown.
func (t *Turn[M]) File(f turn.File) error {
	t.event(t.freezeLocked)
	t.settle()
	return t.d.File(t.ctx, f)
}

// Final shows the step's answer in its final form and ends the turn. text
// is authoritative; it is the same text that streamed.
func (t *Turn[M]) Final(text string) {
	t.event(func() {
		it := t.liveLocked()
		if it == nil && strings.TrimSpace(text) != "" {
			it = t.newAnswerLocked()
		}
		if it != nil {
			if strings.TrimSpace(text) != "" {
				it.text = text
			}
			it.frozen = true
		}
		t.ending = true
	})
	t.End()
}

// End finishes the turn: what streamed so far is shown in its final form,
// typing stops, and End returns once the goroutine has. It is safe to call
// more than once and after Final.
func (t *Turn[M]) End() {
	t.mu.Lock()
	t.freezeLocked()
	t.ending = true
	if !t.active && t.pendingLocked() {
		t.startLocked()
	}
	var exited chan struct{}
	if t.active {
		exited = t.exited
	}
	t.mu.Unlock()
	t.poke()
	if exited != nil {
		<-exited
	}
}

// settle waits until everything so far is shown, or the turn's context
// ends.
func (t *Turn[M]) settle() {
	for {
		t.mu.Lock()
		done := !t.pendingLocked() || !t.active
		changed := t.changed
		t.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-t.ctx.Done():
			return
		}
	}
}

// pendingLocked reports whether some item is not shown yet. A streaming
// answer is as far as its Answer says; a running tool's line counts as
// shown once it is there.
func (t *Turn[M]) pendingLocked() bool {
	for _, it := range t.items {
		switch {
		case it.kind == itemText && it.frozen:
			if !it.answer.Done() {
				return true
			}
		case it.kind == itemText:
			if !it.answer.Shown(it.text) {
				return true
			}
		case it.done:
		case it.kind == itemTool && it.lineSent && it.line == t.d.ToolLine(it.call, it.result):
		default:
			return true
		}
	}
	return false
}

// Discard returns the Events of a turn that cannot be shown (its chat id is
// invalid): nothing is shown, and File fails with err.
func Discard(err error) Events { return discard{err} }

type discard struct{ err error }

func (discard) Text(string)                                 {}
func (discard) ToolStarted(turn.ToolCall)                   {}
func (discard) ToolFinished(turn.ToolCall, turn.ToolResult) {}
func (discard) Approval(turn.Approval)                      {}
func (d discard) File(turn.File) error                      { return d.err }
func (discard) Final(string)                                {}
func (discard) End()                                        {}
