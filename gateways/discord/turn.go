package discord

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/gateways"
)

const (
	// typingEvery renews "typing…", which Discord shows for ten seconds.
	typingEvery = 8 * time.Second
	// maxSummary bounds a tool's summary in an approval request, well
	// inside one message; maxLineSummary on a tool line.
	maxSummary     = 1500
	maxLineSummary = 120
	maxLineError   = 200
)

// Custom ids of the approval buttons: "<decision>:<approval id>", the form
// the Hub parses.
const (
	dataApprove = "approve:"
	dataAlways  = "always:"
	dataDeny    = "deny:"
)

// RenderTurn returns the Events of one agent turn in a channel. It is
// deliberately plain: the answer is sent whole when a step ends (chunked
// like Send, the final one threaded to replyTo), each tool call is a line
// that turns into ✓ or ✗ when it ends, an approval request is a message
// with Approve / Always / Deny buttons, files are uploaded. "typing…" shows
// while the turn runs and no approval waits. Events call Discord before
// they return, in order.
//
// The returned value also has End(), which the Hub calls after the turn:
// it sends what was said but not sent yet (a turn that ended in an error
// has no Final) and stops "typing…". It is safe to call more than once and
// after Final.
func (g *Gateway) RenderTurn(ctx context.Context, chatID, replyTo string) agent.Events {
	t := &turn{g: g, ctx: ctx, chatID: chatID, replyTo: replyTo, lines: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go t.typing()
	return t
}

// turn implements agent.Events for one turn.
type turn struct {
	g               *Gateway
	ctx             context.Context
	chatID, replyTo string
	stop, done      chan struct{}
	stopOnce        sync.Once

	mu       sync.Mutex
	text     strings.Builder   // the step's answer not sent yet
	lines    map[string]string // tool call id → its line's message id
	awaiting bool              // an approval waits for the owner
	ended    bool
}

var _ agent.Events = (*turn)(nil)

func (t *turn) typing() {
	defer close(t.done)
	tick := time.NewTicker(typingEvery)
	defer tick.Stop()
	for {
		t.mu.Lock()
		quiet := t.awaiting
		t.mu.Unlock()
		if !quiet {
			t.g.Typing(t.ctx, t.chatID)
		}
		select {
		case <-tick.C:
		case <-t.stop:
			return
		case <-t.ctx.Done():
			return
		}
	}
}

// Text collects a piece of the answer.
func (t *turn) Text(delta string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.text.WriteString(delta)
}

// ToolStarted sends the call's line.
func (t *turn) ToolStarted(c agent.ToolCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(false)
	t.awaiting = false
	id, err := t.sendLocked(newMessage(toolLine(c, nil)))
	if err != nil {
		t.failed("showing a tool call failed", err)
		return
	}
	t.lines[c.ID] = id
}

// ToolFinished turns the call's line into ✓ or ✗; a call that never
// started (denied) gets a line of its own.
func (t *turn) ToolFinished(c agent.ToolCall, r agent.ToolResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(false)
	t.awaiting = false
	line := toolLine(c, &r)
	s, err := t.g.started()
	if id, ok := t.lines[c.ID]; ok && err == nil {
		delete(t.lines, c.ID)
		err = t.g.edit(t.ctx, s, t.chatID, id, line, nil)
	} else if err == nil {
		_, err = t.sendLocked(newMessage(line))
	}
	if err != nil {
		t.failed("showing a tool result failed", err)
	}
}

// Approval sends the request with Approve / Always / Deny buttons; should
// the id make a custom_id too long, the text commands stand in for them.
func (t *turn) Approval(a agent.Approval) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(false)
	t.awaiting = true
	text := "🔐 Allow **" + escapeMarkdown(a.Tool) + "**?"
	if a.Summary != "" {
		text += "\n" + fence + "\n" + escapeFences(clipRunes(a.Summary, maxSummary)) + "\n" + fence
	}
	m := newMessage(text)
	if len(dataApprove+a.ID) > maxCustomID {
		m.Content += fmt.Sprintf("\n/approve %s · /always %s · /deny %s", a.ID, a.ID, a.ID)
	} else {
		m.Components = []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Approve", Style: discordgo.SuccessButton, CustomID: dataApprove + a.ID},
			discordgo.Button{Label: "Always", Style: discordgo.PrimaryButton, CustomID: dataAlways + a.ID},
			discordgo.Button{Label: "Deny", Style: discordgo.DangerButton, CustomID: dataDeny + a.ID},
		}}}
	}
	id, err := t.sendLocked(m)
	if err != nil {
		t.failed("sending an approval request failed", err)
		return
	}
	t.g.texts.remember(id, m.Content)
}

