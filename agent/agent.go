// Package agent is latch's embedded agent core: the loop that sends a chat
// message to a language model, runs the tools it calls (asking the owner
// first where the policy says so), and keeps each chat's conversation in the
// store so it survives restarts. It knows nothing of any chat platform: it
// reports what happens through Events, which the gateways render.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/store"
	"github.com/latchd/latch/turn"
)

// maxAgentsMD bounds the AGENTS.md added to the system prompt.
const maxAgentsMD = 32 << 10

// ErrShutdown is the cancellation cause the daemon gives a turn when it
// stops: the turn is left exactly as far as it got (waiting approvals and
// running calls recorded) so the next start resumes it, unlike /stop, which
// ends the turn.
var ErrShutdown = errors.New("latch is shutting down")

func shuttingDown(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrShutdown) }

// ShuttingDown reports whether ctx ended because the daemon stops
// (ErrShutdown) rather than by /stop.
func ShuttingDown(ctx context.Context) bool { return shuttingDown(ctx) }

// ErrMaxSteps ends a turn that used all its steps without a final answer.
var ErrMaxSteps = errors.New("the agent reached its step limit")

// Events receives what a turn does, in order, from the turn's goroutine
// (see [turn.Events]: the chats render it).
type Events = turn.Events

// ToolCall is one call the model made.
type ToolCall = turn.ToolCall

// ToolResult is how a call ended.
type ToolResult = turn.ToolResult

