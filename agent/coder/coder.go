// Package coder drives a coding agent the owner already has on the machine
// — Claude Code or OpenAI's Codex CLI — as the chat's agent, in place of
// the embedded one. Each turn runs the CLI headless in the workspace, as a
// process latch owns like a !command (its own process group and cgroup,
// killed whole by /stop, a timeout or shutdown), reads its JSON event
// stream and reports it through agent.Events, so the chat shows it the way
// it shows the embedded agent. The CLI's session id is kept per chat in
// the store, so the next message continues the same session; /new starts
// a fresh one. Where the CLI can ask before a tool runs (Claude Code),
// every such question reaches the owner as latch's approval buttons.
package coder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/store"
)

// MsgInterrupted is the answer of a turn a restart of latch cut: the CLI
// died with latch and the turn is not run again, since its tools may have
// done half of what they were asked.
const MsgInterrupted = "⚠ This request was interrupted by a restart of latch and was not run again " +
	"(what the coding agent had done until then stays done). Send a message to continue the session."

// ErrSessionGone is a CLI's refusal to continue a session it no longer
// has (its files were deleted, or it runs under another home).
var ErrSessionGone = errors.New("the coding agent's session is gone")

// MsgSessionGone prefixes the answer of a turn that had to start a new
// session.
const MsgSessionGone = "(The coding agent no longer has this chat's session; this starts a new one.)\n\n"

// DefaultTimeout bounds a turn when Config.Timeout is zero.
const DefaultTimeout = time.Hour

// CLI is one coding agent's command line and event stream.
type CLI interface {
	// Name is the provider's name in config.toml ("claude-code", "codex").
	Name() string
	// Model is the model asked for, or "" for the CLI's own default.
	Model() string
	// Command returns the program and its arguments for a turn that sends
	// prompt, continuing session ("" starts a new one).
	Command(session, prompt string) (path string, args []string)
	// Stream returns the decoder of one turn's output.
	Stream(t *Turn) Stream
}

// Stream reads one turn of a CLI.
type Stream interface {
	// Begin runs once the process has started: it writes what the CLI
	// reads on its standard input (it may close it).
	Begin() error
	// Line handles one line of the CLI's standard output. An error ends
	// the turn.
	Line(line []byte) error
}

// Config wires a Backend.
type Config struct {
	CLI       CLI
	Workspace string   // the directory the CLI runs in
	Env       []string // the CLI's whole environment (see tools.MinimalEnv)
	// Policy is [agent.permissions]; each CLI maps its tools onto it.
	Policy          agent.Policy
	ApprovalTimeout time.Duration // 0: 10 minutes
	Timeout         time.Duration // a whole turn; 0: DefaultTimeout
	Store           *store.DB
	Reaper          *tools.Reaper
	Cgroups         *tools.Cgroups
	Log             *slog.Logger
}

// Backend runs the turns of every chat through one CLI. It is what the
// gateways need of an agent (gateways.Agent).
type Backend struct {
	cfg Config

	mu      sync.Mutex
	waiting map[string]pending                   // approval id → the turn that waits
	always  map[agent.SessionKey]map[string]bool // tools approved for the session
}

type pending struct {
	key agent.SessionKey
	ch  chan<- decision
}

type decision struct {
	id string
	d  agent.Decision
}

// New returns a Backend for cfg.
func New(cfg Config) *Backend {
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 10 * time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Backend{cfg: cfg, waiting: make(map[string]pending), always: make(map[agent.SessionKey]map[string]bool)}
}

// Enabled reports that plain text has somewhere to go.
func (b *Backend) Enabled() bool { return true }

// meta is what the store keeps of a chat's session with the CLI.
type meta struct {
	CLI     string `json:"cli"`
	Session string `json:"session,omitempty"`
	// Running is set while a turn runs: a start that finds it set knows
	// the turn was cut and reports it instead of running it again.
	Running bool           `json:"running,omitempty"`
	CostUSD float64        `json:"cost_usd,omitempty"`
	Turns   int            `json:"turns,omitempty"` // the CLI's model turns, summed
	Tokens  map[string]int `json:"tokens,omitempty"`
}

// storeKey keeps the CLI's sessions apart from the embedded agent's.
func storeKey(key agent.SessionKey) string { return "coder/" + key.String() }

func (b *Backend) load(tx *store.Tx, key agent.SessionKey) (meta, error) {
	m := meta{CLI: b.cfg.CLI.Name()}
	info, found, err := tx.Session(storeKey(key))
	if err != nil || !found {
		return m, err
	}
	if err := json.Unmarshal(info.Meta, &m); err != nil {
		return meta{CLI: b.cfg.CLI.Name()}, fmt.Errorf("session %s: %w", key, err)
	}
	if m.CLI != b.cfg.CLI.Name() {
		// Another CLI's session: its id means nothing to this one.
		return meta{CLI: b.cfg.CLI.Name()}, nil
	}
	return m, nil
}

func (b *Backend) put(tx *store.Tx, key agent.SessionKey, m meta) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = tx.AppendSession(storeKey(key), raw)
	return err
}

