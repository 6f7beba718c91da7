package coder

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/tools"
)

// MaxLine bounds one line of a CLI's event stream; a longer one (a tool
// result of megabytes, or garbage) is skipped, not buffered.
const MaxLine = 8 << 20

// afterResult is how long a CLI may take to exit once it has answered
// before it is killed.
const afterResult = 10 * time.Second

var errTimeout = errors.New("the coding agent took longer than its turn timeout")

// Outcome is how a CLI ended a turn.
type Outcome struct {
	Session string  // the CLI's session id, to continue with
	Text    string  // the final answer
	CostUSD float64 // what the turn cost, as the CLI reports it
	Turns   int     // model turns the CLI took
	Tokens  int     // input and output tokens
	// Err is the CLI's own account of a failed turn (an API error, a
	// turn limit), or nil.
	Err error
}

// Turn is one run of the CLI, as its Stream sees it: the chat's events,
// the CLI's standard input and the owner's approvals. Its methods are
// called from the turn's goroutine only (Stream.Begin and Stream.Line).
type Turn struct {
	b   *Backend
	key agent.SessionKey
	ev  agent.Events
	in  io.WriteCloser

	prompt    string
	session   string
	out       *Outcome
	decisions chan decision
	asks      map[string]*ask
	calls     map[string]*call
}

type ask struct {
	tool    string
	expires time.Time
	answer  func(allow bool, reason string)
}

type call struct {
	c       agent.ToolCall
	started time.Time // zero until it runs
	denied  string
}

// Events is where the turn's text and tool lines go.
func (t *Turn) Events() agent.Events { return t.ev }

// Send writes v as one JSON line to the CLI's standard input.
func (t *Turn) Send(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = t.in.Write(append(line, '\n'))
	return err
}

// CloseInput closes the CLI's standard input.
func (t *Turn) CloseInput() { t.in.Close() }

// SetSession records the CLI's session id as soon as it is known, so that
// a turn cut by a crash is continued by the next one.
func (t *Turn) SetSession(id string) {
	if id == "" || id == t.session {
		return
	}
	t.session = id
	err := t.b.update(t.key, func(m *meta) { m.Session = id }, nil)
	if err != nil {
		t.b.cfg.Log.Warn("could not store the coding agent's session", "err", err)
	}
}

// Finish records the CLI's result; the turn ends when the CLI exits.
func (t *Turn) Finish(o Outcome) {
	if o.Session == "" {
		o.Session = t.session
	}
	t.out = &o
}

// Permission is what the owner's policy says of a tool named as latch's
// own tools are named (see agent.DefaultPolicy).
func (t *Turn) Permission(latchTool string) agent.Permission { return t.b.cfg.Policy.For(latchTool) }

// Ask puts a tool call to the owner, unless they allowed the tool for
// the session already; answer runs once, from the turn's goroutine, with
// the owner's decision, or a denial when the request expires.
func (t *Turn) Ask(tool, summary, detail string, answer func(allow bool, reason string)) {
	if t.b.alwaysAllowed(t.key, tool) {
		answer(true, "")
		return
	}
	id := t.b.register(t.key, t.decisions)
	t.asks[id] = &ask{tool: tool, expires: time.Now().Add(t.b.cfg.ApprovalTimeout), answer: answer}
	t.ev.Approval(agent.Approval{ID: id, Tool: tool, Summary: summary, Detail: detail})
}

// ToolCalled notes a call the model made; it shows once it runs.
func (t *Turn) ToolCalled(c agent.ToolCall) {
	if _, ok := t.calls[c.ID]; !ok {
		t.calls[c.ID] = &call{c: c}
	}
}

// ToolRuns shows the call id as running.
func (t *Turn) ToolRuns(id string) {
	c := t.callFor(id)
	if c.started.IsZero() {
		c.started = time.Now()
		t.ev.ToolStarted(c.c)
	}
}

// ToolDenied shows the call id as refused, for reason.
func (t *Turn) ToolDenied(id, reason string) {
	c := t.callFor(id)
	c.denied = reason
	t.ev.ToolFinished(c.c, agent.ToolResult{Denied: true, Err: errors.New(reason)})
	delete(t.calls, id)
}

// ToolDone shows how the call id ended; errText is "" on success.
func (t *Turn) ToolDone(id string, isErr bool, errText string) {
	c, ok := t.calls[id]
	if !ok {
		return // denied and shown already, or not a call of this turn
	}
	t.ToolRuns(id)
	r := agent.ToolResult{Duration: time.Since(c.started)}
	if isErr {
		r.Err = errors.New(cmp.Or(clip(errText, 300), "failed"))
	}
	t.ev.ToolFinished(c.c, r)
	delete(t.calls, id)
}