// Config wires an Agent.
type Config struct {
	Provider        provider.Provider // nil: no model configured
	Model           string
	MaxTokens       int
	MaxSteps        int
	ContextBudget   int
	ApprovalTimeout time.Duration
	Policy          Policy
	Tools           *Toolbox
	Store           *store.DB
	Log             *slog.Logger
	// StartDelay is how long a turn's first model call runs before the
	// turn's start is stored on its own (see callStarting); 0 means
	// DefaultStartDelay.
	StartDelay time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Agent runs turns for every chat.
type Agent struct {
	cfg       Config
	approvals approvals

	mu     sync.Mutex
	always map[SessionKey]map[string]bool // tools approved for the session
	tails  map[SessionKey]cachedTail      // as last saved, see load
}

// New returns an Agent for cfg, filling in defaults.
func New(cfg Config) *Agent {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 25
	}
	if cfg.ContextBudget <= 0 {
		cfg.ContextBudget = 100_000
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 10 * time.Minute
	}
	if cfg.Policy == nil {
		cfg.Policy = DefaultPolicy()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.StartDelay <= 0 {
		cfg.StartDelay = DefaultStartDelay
	}
	return &Agent{cfg: cfg, always: make(map[SessionKey]map[string]bool)}
}

// Enabled reports whether a model is configured.
func (a *Agent) Enabled() bool { return a.cfg.Provider != nil }

func (a *Agent) now() time.Time {
	if a.cfg.Now != nil {
		return a.cfg.Now()
	}
	return time.Now()
}

// Decide answers a pending approval of key's chat. A request that no turn
// waits for at the moment — latch restarted and the resumed turn has not
// got back to it yet — is answered all the same if the session still
// records it as waiting: the decision is stored with it, and the resumed
// turn applies it.
func (a *Agent) Decide(key SessionKey, id string, d Decision) error {
	return a.approvals.decide(key, id, d, func(id string) error { return a.decideStored(key, id, d) })
}

// Reset starts a fresh conversation for key.
func (a *Agent) Reset(key SessionKey) error {
	a.mu.Lock()
	delete(a.always, key)
	delete(a.tails, key)
	a.mu.Unlock()
	if a.cfg.Tools != nil && a.cfg.Tools.MCP != nil {
		a.cfg.Tools.MCP.Reset()
	}
	return a.cfg.Store.Update(func(tx *store.Tx) error { return tx.DeleteSession(key.String()) })
}

// Turn runs one user message to the end: model, tools, model … until the
// model answers without calling a tool, the step limit, an error, or ctx
// ends (/stop). Every completed step is saved before the next begins.
func (a *Agent) Turn(ctx context.Context, key SessionKey, text string, ev Events) error {
	return a.TurnWith(ctx, key, text, ev, Hooks{})
}

// Hooks put a caller's own bookkeeping into transactions a turn writes
// anyway, so that it costs no commit of its own and can never disagree
// with the session.
type Hooks struct {
	// Started, when set, makes the turn store the user's message as it
	// begins, and runs in that same transaction. The transaction commits
	// while the model is first called, or, when that call is over within
	// Config.StartDelay, with the step's own save (the answer and Done, or the
	// tool calls before they run): a quick answer costs one commit, not
	// two. Nothing reaches Events and no tool runs before Started has run
	// in a transaction that commits; when Done shares it, Final is given
	// in it, between the two. If it fails, nothing is stored and TurnWith
	// returns an error that wraps ErrNotStarted: the caller shows nothing.
	Started func(*store.Tx) error
	// Done runs in the transaction that saves a turn which ended with the
	// model's answer; TurnWith returns nil only if it committed. After an
	// error, /stop or shutdown it does not run.
	Done func(*store.Tx) error
}

// ErrNotStarted wraps the error of a turn that could not record its start
// (Hooks.Started): nothing was stored or shown and no tool ran, though the
// model may have been asked.
var ErrNotStarted = errors.New("the turn could not be recorded as started")

// TurnWith is Turn with the caller's hooks.
func (a *Agent) TurnWith(ctx context.Context, key SessionKey, text string, ev Events, h Hooks) error {
	if a.cfg.Provider == nil {
		return errors.New("no model is configured")
	}
	s, err := a.load(key)
	if err != nil {
		return err
	}
	// An earlier turn that was cut and not resumed ends here, and so does
	// what its last step recorded: a call of the new turn may reuse an id
	// (call_0 … for servers that send none) and must not pass for the old
	// step's, nor an old decision apply to it.
	s.repair()
	s.closeTurn(noteRestart)
	s.endStep()
	s.Messages = append(s.Messages, provider.Message{Role: provider.RoleUser,
		Content: []provider.Block{{Type: provider.BlockText, Text: text}}})
	if h.Started != nil {
		// Once the start is stored, a restart resumes the turn (the message
		// is in the history) instead of running the message again. It is
		// stored while the model is called, or with the first step's save
		// (see callStarting): nothing of the answer is shown, and no tool
		// runs, before it is.
		return a.run(ctx, key, s, ev, h.Done, &firstCall{req: a.request(s), started: h.Started})
	}
	return a.run(ctx, key, s, ev, h.Done, nil)
}

// ErrNothingToResume is returned by Resume when the session's last turn
// had already ended.
var ErrNothingToResume = errors.New("nothing to resume")

// Resume continues a turn a restart cut, from its last completed step: a
// tool call that was running gets "interrupted by a restart" as its result
// and the model decides what to do next.
func (a *Agent) Resume(ctx context.Context, key SessionKey, ev Events) error {
	return a.ResumeWith(ctx, key, ev, Hooks{})
}

// ResumeWith is Resume with the caller's hooks. Only Done applies (the
// turn started long ago): it runs in the transaction that saves the
// resumed turn's answer, so the caller's record of the resumption ends
// with it — a crash cannot leave an answered turn looking cut.
func (a *Agent) ResumeWith(ctx context.Context, key SessionKey, ev Events, h Hooks) error {
	if a.cfg.Provider == nil {
		return errors.New("no model is configured")
	}
	s, err := a.load(key)
	if err != nil {
		return err
	}
	if uses := s.danglingToolUses(); len(uses) > 0 {
		// The step was cut while its tool calls ran or waited for the
		// owner: finish it (finished calls keep their results, started
		// ones are reported, none is run again).
		if err := a.runTools(ctx, key, s, uses, ev, true); err != nil {
			if !shuttingDown(ctx) {
				s.closeTurn("(the owner stopped this turn)")
				a.save(key, s)
			}
			return err
		}
	}
	if !s.unfinished() {
		return ErrNothingToResume
	}
	return a.run(ctx, key, s, ev, h.Done, nil)
}

// run runs steps and saves the session, closing the turn on an error —
// except at shutdown, when it stays open for the next start to resume.
// done runs in the last save if the turn ended with an answer.
func (a *Agent) run(ctx context.Context, key SessionKey, s *session, ev Events, done func(*store.Tx) error, first *firstCall) error {
	err := a.steps(ctx, key, s, ev, first)
	if errors.Is(err, ErrNotStarted) {
		return err // nothing of the turn may be stored
	}
	if err != nil {
		done = nil
	}
	if err != nil && !shuttingDown(ctx) {
		note := "(turn ended: " + provider.Describe(err) + ")"
		if errors.Is(err, ErrMaxSteps) {
			note = "(turn ended: the step limit was reached)"
		} else if ctx.Err() != nil {
			note = "(the owner stopped this turn)"
		}
		s.closeTurn(note)
	}
	if serr := a.saveStarting(key, s, ev, first, done); errors.Is(serr, ErrNotStarted) {
		return serr // nothing of the turn is stored
	} else if serr != nil && err == nil {
		err = serr
	}
	return err
}

func (a *Agent) steps(ctx context.Context, key SessionKey, s *session, ev Events, first *firstCall) error {
	for step := 0; step < a.cfg.MaxSteps; step++ {
		var resp provider.Response
		var err error
		if step == 0 && first != nil {
			resp, err = a.callStarting(ctx, key, s, first, ev)
			if errors.Is(err, ErrNotStarted) {
				return err
			}
		} else {
			resp, err = a.cfg.Provider.Stream(ctx, a.request(s), ev.Text)
		}
		a.count(s, resp.Usage)
		if err != nil {
			if t := resp.Text(); t != "" {
				s.Messages = append(s.Messages, provider.Message{Role: provider.RoleAssistant,
					Content: []provider.Block{{Type: provider.BlockText, Text: t}}})
			}
			return err
		}
		if len(resp.Content) == 0 {
			resp.Content = []provider.Block{{Type: provider.BlockText, Text: "(no answer)"}}
		}
		s.Messages = append(s.Messages, provider.Message{Role: provider.RoleAssistant, Content: resp.Content})
		uses := resp.ToolUses()
		if len(uses) == 0 {
			if first != nil && first.started != nil {
				// Given in the save that stores the start too (saveStarting).
				first.final, first.answered = resp.Text(), true
				return nil
			}
			ev.Final(resp.Text())
			return nil
		}
		if outputCut(resp.StopReason) {
			// Saved with the step, so a resumed step does not run them
			// either.
			s.Results = append(s.Results, cutCalls(uses)...)
		}
		if err := a.saveStarting(key, s, ev, first, nil); err != nil {
			return err
		}
		if err := a.runTools(ctx, key, s, uses, ev, false); err != nil {
			return err
		}
	}
	return ErrMaxSteps
}

func (a *Agent) request(s *session) provider.Request {
	return provider.Request{
		Model: a.cfg.Model, System: a.systemPrompt(), MaxTokens: a.cfg.MaxTokens,
		Messages: trimmed(s.Messages, a.cfg.ContextBudget), Tools: a.defs(),
	}
}

// runTools runs the tool calls of the last assistant message and appends
// their results. Each call is recorded as started (and each approval as
// waiting) in the saved session before anything happens, and its result
// is saved before the next call begins, so after a crash a finished call
// keeps its result, a started one is reported, never re-run, and a waiting
// approval is asked again with the same id — its buttons keep working.
// resumed says the step was begun by an earlier process, which showed the
// results it saved.
func (a *Agent) runTools(ctx context.Context, key SessionKey, s *session, uses []provider.Block, ev Events, resumed bool) error {
	results := make([]provider.Block, 0, len(uses))
	for _, u := range uses {
		r, ok := s.result(u.ID)
		if ok && !resumed {
			// Before a step runs, only a call the output limit cut has a
			// result.
			ev.ToolFinished(toolCall(u), ToolResult{Err: errCutOff})
		}
		if !ok {
			r = a.callTool(ctx, key, s, u, ev)
			if shuttingDown(ctx) {
				// The shutdown may have cut this call: it stays running
				// or waiting, for the next start.
				return ErrShutdown
			}
			s.Results = append(s.Results, r)
			if err := a.save(key, s); err != nil {
				return err
			}
		}
		results = append(results, r)
	}
	s.Messages = append(s.Messages, provider.Message{Role: provider.RoleUser, Content: results})
	s.endStep()
	if err := a.save(key, s); err != nil {
		return err
	}
	return ctx.Err()
}

// count adds a call's tokens to today's; days older than tokensDays are
// forgotten, so the meta record every save rewrites stays small.
func (a *Agent) count(s *session, u provider.Usage) {
	if s.Tokens == nil {
		s.Tokens = make(map[string]int)
	}
	now := a.now().UTC()
	s.Tokens[now.Format(time.DateOnly)] += u.InputTokens + u.OutputTokens
	oldest := now.AddDate(0, 0, -tokensDays).Format(time.DateOnly)
	for day := range s.Tokens {
		if day < oldest {
			delete(s.Tokens, day)
		}
	}
}

// callTool applies the policy, asks when it must, runs the tool and turns
// the outcome into a tool_result block.
func (a *Agent) callTool(ctx context.Context, key SessionKey, s *session, u provider.Block, ev Events) provider.Block {
	call := toolCall(u)
	result := func(text string, isErr bool) provider.Block {
		return provider.Block{Type: provider.BlockToolResult, ID: u.ID, Text: text, IsError: isErr}
	}
	if ctx.Err() != nil {
		return result("not run: the owner stopped the turn", true)
	}
	if slices.Contains(s.Running, u.ID) {
		return result(noteInterrupted, true)
	}
	if reason, ok := a.permit(ctx, key, s, u.ID, call, ApprovalDetail(u.Name, u.Input), ev); !ok {
		if !shuttingDown(ctx) {
			// At shutdown the request stays pending, to be answered
			// after the restart: nothing was denied.
			ev.ToolFinished(call, ToolResult{Denied: true, Err: errors.New(reason)})
		}
		return result(reason, true)
	}
	s.Running = append(s.Running, u.ID)
	if err := a.save(key, s); err != nil {
		return result("not run: "+err.Error(), true)
	}
	ev.ToolStarted(call)
	start := a.now()
	out, file, err := a.cfg.Tools.run(withToolCtx(ctx, key, a.cfg.Policy), u.Name, u.Input)
	if err == nil && file != nil {
		err = ev.File(*file)
	}
	ev.ToolFinished(call, ToolResult{Err: err, Duration: a.now().Sub(start)})
	if err != nil {
		return result(err.Error(), true)
	}
	if out == "" {
		out = "(no output)"
	}
	return result(out, false)
}

func toolCall(u provider.Block) ToolCall {
	return ToolCall{ID: u.ID, Name: u.Name, Summary: Summary(u.Name, u.Input)}
}

// permit says whether the call may run; when it may not, reason is what the
// model is told.
func (a *Agent) permit(ctx context.Context, key SessionKey, s *session, useID string, call ToolCall, detail string, ev Events) (reason string, ok bool) {
	switch a.permission(call.Name) {
	case Allow:
		return "", true
	case Deny:
		return "denied: the owner's policy does not allow " + call.Name, false
	}
	a.mu.Lock()
	always := a.always[key][call.Name]
	a.mu.Unlock()
	if always {
		return "", true
	}
	w, again := s.Waiting[useID]
	if !again {
		w = waitingApproval{ID: a.approvals.newFreeID(), Expires: a.now().Add(a.cfg.ApprovalTimeout)}
	}
	ch := a.approvals.register(key, w.ID)
	defer a.approvals.remove(w.ID)
	if s.Waiting == nil {
		s.Waiting = make(map[string]waitingApproval)
	}
	s.Waiting[useID] = w
	// The save also brings in a decision Decide stored for w while no turn
	// waited for it (the owner pressed while latch was down): registered
	// first, w is now answered either there or through ch.
	if err := a.save(key, s); err != nil {
		return "not run: " + err.Error(), false
	}
	// Once decided (or expired) the request is gone from the saved
	// session too, so a restart never applies a decision twice. At
	// shutdown it stays, to be asked again with the same id.
	defer func() {
		if !shuttingDown(ctx) {
			delete(s.Waiting, useID)
			a.save(key, s)
		}
	}()
	if d := s.Waiting[useID].Decision; d != "" {
		return a.decided(key, call.Name, d)
	}
	// Asked again after a restart, the request is not shown a second time:
	// the one already in the chat keeps its buttons until pressed, and
	// they answer it by id.
	if !again {
		ev.Approval(Approval{ID: w.ID, Tool: call.Name, Summary: call.Summary, Detail: detail})
	}
	timer := time.NewTimer(max(w.Expires.Sub(a.now()), 0))
	defer timer.Stop()
	select {
	case d := <-ch:
		return a.decided(key, call.Name, d)
	case <-timer.C:
		return fmt.Sprintf("denied: the owner did not answer within %v", a.cfg.ApprovalTimeout), false
	case <-ctx.Done():
		return "not run: the owner stopped the turn", false
	}
}

func (a *Agent) systemPrompt() string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are latch, an assistant running on the owner's %s machine. "+
		"The owner talks to you from a chat app on their phone, so keep answers short and use plain Markdown. "+
		"Your tools act on the workspace %s as the owner's user account; paths are relative to it. "+
		"Some tool calls need the owner's approval; if one is denied, do not retry it blindly. Today is %s.",
		runtime.GOOS, a.cfg.Tools.Workspace.Dir(), a.now().Format("Monday, 2 January 2006"))
	if _, text, err := a.cfg.Tools.Workspace.ReadAll("AGENTS.md", maxAgentsMD); err == nil {
		b.WriteString("\n\nThe workspace's AGENTS.md (instructions from the owner):\n")
		b.Write(text)
	}
	return b.String()
}

