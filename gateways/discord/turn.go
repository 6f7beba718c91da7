package discord

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/agent"
)

// turnTiming paces a rendered turn. Tests shorten it. (Edits are paced
// per channel by the gateway's editPacer.)
type turnTiming struct {
	// typing is how often "typing…" is renewed (Discord shows it ten
	// seconds, or until the bot sends a message).
	typing time.Duration
	// idle ends the renderer's goroutine when no event came for this long
	// and no tool is running, in case End is never called. A later event
	// starts it again.
	idle time.Duration
}

var defaultTiming = turnTiming{typing: 8 * time.Second, idle: time.Minute}

const (
	// maxSummary bounds a tool's summary in an approval request, well
	// inside one message; maxLineSummary on a tool line.
	maxSummary     = 1500
	maxLineSummary = 120
	maxLineError   = 200
)

// Custom ids of the approval buttons: "<decision>:<approval id>", the form
// the Hub parses.
const (
	dataApprove = "approve:"
	dataAlways  = "always:"
	dataDeny    = "deny:"
)

// RenderTurn returns the Events of one agent turn in a channel. The answer
// streams: its first text is sent at once as a reply to replyTo, then the
// message is edited as text comes in (edits of a channel at most one per
// edit interval, so pieces that arrive meanwhile go out together). Past
// Discord's 2000 characters the message is completed where Send would cut
// it and the answer goes on in a new one, so that when the step ends the
// messages are exactly those Send would have sent. Each tool call is a
// line that turns into ✓ or ✗ when it ends, an approval request is a
// message with Approve / Always / Deny buttons, files are uploaded.
// "typing…" shows while the turn runs and no approval waits. No message
// or edit pings anyone or unfurls a link.
//
// Events only record what happened and wake the turn's goroutine, which
// makes every call to Discord, in order; so a slow or rate-limited channel
// never holds up the agent. The returned value also has End(), which the
// Hub calls after the turn: it shows what streamed so far in its final
// form (a turn that ended in an error or was stopped has no Final) and
// waits for the goroutine. The goroutine also stops when ctx ends, and
// after a minute without events while no tool runs.
func (g *Gateway) RenderTurn(ctx context.Context, chatID, replyTo string) agent.Events {
	t := &turn{g: g, ctx: ctx, chatID: chatID, timing: g.timing, wake: make(chan struct{}, 1),
		changed: make(chan struct{}), tools: map[string]*item{}, lastEvent: time.Now()}
	if _, ok := snowflake(chatID); !ok {
		g.log.Warn("turn for an invalid channel id; nothing will be shown", "channel_id", chatID)
		t.broken = true
		return t
	}
	if _, ok := snowflake(replyTo); ok {
		t.replyTo = replyTo
	}
	t.mu.Lock()
	t.startLocked()
	t.mu.Unlock()
	return t
}

type itemKind int

const (
	itemText itemKind = iota
	itemTool
	itemApproval
)

// item is one thing a turn shows, in order: an answer (text), a tool line
// or an approval request. The turn's goroutine brings the channel in line
// with it.
type item struct {
	kind itemKind
	// text items
	text   string   // Markdown so far
	frozen bool     // complete: show its final chunks
	msgs   []shown  // its messages, in order
	final  []string // once frozen: the messages it ends as
	broken bool     // a message could not be sent: stop streaming it
	// tool items
	call   agent.ToolCall
	result *agent.ToolResult
	lineID string // the line's message; "" not sent yet
	line   string // what the line shows
	// approval items
	approval agent.Approval

	done bool // shown in its final form (or given up)
}

// shown is one message of an answer.
type shown struct {
	id, text string
	// stale: an edit to text failed while streaming; delivery tries it
	// once more.
	stale bool
}

// turn implements agent.Events for one turn.
type turn struct {
	g       *Gateway
	ctx     context.Context
	chatID  string
	replyTo string
	timing  turnTiming
	broken  bool // invalid channel id: show nothing
	wake    chan struct{}

	mu        sync.Mutex
	items     []*item
	tools     map[string]*item // tool lines by call id
	running   int              // tools started and not finished
	awaiting  bool             // an approval is waiting for the owner
	ending    bool             // Final or End: no more typing, stop when settled
	lastEvent time.Time
	active    bool          // the goroutine runs
	exited    chan struct{} // closed when the current goroutine returns
	changed   chan struct{} // closed and replaced after every step
}

var _ agent.Events = (*turn)(nil)

// event applies change under the lock and wakes the goroutine, starting it
// again if it had gone idle.
func (t *turn) event(change func()) {
	if t.broken {
		return
	}
	t.mu.Lock()
	change()
	t.lastEvent = time.Now()
	t.startLocked()
	t.mu.Unlock()
	t.poke()
}

func (t *turn) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *turn) startLocked() {
	if t.active || t.ctx.Err() != nil {
		return
	}
	t.active = true
	t.exited = make(chan struct{})
	go t.run(t.exited)
}

// liveLocked is the answer still streaming, or nil.
func (t *turn) liveLocked() *item {
	if n := len(t.items); n > 0 && t.items[n-1].kind == itemText && !t.items[n-1].frozen {
		return t.items[n-1]
	}
	return nil
}

// freezeLocked completes the streaming answer: any event but Text ends a
// step's text.
func (t *turn) freezeLocked() {
	if it := t.liveLocked(); it != nil {
		it.frozen = true
	}
}

// Text appends a piece of the answer.
func (t *turn) Text(delta string) {
	if delta == "" {
		return
	}
	t.event(func() {
		it := t.liveLocked()
		if it == nil {
			it = &item{kind: itemText}
			t.items = append(t.items, it)
		}
		it.text += delta
	})
}