func (t *Turn) callFor(id string) *call {
	c, ok := t.calls[id]
	if !ok {
		c = &call{c: agent.ToolCall{ID: id, Name: "tool"}}
		t.calls[id] = c
	}
	return c
}

// Log is the backend's logger.
func (t *Turn) Log() interface{ Warn(string, ...any) } { return t.b.cfg.Log }

func (t *Turn) decide(d decision) {
	a, ok := t.asks[d.id]
	if !ok {
		return
	}
	delete(t.asks, d.id)
	switch d.d {
	case agent.Approve:
		a.answer(true, "")
	case agent.Always:
		t.b.allowAlways(t.key, a.tool)
		a.answer(true, "")
	default:
		a.answer(false, "denied: the owner said no")
	}
}

// expire denies the requests whose time is up and returns when the next
// one expires (zero: none waits).
func (t *Turn) expire(now time.Time) time.Time {
	var next time.Time
	for id, a := range t.asks {
		if !now.Before(a.expires) {
			t.b.unregister(id)
			delete(t.asks, id)
			a.answer(false, fmt.Sprintf("denied: the owner did not answer within %v", t.b.cfg.ApprovalTimeout))
			continue
		}
		if next.IsZero() || a.expires.Before(next) {
			next = a.expires
		}
	}
	return next
}

// run runs one turn of the CLI to its end.
func (b *Backend) run(ctx context.Context, key agent.SessionKey, session, prompt string, ev agent.Events) (Outcome, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, b.cfg.Timeout, errTimeout)
	defer cancel()
	name := b.cfg.CLI.Name()
	path, args := b.cfg.CLI.Command(session, prompt)
	stderr := &tools.StderrTail{}
	p, err := tools.StartProcess(tools.ProcessOptions{Dir: b.cfg.Workspace, Env: b.cfg.Env, Stderr: stderr,
		Reaper: b.cfg.Reaper, Cgroups: b.cfg.Cgroups}, path, args...)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", name, err)
	}
	lines := make(chan []byte)
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() { readLines(p.Stdout(), MaxLine, lines, stop, b.cfg.Log) })
	// Kill closes stdout, which ends the reader, whichever way this ends.
	defer reader.Wait()
	defer p.Kill()
	defer close(stop)

	t := &Turn{b: b, key: key, ev: ev, in: p.Stdin(), prompt: prompt, session: session,
		decisions: make(chan decision, 16), asks: make(map[string]*ask), calls: make(map[string]*call)}
	defer func() {
		for id := range t.asks {
			b.unregister(id)
		}
	}()
	s := b.cfg.CLI.Stream(t)
	if err := s.Begin(); err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", name, err)
	}
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	var exitAfter <-chan time.Time
	for {
		if next := t.expire(time.Now()); !next.IsZero() {
			expiry.Reset(time.Until(next))
		}
		select {
		case line, ok := <-lines:
			if !ok {
				return t.end(p, stderr)
			}
			if err := s.Line(line); err != nil {
				return Outcome{}, fmt.Errorf("%s: %w", name, err)
			}
			if t.out != nil && exitAfter == nil {
				t.CloseInput()
				exitAfter = time.After(afterResult)
			}
		case d := <-t.decisions:
			t.decide(d)
		case <-expiry.C:
		case <-exitAfter:
			return t.end(p, stderr)
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), errTimeout) {
				return Outcome{}, fmt.Errorf("%s: %w (%v)", name, errTimeout, b.cfg.Timeout)
			}
			return Outcome{}, context.Cause(ctx)
		}
	}
}

// end is the turn's result once the CLI's output has ended.
func (t *Turn) end(p *tools.Process, stderr *tools.StderrTail) (Outcome, error) {
	name := t.b.cfg.CLI.Name()
	if t.out == nil {
		p.Kill()
		why := "exited"
		if err := p.Err(); err != nil {
			why = err.Error()
		}
		if last := clip(agent.Visible(stderr.LastLine()), 300); last != "" {
			why += ": " + last
		}
		return Outcome{Session: t.session}, fmt.Errorf("%s ended without an answer (%s)", name, why)
	}
	if t.out.Err != nil {
		return *t.out, fmt.Errorf("%s: %w", name, t.out.Err)
	}
	return *t.out, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
