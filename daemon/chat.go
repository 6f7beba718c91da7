package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
)

// localSession is the session of the terminal chat (`latch chat`). It is
// one conversation whether the daemon runs the turns or the CLI does.
var localSession = agent.SessionKey{Gateway: "local", Chat: "terminal"}

// errStopping ends a terminal turn when the daemon stops.
var errStopping = errors.New("latch is stopping")

// Chat runs the terminal chat's turns on an agent, one at a time. The
// daemon serves it on the control socket; `latch chat` opens its own with
// OpenChat when no daemon runs. It implements control.ChatBackend.
type Chat struct {
	agent     *agent.Agent
	workspace string
	// busy is set while a turn runs.
	busy atomic.Bool
	// closers release what OpenChat opened, last first.
	closers []func() error
}

// NewChat returns a Chat on ag, whose tools work in workspace.
func NewChat(ag *agent.Agent, workspace string) *Chat {
	return &Chat{agent: ag, workspace: workspace}
}

// OpenChat builds the agent exactly as the daemon does, on the store and
// workspace of cfg's home, for a `latch chat` without a daemon. It holds the
// store's lock until Close, so no daemon can start meanwhile (and it fails
// while one runs).
func OpenChat(cfg *config.Config, log *slog.Logger) (_ *Chat, err error) {
	if err := config.CheckHome(cfg.Home); err != nil {
		return nil, err
	}
	c := &Chat{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	db, err := OpenStore(cfg.Home)
	if err != nil {
		return nil, err
	}
	c.closers = append(c.closers, db.Close)
	if err := os.MkdirAll(cfg.Agent.Workspace, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	ws, err := tools.OpenWorkspace(cfg.Agent.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	c.closers = append(c.closers, ws.Close)
	if c.agent, err = NewAgent(cfg, db, ws, log); err != nil {
		return nil, err
	}
	c.workspace = ws.Dir()
	return c, nil
}

// Close releases what OpenChat opened; a Chat from NewChat owns nothing.
func (c *Chat) Close() error {
	var errs []error
	for i := len(c.closers) - 1; i >= 0; i-- {
		errs = append(errs, c.closers[i]())
	}
	c.closers = nil
	return errors.Join(errs...)
}

// ChatInfo implements control.ChatBackend.
func (c *Chat) ChatInfo(ctx context.Context) (control.ChatInfo, error) {
	st, err := c.agent.Status(localSession)
	if err != nil {
		return control.ChatInfo{}, err
	}
	return control.ChatInfo{Enabled: c.agent.Enabled(), Provider: st.Provider, Model: st.Model,
		Workspace: c.workspace, Messages: st.Messages}, nil
}

// ChatTurn implements control.ChatBackend. A turn that ran returns nil
// whatever became of it: its last event says.
func (c *Chat) ChatTurn(ctx context.Context, text string, emit func(control.ChatEvent) error) error {
	if !c.agent.Enabled() {
		return control.ErrNoModel
	}
	if !c.busy.CompareAndSwap(false, true) {
		return control.ErrChatBusy
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ev := &chatEvents{emit: emit, cancel: cancel, workspace: c.workspace}
	end := func() control.ChatEvent {
		defer c.busy.Store(false)
		if err := c.agent.Turn(ctx, localSession, text, ev); err != nil {
			return control.ChatEvent{Type: control.EventError, Text: chatTurnError(ctx, err)}
		}
		return control.ChatEvent{Type: control.EventFinal, Text: ev.final}
	}()
	// The end goes out once the session is saved and the turn is over,
	// so the terminal can send the next message or /new the moment it
	// sees it.
	ev.send(end)
	return nil
}

// chatTurnError says in one sentence why a turn ended early.
func chatTurnError(ctx context.Context, err error) string {
	switch {
	case errors.Is(context.Cause(ctx), errStopping):
		return "latch is stopping; the turn was cut short."
	case ctx.Err() != nil:
		return "Stopped."
	case errors.Is(err, agent.ErrMaxSteps):
		return "I stopped: the step limit was reached before a final answer. Say \"continue\" to go on."
	}
	return provider.Describe(err)
}

// ChatDecide implements control.ChatBackend. Only approvals of the local
// session can be answered: an id from a chat gateway's turn is unknown here.
func (c *Chat) ChatDecide(ctx context.Context, id, decision string) error {
	d, ok := map[string]agent.Decision{
		control.DecisionApprove: agent.Approve,
		control.DecisionDeny:    agent.DenyIt,
		control.DecisionAlways:  agent.Always,
	}[decision]
	if !ok {
		return fmt.Errorf("unknown decision %q", decision)
	}
	if err := c.agent.Decide(localSession, id, d); err != nil {
		if errors.Is(err, agent.ErrNoApproval) {
			return control.ErrNoApproval
		}
		return err
	}
	return nil
}

// ChatReset implements control.ChatBackend. It waits for no turn: a reset
// in the middle of one would be overwritten when the turn saves.
func (c *Chat) ChatReset(ctx context.Context) error {
	if !c.busy.CompareAndSwap(false, true) {
		return control.ErrChatBusy
	}
	defer c.busy.Store(false)
	return c.agent.Reset(localSession)
}

// chatEvents turns agent events into control.ChatEvents. When emit fails,
// the terminal is gone: nobody could answer an approval or read the
// answer, so the turn is stopped.
type chatEvents struct {
	emit      func(control.ChatEvent) error
	cancel    context.CancelCauseFunc
	workspace string

	mu     sync.Mutex
	failed bool
	// sending is the path of the send_file call running, for File.
	sending string
	// final is the answer, sent when the turn is over.
	final string
}

func (e *chatEvents) send(ev control.ChatEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed {
		return
	}
	if err := e.emit(ev); err != nil {
		e.failed = true
		e.cancel(fmt.Errorf("terminal gone: %w", err))
	}
}

func (e *chatEvents) Text(delta string) {
	if delta != "" {
		e.send(control.ChatEvent{Type: control.EventText, Text: delta})
	}
}

func (e *chatEvents) ToolStarted(call agent.ToolCall) {
	if call.Name == agent.ToolSendFile {
		e.mu.Lock()
		e.sending = call.Summary
		e.mu.Unlock()
	}
	e.send(control.ChatEvent{Type: control.EventToolStarted, Tool: call.Name, Summary: call.Summary})
}

func (e *chatEvents) ToolFinished(call agent.ToolCall, r agent.ToolResult) {
	ev := control.ChatEvent{Type: control.EventToolFinished, Tool: call.Name, Summary: call.Summary, Denied: r.Denied}
	if r.Err != nil {
		ev.Error = r.Err.Error()
	}
	e.send(ev)
}

func (e *chatEvents) Approval(a agent.Approval) {
	e.send(control.ChatEvent{Type: control.EventApproval, ID: a.ID, Tool: a.Tool, Summary: a.Summary, Detail: a.Detail})
}

// File reports the file rather than copying it: the terminal is on the
// same machine, and the file is already in the workspace.
func (e *chatEvents) File(f agent.File) error {
	e.mu.Lock()
	path := e.sending
	e.mu.Unlock()
	// The path is the call's summary, which is clipped when very long.
	switch {
	case path == "" || strings.HasSuffix(path, "…"):
		path = ""
	case !filepath.IsAbs(path):
		path = filepath.Join(e.workspace, path)
	}
	e.send(control.ChatEvent{Type: control.EventFile, Name: f.Name, Size: int64(len(f.Data)), Path: path})
	return nil
}

func (e *chatEvents) Final(text string) {
	e.mu.Lock()
	e.final = text
	e.mu.Unlock()
}

// errChatFromRun refuses terminal chat requests from inside a run.
var errChatFromRun = fmt.Errorf("%w: this request comes from a process latch started (a chat command or an agent tool); "+
	"the terminal chat answers only your own shell on this machine", control.ErrRefused)

// chatOperator refuses to run turns or answer approvals for a process the
// daemon started, as mint and unpair do (see operator): the uid check
// admits it, but a prompt-injected model's command must not approve its
// own tool calls, nor start turns whose calls it then approves.
func (d *Daemon) chatOperator(ctx context.Context) error {
	peer, ok := control.PeerFromContext(ctx)
	if !ok {
		return fmt.Errorf("%w: caller unknown", control.ErrRefused)
	}
	if tools.DescendsFrom(int(peer.PID), os.Getpid()) {
		d.Log.Warn("refused a terminal chat request from a process latch started", "peer_pid", peer.PID)
		return errChatFromRun
	}
	return nil
}

// ChatInfo implements control.ChatBackend.
func (d *Daemon) ChatInfo(ctx context.Context) (control.ChatInfo, error) {
	return d.chat.ChatInfo(ctx)
}

// ChatTurn implements control.ChatBackend: the turn ends when the caller
// hangs up or the daemon stops.
func (d *Daemon) ChatTurn(ctx context.Context, text string, emit func(control.ChatEvent) error) error {
	if err := d.chatOperator(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(d.bgCtx, func() { cancel(errStopping) })
	defer stop()
	return d.chat.ChatTurn(ctx, text, emit)
}

// ChatDecide implements control.ChatBackend.
func (d *Daemon) ChatDecide(ctx context.Context, id, decision string) error {
	if err := d.chatOperator(ctx); err != nil {
		return err
	}
	return d.chat.ChatDecide(ctx, id, decision)
}

// ChatReset implements control.ChatBackend.
func (d *Daemon) ChatReset(ctx context.Context) error {
	if err := d.chatOperator(ctx); err != nil {
		return err
	}
	return d.chat.ChatReset(ctx)
}

var (
	_ control.ChatBackend = (*Chat)(nil)
	_ control.ChatBackend = (*Daemon)(nil)
)
