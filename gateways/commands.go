package gateways

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/store"
)

// HelpText lists what the latched chat can do.
const HelpText = "latch — commands\n" +
	"  <text>      talk to the agent (when a model is configured)\n" +
	"  !<command>  run a shell command in the workspace (e.g. !uptime)\n" +
	"  /new        start a fresh conversation\n" +
	"  /approve <id> · /always <id> · /deny <id>  answer an approval request\n" +
	"  /stop       stop what is running\n" +
	"  /status     what is running and how latch is doing\n" +
	"  /help       this list"

// immediate answers the commands that must not queue behind a running job.
// ok is false for anything that should queue.
func (h *Hub) immediate(e store.Entry) (reply string, ok bool) {
	name, arg := splitCommand(e.Text)
	switch name {
	case "", "new":
		return "", false
	case "approve", "deny", "always":
		return h.decide(e, name, arg), true
	case "stop":
		return h.stop(chatKey{e.Gateway, e.ChatID}), true
	case "status":
		return h.statusText(e.Gateway, chatKey{e.Gateway, e.ChatID}), true
	case "help", "start":
		return HelpText, true
	case "pair":
		return "This chat is already paired.", true
	default:
		return "Unknown command /" + name + ".\n\n" + HelpText, true
	}
}

// stop cancels the chat's running job. Queued messages stay queued: each
// was sent on purpose and /stop answers the one in progress.
func (h *Hub) stop(key chatKey) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chats[key]
	if c == nil || c.running == nil {
		return "Nothing is running."
	}
	c.running.cancel()
	return "Stopping: " + clip(c.running.text, 80)
}

func (h *Hub) statusText(gateway string, key chatKey) string {
	var b strings.Builder
	fmt.Fprintf(&b, "latch · %s\n", gateway)
	h.mu.Lock()
	if c := h.chats[key]; c != nil && c.running != nil {
		fmt.Fprintf(&b, "running: %s (%s)\n", clip(c.running.text, 80), time.Since(c.running.started).Round(time.Second))
		fmt.Fprintf(&b, "queued: %d\n", len(c.queue))
	} else {
		b.WriteString("running: nothing\n")
	}
	h.mu.Unlock()
	var handled uint64
	h.cfg.Store.View(func(tx *store.Tx) (err error) {
		handled, err = tx.Counter(gateway, CounterHandled)
		return err
	})
	fmt.Fprintf(&b, "handled: %d messages", handled)
	if h.cfg.Agent != nil {
		st, err := h.cfg.Agent.Status(agent.SessionKey{Gateway: key.gateway, Chat: key.chatID})
		if err == nil {
			fmt.Fprintf(&b, "\nmodel: %s", st.Provider)
			if st.Model != "" {
				fmt.Fprintf(&b, " · %s", st.Model)
			}
			fmt.Fprintf(&b, "\nsession: %d messages · %d tokens today", st.Messages, st.TokensToday)
		}
	}
	return b.String()
}

// handle runs one queued entry: a notice is sent, a !command runs in the
// shell, plain text gets a hint.
func (h *Hub) handle(ctx context.Context, c *chat, e store.Entry) {
	switch {
	case e.Kind == store.KindNotice:
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: e.Text, ReplyTo: e.MessageID})
		h.finish(e, false)
	case e.Kind == store.KindResume:
		h.resumeTurn(ctx, c, e)
	case strings.HasPrefix(strings.TrimSpace(e.Text), "!"):
		h.runCommand(ctx, c, e)
	case len(decodeExtra(e).Files) > 0:
		h.runFiles(ctx, c, e)
	case isCommand(e.Text, "new"):
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: h.newSession(e), ReplyTo: e.MessageID})
		h.finish(e, true)
	default:
		h.runTurn(ctx, c, e)
	}
}

