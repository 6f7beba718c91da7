package telegram

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/gateways"
)

// turnTiming paces a rendered turn. Tests shorten it.
type turnTiming struct {
	// stream is the least time between two edits of a streaming answer.
	stream time.Duration
	// typing is how often "typing…" is renewed (Telegram shows it ~5 s).
	typing time.Duration
	// idle ends the renderer's goroutine when no event came for this long
	// and no tool is running, in case End is never called. A later event
	// starts it again.
	idle time.Duration
}

var defaultTiming = turnTiming{stream: time.Second, typing: 4 * time.Second, idle: time.Minute}

// placeholder is the text of a streaming answer before it has any.
const placeholder = "…"

var _ gateways.TurnRenderer = (*Gateway)(nil)

// RenderTurn returns the Events of one agent turn in a chat: the answer
// streams into a message threaded to replyTo (edited at most once per
// stream interval, plain text), then becomes formatted HTML when the step
// ends; tool calls show as one line each, approvals as a message with
// buttons. "typing…" shows while the turn runs.
//
// The returned value also has End(). Its goroutine stops at Final, at End,
// when ctx ends, or after a minute without events while no tool runs; the
// Hub should call End after every turn, above all after one that ended in
// an error (Final never comes then): End shows what streamed so far in its
// final form and waits for the goroutine.
func (g *Gateway) RenderTurn(ctx context.Context, chatID, replyTo string) agent.Events {
	t := &turn{g: g, ctx: ctx, chatID: chatID, timing: g.timing, wake: make(chan struct{}, 1),
		changed: make(chan struct{}), tools: map[string]*item{}, lastEvent: time.Now()}
	var err error
	if t.chat, err = strconv.ParseInt(chatID, 10, 64); err != nil {
		g.log.Warn("turn for an invalid chat id; nothing will be shown", "chat_id", chatID)
		t.broken = true
		return t
	}
	t.replyTo, _ = strconv.Atoi(replyTo)
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
// or an approval request. The turn's goroutine brings what the chat shows
// in line with it.
type item struct {
	kind itemKind
	// text items
	text   string // Markdown so far
	frozen bool   // complete: show it formatted
	// tool items
	call   agent.ToolCall
	result *agent.ToolResult
	// approval items
	approval agent.Approval

	msgID int    // the item's (first) message; 0 not sent, -1 sending failed
	shown string // what msgID shows now (streaming text, tool line)
	done  bool   // shown in its final form
}

// turn implements agent.Events for one turn. Events only change state
// under mu and wake the goroutine (run), which makes every call to
// Telegram; so a slow or rate-limited chat never blocks the agent, and
// streaming edits coalesce.
type turn struct {
	g       *Gateway
	ctx     context.Context
	chatID  string
	chat    int64
	replyTo int
	timing  turnTiming
	broken  bool // invalid chat id: show nothing
	wake    chan struct{}

	mu         sync.Mutex
	items      []*item
	tools      map[string]*item // tool lines by call id
	running    int              // tools started and not finished
	awaiting   bool             // an approval is waiting for the owner
	ending     bool             // Final or End: no more typing, stop when settled
	lastEvent  time.Time
	lastStream time.Time     // last streaming send or edit
	active     bool          // the goroutine runs
	exited     chan struct{} // closed when the current goroutine returns
	changed    chan struct{} // closed and replaced after every step
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

// live is the answer still streaming, or nil.
func (t *turn) liveLocked() *item {
	if n := len(t.items); n > 0 && t.items[n-1].kind == itemText && !t.items[n-1].frozen {
		return t.items[n-1]
	}
	return nil
}

// freeze completes the streaming answer: any event but Text ends a step's
// text.
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

// ToolStarted shows a line for the call (unless verbosity is quiet).
func (t *turn) ToolStarted(c agent.ToolCall) {
	t.event(func() {
		t.freezeLocked()
		t.awaiting = false
		t.running++
		if t.g.cfg.Verbosity == VerbosityQuiet {
			return
		}
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
		} else if t.g.cfg.Verbosity != VerbosityQuiet {
			it = &item{kind: itemTool, call: c}
			t.items = append(t.items, it)
		}
		if it != nil {
			it.result = &r
		}
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

// File sends a file once everything before it is shown.
func (t *turn) File(f agent.File) error {
	if t.broken {
		return errors.New("telegram: invalid chat id " + strconv.Quote(t.chatID))
	}
	t.event(t.freezeLocked)
	t.settle()
	reply := ""
	if t.replyTo != 0 {
		reply = strconv.Itoa(t.replyTo)
	}
	return t.g.SendFile(t.ctx, t.chatID, f, reply)
}

// Final shows the step's answer formatted and ends the turn. text is
// authoritative; it is the same text that streamed.
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

// settle waits until everything so far is shown (a streaming answer only
// needs its first message), or the turn's context ends.
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

// pendingLocked reports whether some item is not shown yet (a streaming
// answer counts as shown once its message exists).
func (t *turn) pendingLocked() bool {
	for _, it := range t.items {
		if it.done {
			continue
		}
		if it.kind == itemText && !it.frozen && (it.msgID != 0 || strings.TrimSpace(it.text) == "") {
			continue
		}
		if it.kind == itemTool && it.msgID != 0 && it.shown == t.toolLine(it) {
			continue
		}
		return true
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
	now := time.Now()
	if t.ctx.Err() != nil {
		t.active = false
		return nil, 0, true
	}
	wait = t.timing.idle
	for _, it := range t.items {
		if it.done {
			continue
		}
		switch it.kind {
		case itemApproval:
			return t.sendApprovalStep(it), 0, false
		case itemTool:
			if line := t.toolLine(it); it.msgID == 0 || it.msgID > 0 && it.shown != line {
				return t.toolStep(it, line), 0, false
			}
			if it.result != nil {
				it.done = true
			}
			continue
		}
		if it.frozen {
			return t.deliverStep(it), 0, false
		}
		if it.msgID == 0 {
			if strings.TrimSpace(it.text) == "" {
				continue // no placeholder for white space alone
			}
			return t.streamStep(it, true), 0, false
		}
		if it.msgID > 0 && preview(it.text) != it.shown {
			if d := t.lastStream.Add(t.timing.stream).Sub(now); d > 0 {
				return nil, d, false
			}
			return t.streamStep(it, false), 0, false
		}
	}
	// Waiting for an approval counts as idle: typing is off then, and the
	// answer's event starts the goroutine again.
	idleFor := now.Sub(t.lastEvent)
	if t.ending || t.running == 0 && idleFor >= t.timing.idle {
		t.active = false
		return nil, 0, true
	}
	if t.running == 0 {
		wait = t.timing.idle - idleFor
	}
	return nil, wait, false
}