// ToolStarted shows a line for the call.
func (t *turn) ToolStarted(c agent.ToolCall) {
	t.event(func() {
		t.freezeLocked()
		t.awaiting = false
		t.running++
		it := &item{kind: itemTool, call: c}
		t.tools[c.ID] = it
		t.items = append(t.items, it)
	})
}

// ToolFinished turns the call's line into ✓ or ✗ with its duration. A call
// that never started (denied) gets a line of its own.
func (t *turn) ToolFinished(c agent.ToolCall, r agent.ToolResult) {
	t.event(func() {
		t.freezeLocked()
		t.awaiting = false
		it, started := t.tools[c.ID]
		if started {
			t.running--
			delete(t.tools, c.ID)
		} else {
			it = &item{kind: itemTool, call: c}
			t.items = append(t.items, it)
		}
		it.result = &r
	})
}

// Approval sends the request with Approve / Always / Deny buttons.
func (t *turn) Approval(a agent.Approval) {
	t.event(func() {
		t.freezeLocked()
		t.awaiting = true
		t.items = append(t.items, &item{kind: itemApproval, approval: a})
	})
}

// File uploads a file once everything before it is shown.
func (t *turn) File(f agent.File) error {
	if t.broken {
		return errors.New("discord: invalid channel id " + t.chatID)
	}
	t.event(t.freezeLocked)
	t.settle()
	return t.g.SendFile(t.ctx, t.chatID, f, t.replyTo)
}

// Final shows the step's answer in its final form and ends the turn. text
// is authoritative; it is the same text that streamed.
func (t *turn) Final(text string) {
	t.event(func() {
		it := t.liveLocked()
		if it == nil && strings.TrimSpace(text) != "" {
			it = &item{kind: itemText}
			t.items = append(t.items, it)
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
func (t *turn) End() {
	if t.broken {
		return
	}
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
func (t *turn) settle() {
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
// answer holds nothing up; a running tool's line counts as shown once it
// is there.
func (t *turn) pendingLocked() bool {
	for _, it := range t.items {
		switch {
		case it.done:
		case it.kind == itemText && !it.frozen:
		case it.kind == itemTool && it.lineID != "" && it.line == toolLine(it.call, it.result):
		default:
			return true
		}
	}
	return false
}

// run is the turn's goroutine: it shows the items, paces streaming edits
// and renews "typing…".
func (t *turn) run(exited chan struct{}) {
	defer close(exited)
	typing := time.NewTicker(t.timing.typing)
	defer typing.Stop()
	t.typing()
	for {
		step, wait, exit := t.next()
		t.notify()
		if exit {
			return
		}
		if step != nil {
			step()
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
func (t *turn) notify() {
	t.mu.Lock()
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

func (t *turn) typing() {
	t.mu.Lock()
	skip := t.ending || t.awaiting
	t.mu.Unlock()
	if !skip && t.ctx.Err() == nil {
		t.g.Typing(t.ctx, t.chatID)
	}
}

// next picks the next call to make, in item order, or how long to wait for
// one; exit is true when the goroutine is to stop (it is then marked
// inactive under the same lock, so a new event starts another).
func (t *turn) next() (step func(), wait time.Duration, exit bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		t.active = false
		return nil, 0, true
	}
	for _, it := range t.items {
		if it.done {
			continue
		}
		switch it.kind {
		case itemApproval:
			return t.approvalStep(it), 0, false
		case itemTool:
			step, wait := t.toolNext(it)
			if step != nil || wait > 0 {
				return step, wait, false
			}
		case itemText:
			step, wait := t.textNext(it)
			if step != nil || wait > 0 {
				return step, wait, false
			}
		}
	}
	// Waiting for an approval counts as idle: typing is off then, and the
	// answer's event starts the goroutine again.
	idleFor := time.Since(t.lastEvent)
	if t.ending || t.running == 0 && idleFor >= t.timing.idle {
		t.active = false
		return nil, 0, true
	}
	wait = t.timing.idle
	if t.running == 0 {
		wait -= idleFor
	}
	return nil, wait, false
}

// toolNext sends a tool's line or brings it up to date.
func (t *turn) toolNext(it *item) (func(), time.Duration) {
	line := toolLine(it.call, it.result)
	switch {
	case it.lineID == "":
		return t.toolStep(it, line), 0
	case it.line != line:
		if d := t.g.edits.due(t.chatID); d > 0 {
			return nil, d
		}
		return t.toolStep(it, line), 0
	case it.result != nil:
		it.done = true
	}
	return nil, 0
}

// textNext brings an answer's messages in line with its text: while it
// streams, its final chunks and the growing one; once frozen, its chunks
// as Send cuts them (surplus messages, left by a final text that is not
// the streamed one, are deleted). Edits wait for the channel's pace.
func (t *turn) textNext(it *item) (func(), time.Duration) {
	var want []string
	switch {
	case it.frozen:
		if it.final == nil {
			it.final = render(replyOf(it.text))
		}
		want = it.final
	case it.broken:
		return nil, 0
	default:
		if d := t.g.edits.due(t.chatID); d > 0 && len(it.msgs) > 0 {
			return nil, d // the text so far goes out with the next edit
		}
		final, growing := streamChunks(it.text)
		want = final
		if growing != "" {
			want = append(want, growing)
		}
	}
	for i, w := range want {
		if i == len(it.msgs) {
			return t.sendStep(it, w), 0
		}
		if m := it.msgs[i]; m.text == w && !(it.frozen && m.stale) {
			continue
		}
		if d := t.g.edits.due(t.chatID); d > 0 {
			return nil, d
		}
		return t.editStep(it, i, w), 0
	}
	if it.frozen {
		if len(it.msgs) > len(want) {
			return t.deleteStep(it, len(want)), 0
		}
		it.done = true
	}
	return nil, 0
}