// runCommand runs a !command in the shell and replies with its output.
func (h *Hub) runCommand(ctx context.Context, c *chat, e store.Entry) {
	command := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(e.Text), "!"))
	if command == "" {
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: "Usage: !<command>, e.g. !uptime", ReplyTo: e.MessageID})
		h.finish(e, true)
		return
	}
	h.runJob(ctx, c, e, job{text: command}, func(jobCtx context.Context) bool {
		h.log.Info("running command", "gateway", e.Gateway, "seq", e.Seq)
		out := h.cfg.Shell(jobCtx, command)
		if ctx.Err() == nil {
			h.send(ctx, e.Gateway, e.ChatID, Reply{Text: out, Pre: true, ReplyTo: e.MessageID})
		}
		return false
	})
}

// job describes what runJob runs.
type job struct {
	text    string
	started time.Time
	cancel  context.CancelFunc
	// marksItself: the work marks the entry running in its own first
	// transaction (an agent turn, with the user's message), so runJob
	// does not.
	marksItself bool
	// typesItself: the work shows "typing…" itself (a TurnRenderer).
	typesItself bool
}

// runJob runs work as the chat's job; /stop cancels jobCtx. The entry is
// marked running before work starts (by runJob, or by work itself when
// j.marksItself), so a crash from then on is reported — or, for an agent
// turn, resumed — after the restart instead of running it again.
//
// "typing…" goes out first, while the mark commits: it promises nothing
// the store does not keep. If the process dies between the two, the entry
// is still "received" and runs once after the restart. runJob waits for
// it before work starts, so nothing the job sends can overtake it.
//
// The entry is deleted (and counted) when work returns, unless work says
// it is settled — work deleted it in its own last transaction, or it must
// stay as it is — or the Hub is shutting down: a cut job's entry stays
// running, so the next start reports (or resumes) it rather than running
// it again.
func (h *Hub) runJob(ctx context.Context, c *chat, e store.Entry, j job, work func(jobCtx context.Context) (settled bool)) {
	typed := func() {}
	if !j.typesItself {
		typed = h.typing(ctx, e)
	}
	if !j.marksItself {
		if err := h.cfg.Store.Update(func(tx *store.Tx) error { return tx.SetInboxState(e.Seq, store.Running) }); err != nil {
			typed()
			h.log.Error("marking job running failed; not run", "seq", e.Seq, "err", err)
			return
		}
	}
	typed()
	jobCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	j.started, j.cancel = time.Now(), cancel
	h.mu.Lock()
	c.running = &j
	h.mu.Unlock()
	settled := work(jobCtx)
	h.mu.Lock()
	c.running = nil
	h.mu.Unlock()
	if settled || ctx.Err() != nil {
		return
	}
	h.finish(e, true)
}

// typing shows "typing…" in the chat, if the gateway can, without waiting
// for it; the returned func waits.
func (h *Hub) typing(ctx context.Context, e store.Entry) (wait func()) {
	t, ok := h.gateways[e.Gateway].(typer)
	if !ok {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Typing(ctx, e.ChatID)
	}()
	return func() { <-done }
}

// runFiles saves what the chat sent, then gives the agent the caption and
// the saved paths (or, without a model, says where the files are).
func (h *Hub) runFiles(ctx context.Context, c *chat, e store.Entry) {
	e.Text = h.saveFiles(ctx, e, decodeExtra(e).Files)
	if h.cfg.Agent == nil || !h.cfg.Agent.Enabled() {
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: e.Text, ReplyTo: e.MessageID})
		h.finish(e, true)
		return
	}
	h.runTurn(ctx, c, e)
}

func (h *Hub) newSession(e store.Entry) string {
	if h.cfg.Agent == nil {
		return "There is no agent session to reset (no model is configured)."
	}
	if err := h.cfg.Agent.Reset(agent.SessionKey{Gateway: e.Gateway, Chat: e.ChatID}); err != nil {
		h.log.Error("resetting session", "err", err)
		return "Could not start a new session; see the daemon's log."
	}
	return "New session: the conversation so far is forgotten."
}

func isCommand(text, name string) bool {
	n, _ := splitCommand(text)
	return n == name
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
