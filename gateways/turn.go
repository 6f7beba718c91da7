package gateways

import (
	"context"
	"errors"
	"fmt"
	"github.com/latchd/latch/turn"
	"strings"
	"sync"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// Agent is what the Hub needs of the agent core.
type Agent interface {
	Enabled() bool
	// TurnWith runs a turn; the Hub's hooks mark the inbox entry running
	// in the transaction that stores the user's message and delete it in
	// the one that stores the answer.
	TurnWith(ctx context.Context, key agent.SessionKey, text string, ev agent.Events, h agent.Hooks) error
	// ResumeWith continues a turn a restart cut; the Hub's Done hook
	// deletes the inbox entry in the transaction that stores the answer.
	ResumeWith(ctx context.Context, key agent.SessionKey, ev agent.Events, h agent.Hooks) error
	Decide(key agent.SessionKey, id string, d agent.Decision) error
	Reset(key agent.SessionKey) error
	Status(key agent.SessionKey) (agent.Status, error)
}

// MsgNoModel explains how to give plain text somewhere to go.
const MsgNoModel = "No model is configured, so plain text has nowhere to go. " +
	"Add one in config.toml, e.g.\n[agent]\nprovider = \"anthropic\"  # or \"openai\" for any OpenAI-compatible server\n" +
	"api_key_file = \"~/.anthropic-key\"\nthen restart latch. Meanwhile !<command> runs a shell command."

// runTurn hands plain text to the agent. The agent marks the entry running
// in the same transaction that stores the user's message, while the model
// is first called or, when it answers at once, with the answer (see
// agent.Hooks): a crash from then on resumes the turn after the restart
// (KindResume), a crash before it runs the message once. The answer is
// stored with the entry (Answered) in the transaction that saves it, and
// shown once that has committed (heldTurn). With no model there is
// no job (see jobFor): the chat gets a hint.
func (h *Hub) runTurn(ctx context.Context, j *job, e store.Entry) {
	if j == nil {
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: MsgNoModel, ReplyTo: e.MessageID})
		h.finish(e, true)
		return
	}
	_, rendered := h.gateways[e.Gateway].(TurnRenderer)
	started := func(tx *store.Tx) error { return tx.SetInboxState(e.Seq, store.Running) }
	h.runJob(ctx, j, e, jobSteps{marksItself: true, typesItself: rendered}, func(jobCtx context.Context) bool {
		// A renderer shows "typing…" from here on, while the session
		// loads and the start commits: runJob waits for nothing first.
		// It is made here rather than before runJob so that a turn
		// stopped before it starts leaves no renderer to end.
		key := agent.SessionKey{Gateway: e.Gateway, Chat: e.ChatID}
		err := h.heldTurn(j, e, started, func(ev agent.Events, hooks agent.Hooks) error {
			return h.cfg.Agent.TurnWith(jobCtx, key, e.Text, ev, hooks)
		})
		switch {
		case err == nil:
			return true // the answer is stored with the entry, and delivered
		case errors.Is(err, agent.ErrNotStarted):
			// Nothing happened: the entry stays "received" and runs
			// after the next start.
			h.log.Error("recording the turn's start failed; not run", "seq", e.Seq, logkey.Err, err)
			return true
		case ctx.Err() != nil || h.dropped(j):
			return false
		}
		h.log.Warn("agent turn ended with an error", logkey.Gateway, e.Gateway, logkey.Err, err)
		h.send(j.out, e.Gateway, e.ChatID, Reply{Text: turnError(err, jobCtx), ReplyTo: e.MessageID})
		return false
	})
}

// endEvents ends a renderer's turn, above all one that ended in an error
// (its Final never came).
func endEvents(ev agent.Events) {
	if end, ok := ev.(interface{ End() }); ok {
		end.End()
	}
}

// MsgResuming tells the chat a cut turn goes on.
const MsgResuming = "⚠ latch restarted during this request; continuing from the last completed step " +
	"(a command that was running then was not run again)."

