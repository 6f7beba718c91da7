package gateways

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/latchd/latch/store"
)

// HelpText lists what the latched chat can do.
const HelpText = "latch — commands\n" +
	"  !<command>  run a shell command in the workspace (e.g. !uptime)\n" +
	"  /stop       stop what is running\n" +
	"  /status     what is running and how latch is doing\n" +
	"  /help       this list"

// MsgNoAgent answers plain text while no model is configured.
const MsgNoAgent = "No model is configured, so plain text has nowhere to go yet. " +
	"Run a shell command with !<command>, e.g. !uptime. /help lists commands."

// immediate answers the commands that must not queue behind a running job.
// ok is false for anything that should queue.
func (h *Hub) immediate(e store.Entry) (reply string, ok bool) {
	name, _ := splitCommand(e.Text)
	switch name {
	case "":
		return "", false
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
	return b.String()
}

// handle runs one queued entry: a notice is sent, a !command runs in the
// shell, plain text gets a hint.
func (h *Hub) handle(ctx context.Context, c *chat, e store.Entry) {
	switch {
	case e.Kind == store.KindNotice:
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: e.Text, ReplyTo: e.MessageID})
		h.finish(e, false)
	case strings.HasPrefix(strings.TrimSpace(e.Text), "!"):
		h.runCommand(ctx, c, e)
	default:
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: MsgNoAgent, ReplyTo: e.MessageID})
		h.finish(e, true)
	}
}

// runCommand marks the entry running before it starts, so a crash from here
// on is reported after the restart instead of running the command again.
func (h *Hub) runCommand(ctx context.Context, c *chat, e store.Entry) {
	command := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(e.Text), "!"))
	if command == "" {
		h.send(ctx, e.Gateway, e.ChatID, Reply{Text: "Usage: !<command>, e.g. !uptime", ReplyTo: e.MessageID})
		h.finish(e, true)
		return
	}
	if err := h.cfg.Store.Update(func(tx *store.Tx) error { return tx.SetInboxState(e.Seq, store.Running) }); err != nil {
		h.log.Error("marking command running failed; not run", "seq", e.Seq, "err", err)
		return
	}
	jobCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.mu.Lock()
	c.running = &job{text: command, started: time.Now(), cancel: cancel}
	h.mu.Unlock()
	if t, ok := h.gateways[e.Gateway].(interface{ Typing(context.Context, string) }); ok {
		t.Typing(ctx, e.ChatID)
	}
	h.log.Info("running command", "gateway", e.Gateway, "seq", e.Seq)
	out := h.cfg.Shell(jobCtx, command)
	h.mu.Lock()
	c.running = nil
	h.mu.Unlock()
	if ctx.Err() != nil {
		// Shutting down: leave the entry running, so the next start tells
		// the chat it was interrupted rather than running it again.
		return
	}
	h.send(ctx, e.Gateway, e.ChatID, Reply{Text: out, Pre: true, ReplyTo: e.MessageID})
	h.finish(e, true)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
