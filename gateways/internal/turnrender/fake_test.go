package turnrender

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/turn"
)

// fakeChat is a Delivery in memory: the messages a chat shows, by id, and
// every call made, in order. Answers are cut into chunks of chunk bytes
// and shown as one message per chunk, streamed by edits.
type fakeChat struct {
	chunk int

	mu      sync.Mutex
	msgs    map[int]string
	order   []int // ids of the messages shown, oldest first
	nextID  int
	calls   []string
	frozen  []string      // the text each answer had when first seen frozen
	hold    chan struct{} // when set, every call but typing waits until it is closed
	entered chan string   // when set, every call but typing is announced here first
	changed chan struct{} // closed and replaced on every call
}

func newFakeChat(chunk int) *fakeChat {
	return &fakeChat{chunk: chunk, msgs: map[int]string{}, changed: make(chan struct{})}
}

// call waits for hold, unless ctx ends first, then records the call and
// applies its change, and wakes the waiters.
func (c *fakeChat) call(ctx context.Context, op string, apply func()) error {
	c.mu.Lock()
	hold, entered := c.hold, c.entered
	c.mu.Unlock()
	if entered != nil {
		entered <- op
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, op)
	apply()
	close(c.changed)
	c.changed = make(chan struct{})
	return nil
}

func (c *fakeChat) send(ctx context.Context, text string) (int, error) {
	var id int
	err := c.call(ctx, "send "+text, func() {
		c.nextID++
		id = c.nextID
		c.msgs[id] = text
		c.order = append(c.order, id)
	})
	return id, err
}

func (c *fakeChat) edit(ctx context.Context, id int, text string) error {
	return c.call(ctx, fmt.Sprintf("edit %d %s", id, text), func() { c.msgs[id] = text })
}

func (c *fakeChat) delete(ctx context.Context, id int) error {
	return c.call(ctx, fmt.Sprintf("delete %d", id), func() {
		delete(c.msgs, id)
		c.order = slices.DeleteFunc(c.order, func(o int) bool { return o == id })
	})
}

func (c *fakeChat) NewAnswer() Answer { return &fakeAnswer{c: c} }

func (c *fakeChat) ToolLine(call turn.ToolCall, r *turn.ToolResult) string {
	switch {
	case r == nil:
		return "⚙ " + call.Name
	case r.Denied:
		return "✗ " + call.Name + " · denied"
	}
	return "✓ " + call.Name + " · " + turn.Seconds(r.Duration)
}

func (c *fakeChat) SendLine(ctx context.Context, line string) (int, error) { return c.send(ctx, line) }

func (c *fakeChat) EditLine(ctx context.Context, id int, line string) error {
	return c.edit(ctx, id, line)
}

func (c *fakeChat) Approval(ctx context.Context, a turn.Approval) error {
	_, err := c.send(ctx, "approve? "+a.ID)
	return err
}

func (c *fakeChat) File(ctx context.Context, f turn.File) error {
	_, err := c.send(ctx, "file "+f.Name)
	return err
}

func (c *fakeChat) Typing(context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, "typing")
}

// shown is what the chat shows, oldest message first.
func (c *fakeChat) shown() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, id := range c.order {
		out = append(out, c.msgs[id])
	}
	return out
}

// made is the calls made, typing left out.
func (c *fakeChat) made() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.calls {
		if s != "typing" {
			out = append(out, s)
		}
	}
	return out
}

func (c *fakeChat) count(prefix string) int {
	n := 0
	for _, s := range c.made() {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// wait waits until cond holds, re-checking after every call.
func (c *fakeChat) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(adaptertest.WaitLimit)
	defer timeout.Stop()
	for {
		c.mu.Lock()
		changed := c.changed
		c.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("timed out waiting for %s; calls: %q", what, c.made())
		}
	}
}

// chunks cuts text into pieces of n bytes.
func chunks(text string, n int) []string {
	var out []string
	for len(text) > n {
		out = append(out, text[:n])
		text = text[n:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}

// fakeAnswer shows an answer as its chunks: streaming and frozen alike,
// the messages are brought in line with chunks(text), surplus ones
// deleted.
type fakeAnswer struct {
	c      *fakeChat
	ids    []int
	texts  []string
	frozen bool
	done   bool
}

func (a *fakeAnswer) Done() bool             { return a.done }
func (a *fakeAnswer) Shown(text string) bool { return len(a.ids) > 0 || text == "" }

func (a *fakeAnswer) Next(text string, frozen bool) (Step, time.Duration) {
	if frozen && !a.frozen {
		a.frozen = true
		a.c.mu.Lock()
		a.c.frozen = append(a.c.frozen, text)
		a.c.mu.Unlock()
	}
	want := chunks(text, a.c.chunk)
	for i, w := range want {
		if i == len(a.ids) {
			return func(ctx context.Context) func() {
				id, err := a.c.send(ctx, w)
				return func() {
					if err == nil {
						a.ids, a.texts = append(a.ids, id), append(a.texts, w)
					}
				}
			}, 0
		}
		if a.texts[i] != w {
			id := a.ids[i]
			return func(ctx context.Context) func() {
				err := a.c.edit(ctx, id, w)
				return func() {
					if err == nil {
						a.texts[i] = w
					}
				}
			}, 0
		}
	}
	if n := len(want); len(a.ids) > n {
		id := a.ids[n]
		return func(ctx context.Context) func() {
			err := a.c.delete(ctx, id)
			return func() {
				if err == nil {
					a.ids, a.texts = append(a.ids[:n], a.ids[n+1:]...), append(a.texts[:n], a.texts[n+1:]...)
				}
			}
		}, 0
	}
	if frozen {
		a.done = true
	}
	return nil, 0
}

// runningTurns counts the goroutines running a Turn. Tests of this package
// do not run in parallel, so every one counted belongs to the test.
func runningTurns() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "turnrender.(*Turn[...]).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// noTurnGoroutine fails unless every Turn goroutine is gone. A goroutine
// that closed its exited channel may still be on its way out; it gets a
// moment, a goroutine that stays fails the test.
func noTurnGoroutine(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for runningTurns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d turn goroutines still run", runningTurns())
		}
		<-tick.C
	}
}

// testTurn starts a turn on chat with quick timings; it is ended at
// cleanup.
func testTurn(t *testing.T, ctx context.Context, chat *fakeChat, opts Options) *Turn[int] {
	t.Helper()
	if opts.Typing == 0 {
		opts.Typing = time.Hour
	}
	if opts.Idle == 0 {
		opts.Idle = time.Hour
	}
	tr := Start[int](ctx, chat, opts)
	t.Cleanup(tr.End)
	return tr
}
