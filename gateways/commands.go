package gateways

import (
	"cmp"
	"context"
	"fmt"
	"github.com/latchd/latch/turn"
	"strings"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// MsgStoppedBeforeStart tells the chat that /stop reached a job before it
// started.
const MsgStoppedBeforeStart = "Stopped before it started; it was not run."

// HelpText lists what the latched chat can do.
const HelpText = "latch — commands\n" +
	"  <text>      talk to the agent (when a model is configured)\n" +
	"  !<command>  run a shell command in the workspace (e.g. !uptime)\n" +
	"  /new        start a fresh conversation\n" +
	"  /approve <id> · /always <id> · /deny <id>  answer an approval request\n" +
	"  /stop       stop what is running\n" +
	"  /status     what is running and how latch is doing\n" +
	"  /every <schedule> <prompt or !command> · /at <time> …  schedule a job\n" +
	"  /jobs · /jobs resume · /cancel <id>  list, resume, cancel jobs\n" +
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
	case "every", "at", "jobs", "cancel":
		return h.jobCommand(e, name, arg), true
	case cmdLatchOK, cmdLatchDeny:
		return h.latchCommand(e, name, arg), true
	default:
		return "Unknown command /" + name + ".\n\n" + HelpText, true
	}
}

// stop cancels the chat's job: the one running, or the one about to start
// — sent in the same batch as /stop, or still waiting for its "typing…"
// and running mark — which then never starts (see claim). Jobs queued
// behind it stay queued: each was sent on purpose and /stop answers the
// one in progress.
func (h *Hub) stop(key chatKey) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	j := h.current(key)
	if j == nil {
		return "Nothing is running."
	}
	j.stopped = true
	j.cancel()
	return "Stopping: " + turn.Clip(j.text, 80)
}

// current is the chat's job that /stop and /status speak of, under h.mu;
// nil once its work has returned and its entry is only being finished.
func (h *Hub) current(key chatKey) *job {
	c := h.chats[key]
	if c == nil || c.running == nil || c.running.ended {
		return nil
	}
	return c.running
}

func (h *Hub) statusText(gateway string, key chatKey) string {
	var b strings.Builder
	fmt.Fprintf(&b, "latch · %s\n", gateway)
	h.mu.Lock()
	if j := h.current(key); j != nil {
		queued := 0
		for _, q := range h.chats[key].queue {
			if q.j != j {
				queued++
			}
		}
		fmt.Fprintf(&b, "running: %s (%s)\n", turn.Clip(j.text, 80), time.Since(j.started).Round(time.Second))
		fmt.Fprintf(&b, "queued: %d\n", queued)
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
	if h.cfg.Escaped != nil {
		if left := h.cfg.Escaped(); len(left) > 0 {
			b.WriteString("\nleft running outside latch's reach (/stop cannot end them):\n  " + strings.Join(left, "\n  "))
		}
	}
	if h.cfg.Agent != nil {
		st, err := h.cfg.Agent.Status(agent.SessionKey{Gateway: key.gateway, Chat: key.chatID})
		if err == nil {
			fmt.Fprintf(&b, "\nmodel: %s", st.Provider)
			if st.Model != "" {
				fmt.Fprintf(&b, " · %s", st.Model)
			}
			fmt.Fprintf(&b, "\nsession: %d messages · %d tokens today", st.Messages, st.TokensToday)
			if st.Session != "" {
				fmt.Fprintf(&b, "\n%s session: %s · $%.4f so far", st.Provider, st.Session, st.CostUSD)
			}
			for _, l := range st.MCP {
				fmt.Fprintf(&b, "\nmcp %s", l)
			}
		}
	}
	return b.String()
}

// handle runs one queued entry: a notice is sent, a !command runs in the
// shell, plain text goes to the agent (or gets a hint). j is the entry's
// job, claimed already, or nil for what is answered at once (see jobFor).
func (h *Hub) handle(ctx context.Context, e store.Entry, j *job) {
	switch {
	case e.Kind == store.KindNotice:
		h.sendNotice(ctx, e)
	case e.Kind == store.KindResume:
		h.resumeTurn(ctx, j, e)
	case strings.HasPrefix(strings.TrimSpace(e.Text), "!"):
		h.runCommand(ctx, j, e)
	case len(decodeExtra(e).Files) > 0:
		h.runFiles(ctx, j, e)
	case isCommand(e.Text, "new"):
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: h.newSession(e), ReplyTo: e.MessageID})
		h.finish(e, true)
	default:
		h.runTurn(ctx, j, e)
	}
}