// resumeTurn continues a turn a restart cut, unless /stop came first.
func (h *Hub) resumeTurn(ctx context.Context, j *job, e store.Entry) {
	if h.stoppedEarly(ctx, j, e) {
		return
	}
	h.send(j.out, e.Gateway, e.ChatID, Reply{Text: MsgResuming, ReplyTo: e.MessageID})
	// The answer and the entry's end are stored together, as a turn's
	// are: a crash between the two would report the answered turn as cut
	// after the next start.
	h.runJob(ctx, j, e, jobSteps{}, func(jobCtx context.Context) bool {
		key := agent.SessionKey{Gateway: e.Gateway, Chat: e.ChatID}
		err := h.heldTurn(j, e, nil, func(ev agent.Events, hooks agent.Hooks) error {
			return h.cfg.Agent.ResumeWith(jobCtx, key, ev, hooks)
		})
		switch {
		case err == nil:
			return true // the answer is stored with the entry, and delivered
		case errors.Is(err, agent.ErrNothingToResume) || ctx.Err() != nil || h.dropped(j):
			return false
		}
		h.log.Warn("resumed turn ended with an error", logkey.Gateway, e.Gateway, logkey.Err, err)
		h.send(j.out, e.Gateway, e.ChatID, Reply{Text: turnError(err, jobCtx), ReplyTo: e.MessageID})
		return false
	})
}

func turnError(err error, jobCtx context.Context) string {
	switch {
	case jobCtx.Err() != nil:
		return "Stopped."
	case errors.Is(err, agent.ErrMaxSteps):
		return "I stopped: the step limit was reached before a final answer. Say \"continue\" to go on."
	}
	return provider.Describe(err)
}

// events renders j's turn, under j.out; rendered is true when the gateway
// does it (and shows "typing…" itself).
func (h *Hub) events(j *job, e store.Entry) (ev agent.Events, rendered bool) {
	if r, ok := h.gateways[e.Gateway].(TurnRenderer); ok {
		return r.RenderTurn(j.out, e.ChatID, e.MessageID), true
	}
	return &plainEvents{h: h, ctx: j.out, j: j, gateway: e.Gateway, chatID: e.ChatID, replyTo: e.MessageID}, false
}

// plainEvents renders a turn as ordinary messages: one line per tool call,
// approval requests with their text commands, and the final answer.
type plainEvents struct {
	h   *Hub
	ctx context.Context
	// j is the turn's job: once an unpair drops it, the chat is told
	// nothing more (nil: no job to ask).
	j                        *job
	gateway, chatID, replyTo string
	mu                       sync.Mutex
}

func (p *plainEvents) say(text string) {
	if p.quiet() {
		return
	}
	p.h.send(p.ctx, p.gateway, p.chatID, Reply{Text: text})
}

func (p *plainEvents) quiet() bool { return p.j != nil && p.h.dropped(p.j) }

func (p *plainEvents) Text(string) {}

func (p *plainEvents) ToolStarted(c turn.ToolCall) {
	p.say(turn.ToolLine(c, nil, turn.VerbosityNormal, turn.LineStyle{}))
}

// ToolFinished shows only a failure: the line of the start stays as it was.
func (p *plainEvents) ToolFinished(c turn.ToolCall, r turn.ToolResult) {
	if r.Err != nil {
		p.say(turn.ToolLine(c, &r, turn.VerbosityNormal, turn.LineStyle{}))
	}
}

// Approval shows the call's detail, every line of it: the adapter splits a
// long text into messages, so nothing of what would run is left out.
func (p *plainEvents) Approval(a turn.Approval) {
	detail := a.Detail
	if detail == "" {
		detail = a.Summary
	}
	p.say(fmt.Sprintf("🔐 Allow %s?\n%s\n\n%s", a.Tool, detail, turn.ApprovalCommands(a.ID)))
}

func (p *plainEvents) File(f turn.File) error {
	if p.quiet() {
		return errors.New("the chat was unpaired")
	}
	fs, ok := p.h.gateways[p.gateway].(FileSender)
	if !ok {
		return errors.New("this chat gateway cannot send files yet")
	}
	return fs.SendFile(p.ctx, p.chatID, f, p.replyTo)
}

func (p *plainEvents) Final(text string) {
	if strings.TrimSpace(text) == "" || p.quiet() {
		return
	}
	p.h.send(p.ctx, p.gateway, p.chatID, Reply{Text: text, ReplyTo: p.replyTo})
}

// decide answers "/approve ID", "/deny ID" and "/always ID".
func (h *Hub) decide(e store.Entry, name, id string) string {
	if h.cfg.Agent == nil {
		return "Nothing is waiting for approval."
	}
	d := map[string]agent.Decision{"approve": agent.Approve, "deny": agent.DenyIt, "always": agent.Always}[name]
	if id == "" {
		return "Usage: /" + name + " <id> (the id is in the approval request)"
	}
	key := agent.SessionKey{Gateway: e.Gateway, Chat: e.ChatID}
	if err := h.cfg.Agent.Decide(key, id, d); err != nil {
		return "That approval has expired or was already answered."
	}
	switch d {
	case agent.Approve:
		return "Approved."
	case agent.Always:
		return "Approved, and allowed for the rest of this session."
	}
	return "Denied."
}
