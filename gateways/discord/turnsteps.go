package discord

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/gateways/internal/turnrender"
	"github.com/latchd/latch/logkey"
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
	// lost: once frozen, a message or edit could not be delivered; gaveUp:
	// a message could not be sent, so the ones after it are not either.
	lost, gaveUp bool
	noticed      bool // undeliveredNotice was sent (or tried)
	done         bool // shown in its final form (or given up)
}

const (
	// answerTries bounds the tries of one message or edit of an answer
	// that fails transiently (a 5xx, no answer; call waits out 429s).
	answerTries = 3
	// undeliveredNotice follows an answer of which a part could not be
	// delivered, so that the loss is not silent.
	undeliveredNotice = "⚠️ Part of this answer could not be delivered."
)

// shown is one message of an answer.
type shown struct {
	id, text string
	// stale: an edit to text failed while streaming; delivery tries it
	// once more.
	stale bool
}

func replyOf(text string) adapter.Reply { return adapter.Reply{Text: text} }

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
	case frozen && a.gaveUp:
		return a.finish()
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
		return a.finish()
	}
	return nil, 0
}

// finish ends a frozen answer, first saying so if a part of it was lost.
func (a *answer) finish() (turnrender.Step, time.Duration) {
	if a.lost && !a.noticed {
		return a.noticeStep(), 0
	}
	a.done = true
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

// sendStep sends an answer's next message (persist: a transient failure
// is tried again); its first one replies to the owner's message. A
// failure while streaming stops the streaming (the step's end tries
// again); at the step's end it gives up, and the answer says a part is
// lost.
func (a *answer) sendStep(text string, frozen bool) turnrender.Step {
	d, first := a.d, len(a.msgs) == 0
	return func(ctx context.Context) func() {
		m := newMessage(text)
		if first {
			m.Reference = reference(d.chatID, d.replyTo)
		}
		var id string
		err := d.persist(ctx, func() (err error) {
			id, err = d.post(ctx, m)
			return err
		})
		return func() {
			switch {
			case err == nil:
				a.msgs = append(a.msgs, shown{id: id, text: text})
			case frozen:
				d.failed(ctx, "sending the answer failed; giving up on the rest", err)
				a.lost, a.gaveUp = true, true
			default:
				d.failed(ctx, "sending the streaming answer failed", err)
				a.broken = true
			}
		}
	}
}

// editStep changes the text of an answer's message. A failed edit is not
// made again while the answer streams (the next one supersedes it); the
// step's end makes it once more (persist: a transient failure is tried
// again), and if that fails too the answer says a part is lost.
func (a *answer) editStep(i int, text string, frozen bool) turnrender.Step {
	d, id := a.d, a.msgs[i].id
	return func(ctx context.Context) func() {
		edit := func() error { return d.editMessage(ctx, id, text, nil) }
		var err error
		if frozen {
			err = d.persist(ctx, edit)
		} else {
			err = edit()
		}
		return func() {
			if err != nil {
				d.failed(ctx, "editing the answer failed", err)
				a.lost = a.lost || frozen
			}
			a.msgs[i] = shown{id: id, text: text, stale: err != nil && !frozen}
		}
	}
}

// noticeStep sends undeliveredNotice, best effort.
func (a *answer) noticeStep() turnrender.Step {
	d := a.d
	return func(ctx context.Context) func() {
		if ctx.Err() == nil {
			if _, err := d.post(ctx, newMessage(undeliveredNotice)); err != nil {
				d.failed(ctx, "saying that part of the answer was lost failed", err)
			}
		}
		return func() { a.noticed = true }
	}
}

// persist makes one call of an answer (a message or an edit), up to
// answerTries times while it fails transiently: Discord's 5xx or no answer
// at all. A 429 has been waited out by call already; another 4xx would
// only fail again. Making the call again carries a small risk: after a
// timeout, Discord may have created the message all the same, which then
// shows twice. A missing part of an answer is the worse outcome.
func (d *delivery) persist(ctx context.Context, fn func() error) error {
	return d.g.persist(ctx, d.log, fn)
}

// persist is delivery.persist for any message that must not go missing
// (Send's chunks too: a !command's output, a notice).
func (g *Gateway) persist(ctx context.Context, log *slog.Logger, fn func() error) error {
	bo := g.newBackoff()
	for try := 1; ; try++ {
		err := fn()
		if err == nil || try == answerTries || ctx.Err() != nil || !transient(err) || isAPI(err, http.StatusTooManyRequests, 0) {
			return err
		}
		wait := bo.Next()
		log.Info("a message failed; trying again", logkey.Err, err, "retry_in", wait)
		if !retry.Sleep(ctx, wait) {
			return err
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