// Status describes a chat's session for /status.
type Status struct {
	Provider, Model string
	Messages        int
	TokensToday     int
	MCP             []string // each MCP server's state, one line each
	// Session and CostUSD describe a coding agent CLI's session (see
	// agent/coder): its id and what it has cost so far; "" and 0 for the
	// embedded agent.
	Session string
	CostUSD float64
}

// Status reports on key's session.
func (a *Agent) Status(key SessionKey) (Status, error) {
	st := Status{Model: a.cfg.Model, Provider: "none"}
	if a.cfg.Tools != nil && a.cfg.Tools.MCP != nil {
		st.MCP = a.cfg.Tools.MCP.StatusLines()
	}
	if a.cfg.Provider != nil {
		st.Provider = a.cfg.Provider.Name()
	}
	err := a.cfg.Store.View(func(tx *store.Tx) error {
		var s session
		if raw, err := tx.LegacySession(key.String()); err != nil || raw != nil {
			if err == nil {
				err = s.loadLegacy(raw)
			}
			st.Messages, st.TokensToday = len(s.Messages), s.Tokens[a.now().UTC().Format(time.DateOnly)]
			return err
		}
		info, found, err := tx.Session(key.String())
		if err != nil || !found {
			return err
		}
		var m sessionMeta
		if err := json.Unmarshal(info.Meta, &m); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
		st.Messages, st.TokensToday = int(info.Next-1), m.Tokens[a.now().UTC().Format(time.DateOnly)]
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("session %s: %w", key, err)
	}
	return st, nil
}