// jobFor returns the job that handling e runs — a command, an agent turn —
// or nil when handle answers e at once: a notice, a usage hint, /new,
// text with no model to go to. It follows handle's cases, and the
// handlers answer when they are given no job, so the two cannot disagree.
func (h *Hub) jobFor(e store.Entry) *job {
	model := h.cfg.Agent != nil && h.cfg.Agent.Enabled()
	switch {
	case e.Kind == store.KindNotice:
		return nil
	case e.Kind == store.KindResume:
		return &job{text: e.Text}
	case strings.HasPrefix(strings.TrimSpace(e.Text), "!"):
		if command := shellCommand(e.Text); command != "" {
			return &job{text: command}
		}
		return nil
	case len(decodeExtra(e).Files) > 0:
		if !model {
			return nil
		}
		return &job{text: cmp.Or(e.Text, "the files you sent")}
	case isCommand(e.Text, "new") || !model:
		return nil
	}
	return &job{text: e.Text}
}

// shellCommand is the command in a "!command" message.
func shellCommand(text string) string {
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "!"))
}

// runCommand runs a !command in the shell and replies with its output; a
// bare "!" (no job) gets the usage.
func (h *Hub) runCommand(ctx context.Context, j *job, e store.Entry) {
	if j == nil {
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: "Usage: !<command>, e.g. !uptime", ReplyTo: e.MessageID})
		h.finish(e, true)
		return
	}
	command := shellCommand(e.Text)
	h.runJob(ctx, j, e, jobSteps{}, func(jobCtx context.Context) bool {
		h.log.Info("running command", logkey.Gateway, e.Gateway, "seq", e.Seq)
		return h.commandDone(ctx, j, e, h.cfg.Shell(jobCtx, command))
	})
}

// job is a chat's command or agent turn, from the moment claim makes it
// the chat's next until the worker is done with its entry.
type job struct {
	text    string
	e       store.Entry // the entry it runs
	started time.Time   // claimed
	// ctx is what the work runs under; /stop and Unlatched cancel it.
	ctx    context.Context
	cancel context.CancelFunc
	// out is what the job says things to its chat under: Unlatched ends
	// it (as does the job's end), so a chat no longer latched is sent
	// nothing more of the job's — not even a rendered turn's last edit,
	// which /stop (ending ctx only) still makes.
	out  context.Context
	mute context.CancelFunc
	// stopped: /stop cancelled it. dropped: Unlatched did, and the chat,
	// no longer latched, is told nothing more. ended: its work has
	// returned. working: its work has begun (a shutdown waits for it and
	// says so). All under h.mu.
	stopped, dropped, ended, working bool
}

// dropped reports whether Unlatched cancelled j: what it would still say
// goes nowhere.
func (h *Hub) dropped(j *job) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return j.dropped
}

// jobSteps says which of runJob's steps before the work the work takes
// itself.
type jobSteps struct {
	// marksItself: the work marks the entry running in its own first
	// transaction (an agent turn, with the user's message), so runJob
	// does not.
	marksItself bool
	// typesItself: the work shows "typing…" itself (a TurnRenderer).
	typesItself bool
}