// File uploads a file once everything before it is shown.
func (t *turn) File(f agent.File) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked(false)
	return t.g.SendFile(t.ctx, t.chatID, f, t.replyTo)
}

// Final sends the answer of the last step, threaded to the owner's
// message, and ends the turn. text is authoritative; it is the same text
// that came through Text.
func (t *turn) Final(text string) {
	t.mu.Lock()
	if strings.TrimSpace(text) != "" {
		t.text.Reset()
		t.text.WriteString(text)
	}
	t.flushLocked(true)
	t.ended = true
	t.mu.Unlock()
	t.End()
}

// End sends what is left and stops "typing…".
func (t *turn) End() {
	t.mu.Lock()
	if !t.ended {
		t.flushLocked(true)
		t.ended = true
	}
	t.mu.Unlock()
	t.stopOnce.Do(func() { close(t.stop) })
	<-t.done
}

// flushLocked sends the collected answer, if any.
func (t *turn) flushLocked(final bool) {
	text := t.text.String()
	t.text.Reset()
	if strings.TrimSpace(text) == "" || t.ctx.Err() != nil {
		return
	}
	reply := ""
	if final {
		reply = t.replyTo
	}
	if _, err := t.g.Send(t.ctx, t.chatID, gateways.Reply{Text: text, ReplyTo: reply}); err != nil {
		t.failed("sending the answer failed", err)
	}
}

func (t *turn) sendLocked(m *discordgo.MessageSend) (string, error) {
	s, err := t.g.started()
	if err != nil {
		return "", err
	}
	sent, err := t.g.post(t.ctx, s, t.chatID, m)
	if err != nil {
		return "", err
	}
	return sent.ID, nil
}

func (t *turn) failed(what string, err error) {
	if t.ctx.Err() == nil {
		t.g.log.Warn(what, "channel_id", t.chatID, "err", err)
	}
}

// toolLine is a tool call's line: "⚙ bash: `make test`" while it runs,
// "✓ … · 1.2s" or "✗ … · denied" once it ended, a failure's first error
// line under it.
func toolLine(c agent.ToolCall, r *agent.ToolResult) string {
	line := escapeMarkdown(c.Name)
	if s := strings.Join(strings.Fields(c.Summary), " "); s != "" {
		line += ": " + inlineCode(clipRunes(s, maxLineSummary))
	}
	switch {
	case r == nil:
		return "⚙ " + line
	case r.Denied:
		return "✗ " + line + " · denied"
	case r.Err != nil:
		first, _, _ := strings.Cut(r.Err.Error(), "\n")
		return "✗ " + line + " · " + seconds(r.Duration) + "\n" + inlineCode(clipRunes(first, maxLineError))
	}
	return "✓ " + line + " · " + seconds(r.Duration)
}

// seconds formats a duration for a tool line: 0.4s, 12.3s, 2m05s.
func seconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// inlineCode shows s as code, so Markdown in a command does not render.
func inlineCode(s string) string {
	if strings.Contains(s, "`") {
		return escapeMarkdown(s)
	}
	return "`" + s + "`"
}

// escapeMarkdown makes Discord show s as typed.
var markdownEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "~", `\~`, "`", "\\`", "|", `\|`, ">", `\>`, "[", `\[`, "]", `\]`)

func escapeMarkdown(s string) string { return markdownEscaper.Replace(s) }