// update changes key's stored session and runs also in the same
// transaction.
func (b *Backend) update(key agent.SessionKey, change func(*meta), also func(*store.Tx) error) error {
	return b.cfg.Store.Update(func(tx *store.Tx) error {
		m, err := b.load(tx, key)
		if err != nil {
			return err
		}
		change(&m)
		if err := b.put(tx, key, m); err != nil {
			return err
		}
		if also != nil {
			return also(tx)
		}
		return nil
	})
}

// TurnWith runs one message through the CLI: the turn is recorded as
// running (with h.Started) before the CLI starts, and as ended, with the
// CLI's session, cost and h.Done, once it has answered.
func (b *Backend) TurnWith(ctx context.Context, key agent.SessionKey, text string, ev agent.Events, h agent.Hooks) error {
	var session string
	err := b.update(key, func(m *meta) { m.Running, session = true, m.Session }, h.Started)
	if err != nil {
		if h.Started != nil {
			return fmt.Errorf("%w: %w", agent.ErrNotStarted, err)
		}
		return err
	}
	out, err := b.run(ctx, key, session, text, ev)
	if errors.Is(err, ErrSessionGone) && session != "" {
		// The CLI refused before doing anything: the message runs once,
		// in a new session.
		b.cfg.Log.Warn("the coding agent's session is gone; starting a new one", "chat", key.String(), "err", err)
		ev.Text(MsgSessionGone)
		out, err = b.run(ctx, key, "", text, ev)
		out.Text = MsgSessionGone + out.Text
	}
	if agent.ShuttingDown(ctx) {
		// Left running: the next start reports the turn as cut.
		return context.Cause(ctx)
	}
	done := h.Done
	if err != nil {
		done = nil
	}
	serr := b.update(key, func(m *meta) {
		m.Running = false
		if out.Session != "" {
			m.Session = out.Session
		}
		m.CostUSD += out.CostUSD
		m.Turns += out.Turns
		if m.Tokens == nil {
			m.Tokens = make(map[string]int)
		}
		m.Tokens[time.Now().UTC().Format(time.DateOnly)] += out.Tokens
		for day := range m.Tokens {
			if day < time.Now().UTC().AddDate(0, 0, -7).Format(time.DateOnly) {
				delete(m.Tokens, day)
			}
		}
	}, done)
	if err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	ev.Final(out.Text)
	return nil
}

// ResumeWith ends a turn a restart cut: the CLI died with the old daemon,
// and running the message again could repeat what its tools did, so the
// chat is told instead (MsgInterrupted).
func (b *Backend) ResumeWith(ctx context.Context, key agent.SessionKey, ev agent.Events, h agent.Hooks) error {
	var cut bool
	err := b.update(key, func(m *meta) { cut, m.Running = m.Running, false }, func(tx *store.Tx) error {
		if h.Done != nil && cut {
			return h.Done(tx)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !cut {
		return agent.ErrNothingToResume
	}
	ev.Text(MsgInterrupted)
	ev.Final(MsgInterrupted)
	return nil
}

// Reset forgets key's session: the next message starts a new one.
func (b *Backend) Reset(key agent.SessionKey) error {
	b.mu.Lock()
	delete(b.always, key)
	b.mu.Unlock()
	return b.cfg.Store.Update(func(tx *store.Tx) error { return tx.DeleteSession(storeKey(key)) })
}

// Status reports on key's session for /status.
func (b *Backend) Status(key agent.SessionKey) (agent.Status, error) {
	st := agent.Status{Provider: b.cfg.CLI.Name(), Model: b.cfg.CLI.Model()}
	err := b.cfg.Store.View(func(tx *store.Tx) error {
		m, err := b.load(tx, key)
		st.Session, st.CostUSD, st.Messages = m.Session, m.CostUSD, m.Turns
		st.TokensToday = m.Tokens[time.Now().UTC().Format(time.DateOnly)]
		return err
	})
	return st, err
}

// Decide answers an approval request of key's chat.
func (b *Backend) Decide(key agent.SessionKey, id string, d agent.Decision) error {
	id = strings.ToLower(strings.TrimSpace(id))
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.waiting[id]
	if !ok || p.key != key {
		return errors.New("no such approval request")
	}
	delete(b.waiting, id)
	select {
	case p.ch <- decision{id: id, d: d}:
		return nil
	default:
		return errors.New("the turn is not waiting")
	}
}

// register makes a new approval id answerable for key on ch.
func (b *Backend) register(key agent.SessionKey, ch chan<- decision) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := agent.NewApprovalID()
	for b.waiting[id].ch != nil {
		id = agent.NewApprovalID()
	}
	b.waiting[id] = pending{key: key, ch: ch}
	return id
}

func (b *Backend) unregister(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiting, id)
}

func (b *Backend) allowAlways(key agent.SessionKey, tool string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.always[key] == nil {
		b.always[key] = make(map[string]bool)
	}
	b.always[key][tool] = true
}

func (b *Backend) alwaysAllowed(key agent.SessionKey, tool string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.always[key][tool]
}