// runJob runs work as the chat's job j, under j.ctx, which /stop cancels.
// The entry is marked running before work starts (by runJob, or by work
// itself when steps.marksItself), so a crash from then on is reported —
// or, for an agent turn, resumed — after the restart instead of running it
// again.
//
// "typing…" goes out first, while the mark commits: it promises nothing
// the store does not keep. If the process dies between the two, the entry
// is still "received" and runs once after the restart. runJob waits for
// it before work starts, so nothing the job sends can overtake it.
//
// /stop can come at any point of this, since the job was claimed before
// it left the queue: before the work begins runJob looks, and a job
// stopped by then never starts (stoppedEarly).
//
// The entry is deleted (and counted) when work returns, unless work says
// it is settled — work deleted it in its own last transaction, or it must
// stay as it is — or the Hub is shutting down: a cut job's entry stays
// running, so the next start reports (or resumes) it rather than running
// it again.
func (h *Hub) runJob(ctx context.Context, j *job, e store.Entry, steps jobSteps, work func(jobCtx context.Context) (settled bool)) {
	if h.stoppedEarly(ctx, j, e) {
		return
	}
	typed := func() {}
	if !steps.typesItself {
		typed = h.typing(j.out, e)
	}
	if !steps.marksItself {
		if err := h.cfg.Store.Update(func(tx *store.Tx) error { return tx.SetInboxState(e.Seq, store.Running) }); err != nil {
			typed()
			h.log.Error("marking job running failed; not run", "seq", e.Seq, logkey.Err, err)
			return
		}
	}
	typed()
	if h.stoppedEarly(ctx, j, e) {
		return
	}
	settled := work(j.ctx)
	h.mu.Lock()
	j.ended = true
	h.mu.Unlock()
	if settled || ctx.Err() != nil {
		return
	}
	h.finish(e, true)
}

// stoppedEarly reports whether j was cancelled before its work began. If
// /stop did it, the entry is finished as stopped. If an unpair did, it is
// finished as not run, silently, like an entry dispatch drops. If shutdown
// did, the entry stays as it is, like any job shutdown cuts: "received"
// runs once after the restart, "running" is reported (or resumed) then.
func (h *Hub) stoppedEarly(ctx context.Context, j *job, e store.Entry) bool {
	if j.ctx.Err() == nil {
		return false
	}
	h.mu.Lock()
	stopped, dropped := j.stopped, j.dropped
	h.mu.Unlock()
	switch {
	case dropped:
		h.log.Info("gateway unpaired; job dropped before it started", logkey.Gateway, e.Gateway, "seq", e.Seq)
		h.finish(e, false)
	case stopped:
		h.stoppedBeforeStart(ctx, e)
	}
	return true
}

// stoppedBeforeStart finishes the entry of a job /stop reached before it
// started: deleted and counted, as a stopped job's is, then the chat is
// told. In that order: a crash between the two loses the notice, which
// "Stopping: …" has given already, rather than run the job after all.
func (h *Hub) stoppedBeforeStart(ctx context.Context, e store.Entry) {
	h.log.Info("job stopped before it started", logkey.Gateway, e.Gateway, "seq", e.Seq)
	h.finish(e, true)
	h.send(ctx, e.Gateway, e.ChatID, Reply{Text: MsgStoppedBeforeStart, ReplyTo: e.MessageID})
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
// the saved paths (or, without a model — no job — says where the files
// are).
func (h *Hub) runFiles(ctx context.Context, j *job, e store.Entry) {
	if j == nil {
		e.Text, _ = h.saveFiles(ctx, e, decodeExtra(e).Files)
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: e.Text, ReplyTo: e.MessageID})
		h.finish(e, true)
		return
	}
	if h.stoppedEarly(ctx, j, e) {
		return
	}
	// Under the job's context: /stop ends a download, and a
	// transcription, too.
	var heard []string
	e.Text, heard = h.saveFiles(j.ctx, e, decodeExtra(e).Files)
	if len(heard) > 0 && j.ctx.Err() == nil {
		h.send(j.out, e.Gateway, e.ChatID, Reply{Text: echo(heard), ReplyTo: e.MessageID})
	}
	h.runTurn(ctx, j, e)
}

func (h *Hub) newSession(e store.Entry) string {
	if h.cfg.Agent == nil {
		return "There is no agent session to reset (no model is configured)."
	}
	if err := h.cfg.Agent.Reset(agent.SessionKey{Gateway: e.Gateway, Chat: e.ChatID}); err != nil {
		h.log.Error("resetting session", logkey.Err, err)
		return "Could not start a new session; see the daemon's log."
	}
	return "New session: the conversation so far is forgotten."
}

func isCommand(text, name string) bool {
	n, _ := splitCommand(text)
	return n == name
}
