package discord

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/gateways"
)

// The steps of a rendered turn: each returns the call to make, run by the
// turn's goroutine without the lock, recording the outcome under it.

func replyOf(text string) gateways.Reply { return gateways.Reply{Text: text} }

// sendStep sends an answer's next message; its first one replies to the
// owner's message. A failure while streaming stops the streaming (the
// step's end tries again); at the step's end it gives up.
func (t *turn) sendStep(it *item, text string) func() {
	first, frozen := len(it.msgs) == 0, it.frozen
	return func() {
		m := newMessage(text)
		if first {
			m.Reference = reference(t.chatID, t.replyTo)
		}
		id, err := t.post(m)
		t.mu.Lock()
		defer t.mu.Unlock()
		switch {
		case err == nil:
			it.msgs = append(it.msgs, shown{id: id, text: text})
		case frozen:
			t.failed("sending the answer failed", err)
			it.done = true
		default:
			t.failed("sending the streaming answer failed", err)
			it.broken = true
		}
	}
}

// editStep changes the text of an answer's message. A failed edit is not
// retried while the answer streams; the step's end tries it once more.
func (t *turn) editStep(it *item, i int, text string) func() {
	id, frozen := it.msgs[i].id, it.frozen
	return func() {
		err := t.editMessage(id, text, nil)
		t.mu.Lock()
		defer t.mu.Unlock()
		if err != nil {
			t.failed("editing the answer failed", err)
		}
		it.msgs[i] = shown{id: id, text: text, stale: err != nil && !frozen}
	}
}

// deleteStep deletes an answer's message from i on, one at a time.
func (t *turn) deleteStep(it *item, i int) func() {
	id := it.msgs[i].id
	return func() {
		err := t.deleteMessage(id)
		t.mu.Lock()
		defer t.mu.Unlock()
		if err != nil {
			t.failed("deleting a surplus message of the answer failed", err)
		}
		it.msgs = slices.Delete(it.msgs, i, i+1)
	}
}

// toolStep sends or edits a tool line.
func (t *turn) toolStep(it *item, line string) func() {
	id, result := it.lineID, it.result
	return func() {
		var err error
		if id == "" {
			id, err = t.post(newMessage(line))
		} else {
			err = t.editMessage(id, line, nil)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if err != nil {
			t.failed("showing a tool call failed", err)
			// Not again: a line that cannot be shown is not worth a stuck turn.
			it.done = id == "" || result != nil
		}
		it.lineID, it.line = id, line
	}
}

// approvalStep sends the request with Approve / Always / Deny buttons;
// should the id make a custom_id too long, the text commands stand in for
// them.
func (t *turn) approvalStep(it *item) func() {
	a := it.approval
	return func() {
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
		id, err := t.post(m)
		if err != nil {
			t.failed("sending an approval request failed", err)
		} else {
			t.g.texts.remember(id, m.Content)
		}
		t.mu.Lock()
		it.done = true
		t.mu.Unlock()
	}
}

func (t *turn) post(m *discordgo.MessageSend) (string, error) {
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

func (t *turn) editMessage(id, text string, rows *[]discordgo.MessageComponent) error {
	s, err := t.g.started()
	if err != nil {
		return err
	}
	return t.g.edit(t.ctx, s, t.chatID, id, text, rows)
}

func (t *turn) deleteMessage(id string) error {
	s, err := t.g.started()
	if err != nil {
		return err
	}
	return t.g.call(t.ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) error {
		return s.ChannelMessageDelete(t.chatID, id, opts...)
	})
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
