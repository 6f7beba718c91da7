package discord

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/internal/turnrender"
)

// answer shows one answer of a turn (turnrender.Answer) as the messages
// Send would cut it into, streamed by edits (see stream.go). Its first
// message waits an edit interval after its first text: an answer complete
// by then is sent once, as Send would, with no edits.
type answer struct {
	d      *delivery
	first  time.Time // when the answer first had text
	msgs   []shown   // its messages, in order
	final  []string  // once frozen: the messages it ends as
	broken bool      // a message could not be sent: stop streaming it
	done   bool      // shown in its final form (or given up)
}

// shown is one message of an answer.
type shown struct {
	id, text string
	// stale: an edit to text failed while streaming; delivery tries it
	// once more.
	stale bool
}

func replyOf(text string) gateways.Reply { return gateways.Reply{Text: text} }

func (a *answer) Done() bool { return a.done }

// Shown: a streaming answer holds nothing up.
func (a *answer) Shown(string) bool { return true }

// Next brings an answer's messages in line with its text: while it
// streams, its final chunks and the growing one; once frozen, its chunks
// as Send cuts them (surplus messages, left by a final text that is not
// the streamed one, are deleted). Edits wait for the channel's pace.
func (a *answer) Next(text string, frozen bool) (turnrender.Step, time.Duration) {
	var want []string
	switch {
	case frozen:
		if a.final == nil {
			a.final = render(replyOf(text))
		}
		want = a.final
	case a.broken:
		return nil, 0
	default:
		if len(a.msgs) == 0 {
			if d := a.holdFirst(text); d > 0 {
				return nil, d // the answer may be complete by then
			}
		} else if d := a.d.editDue(); d > 0 {
			return nil, d // the text so far goes out with the next edit
		}
		final, growing := streamChunks(text)
		want = final
		if growing != "" {
			want = append(want, growing)
		}
	}
	for i, w := range want {
		if i == len(a.msgs) {
			return a.sendStep(w, frozen), 0
		}
		if m := a.msgs[i]; m.text == w && !(frozen && m.stale) {
			continue
		}
		if d := a.d.editDue(); d > 0 {
			return nil, d
		}
		return a.editStep(i, w, frozen), 0
	}
	if frozen {
		if len(a.msgs) > len(want) {
			return a.deleteStep(len(want)), 0
		}
		a.done = true
	}
	return nil, 0
}

// holdFirst is how long the first message still waits: an edit interval
// from the answer's first text that is not blank.
func (a *answer) holdFirst(text string) time.Duration {
	if blank(text) {
		return 0 // nothing to show yet; streamChunks shows nothing either
	}
	if a.first.IsZero() {
		a.first = time.Now()
	}
	return max(time.Until(a.first.Add(a.d.g.cfg.EditInterval)), 0)
}

// sendStep sends an answer's next message; its first one replies to the
// owner's message. A failure while streaming stops the streaming (the
// step's end tries again); at the step's end it gives up.
func (a *answer) sendStep(text string, frozen bool) turnrender.Step {
	d, first := a.d, len(a.msgs) == 0
	return func(ctx context.Context) func() {
		m := newMessage(text)
		if first {
			m.Reference = reference(d.chatID, d.replyTo)
		}
		id, err := d.post(ctx, m)
		return func() {
			switch {
			case err == nil:
				a.msgs = append(a.msgs, shown{id: id, text: text})
			case frozen:
				d.failed(ctx, "sending the answer failed", err)
				a.done = true
			default:
				d.failed(ctx, "sending the streaming answer failed", err)
				a.broken = true
			}
		}
	}
}

// editStep changes the text of an answer's message. A failed edit is not
// retried while the answer streams; the step's end tries it once more.
func (a *answer) editStep(i int, text string, frozen bool) turnrender.Step {
	d, id := a.d, a.msgs[i].id
	return func(ctx context.Context) func() {
		err := d.editMessage(ctx, id, text, nil)
		return func() {
			if err != nil {
				d.failed(ctx, "editing the answer failed", err)
			}
			a.msgs[i] = shown{id: id, text: text, stale: err != nil && !frozen}
		}
	}
}

// deleteStep deletes an answer's message from i on, one at a time.
func (a *answer) deleteStep(i int) turnrender.Step {
	d, id := a.d, a.msgs[i].id
	return func(ctx context.Context) func() {
		err := d.deleteMessage(ctx, id)
		return func() {
			if err != nil {
				d.failed(ctx, "deleting a surplus message of the answer failed", err)
			}
			a.msgs = slices.Delete(a.msgs, i, i+1)
		}
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
		return "✗ " + line + " · " + turnrender.Seconds(r.Duration) + "\n" + inlineCode(clipRunes(first, maxLineError))
	}
	return "✓ " + line + " · " + turnrender.Seconds(r.Duration)
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
