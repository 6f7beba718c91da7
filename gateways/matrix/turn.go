package matrix

import (
	"context"
	"errors"
	"html"
	"log/slog"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/gateways/internal/turnrender"
	"github.com/latchd/latch/turn"
)

// typingFor is how long one typing notification lasts; the turn renews it
// before then.
const typingFor = 30 * time.Second

// RenderTurn shows one agent turn in a room: the answer streams by
// m.replace edits (paced per room by EditInterval), cut into messages as
// Send would cut it; a tool call is a line that turns into ✓ or ✗; an
// approval request is a message to react to (✅ ❌ 🔁) or answer with
// /approve or /deny; files are uploaded; "typing…" shows meanwhile.
func (g *Gateway) RenderTurn(ctx context.Context, chat, replyTo string) turn.Events {
	rid, err := roomOf(chat)
	if err != nil {
		g.log.Warn("turn for something not a room; nothing will be shown")
		return turnrender.Discard(errors.New("matrix: " + err.Error()))
	}
	g.markOwner(rid) // only the latched chat has turns
	d := &delivery{g: g, room: rid, log: g.log.With("chat", chat)}
	t := turnrender.Start(ctx, d, turnrender.Options{
		Typing:    typingFor - 5*time.Second,
		Idle:      time.Minute,
		LineWait:  d.editDue,
		HideTools: g.cfg.Verbosity == turn.VerbosityQuiet,
		Log:       d.log,
	})
	return ended{t, d}
}

// ended is a rendered turn whose End also takes "typing…" back.
type ended struct {
	*turnrender.Turn[id.EventID]
	d *delivery
}

func (e ended) End() {
	e.Turn.End()
	ctx, cancel := context.WithTimeout(context.Background(), e.d.g.cfg.RequestTimeout)
	defer cancel()
	if err := e.d.g.typing(ctx, e.d.room, false); err != nil {
		e.d.failed(ctx, "ending the typing notification failed", err)
	}
}

// delivery makes a rendered turn's calls in one room.
type delivery struct {
	g    *Gateway
	room id.RoomID
	log  *slog.Logger
}

var _ turnrender.Delivery[id.EventID] = (*delivery)(nil)

func (d *delivery) NewAnswer() turnrender.Answer {
	return &turnrender.Streamed[id.EventID, rendered]{P: poster{d}, First: d.g.cfg.EditInterval}
}

func (d *delivery) ToolLine(c turn.ToolCall, r *turn.ToolResult) string {
	return turn.ToolLine(c, r, d.g.cfg.Verbosity, turn.LineStyle{Name: html.EscapeString,
		Code: func(s string) string { return "<code>" + html.EscapeString(s) + "</code>" }})
}

func (d *delivery) SendLine(ctx context.Context, line string) (id.EventID, error) {
	return d.g.post(ctx, d.room, messageContent(string(event.MsgText), lineRendered(line)))
}

func (d *delivery) EditLine(ctx context.Context, ev id.EventID, line string) error {
	d.edited()
	return d.g.edit(ctx, d.room, ev, lineRendered(line))
}

func lineRendered(line string) rendered {
	return rendered{html: line, plain: html.UnescapeString(strings.NewReplacer("<code>", "`", "</code>", "`").Replace(line))}
}

// Approval sends the request; a reaction on it or a typed command answers.
func (d *delivery) Approval(ctx context.Context, a turn.Approval) error {
	detail := a.Detail
	if detail == "" {
		detail = a.Summary
	}
	md := "🔐 Allow **" + escapeMD(turn.Clip(a.Tool, 64)) + "**?"
	if detail != "" {
		shown, _ := turn.ClipMiddle(detail, maxChunk/4)
		md += "\n```\n" + strings.ReplaceAll(shown, "```", "ʼʼʼ") + "\n```"
	}
	md += "\nOr type " + escapeMD(turn.ApprovalCommands(a.ID))
	var buttons []adapter.Button
	for _, b := range turn.ApprovalButtons {
		buttons = append(buttons, adapter.Button{Label: b.Label, Data: turn.Payload(b.Kind, a.ID)})
	}
	// Reliably: an approval that never shows is denied at the timeout.
	return d.g.persist(ctx, func() error {
		_, err := d.g.Send(ctx, string(d.room), adapter.Reply{Text: md, Markdown: true, Buttons: buttons})
		return err
	})
}

// escapeMD keeps text literal in Markdown.
func escapeMD(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_[]<>#~|", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (d *delivery) File(ctx context.Context, f turn.File) error {
	return d.g.SendFile(ctx, string(d.room), f, "")
}

func (d *delivery) Typing(ctx context.Context) {
	if err := d.g.typing(ctx, d.room, true); err != nil {
		d.failed(ctx, "showing typing failed", err)
	}
}

func (d *delivery) editDue() time.Duration {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	return max(time.Until(d.g.edits[d.room].Add(d.g.cfg.EditInterval)), 0)
}

func (d *delivery) edited() {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	d.g.edits[d.room] = time.Now()
}

func (d *delivery) failed(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		d.log.Warn(what, "err", err)
	}
}

// poster streams an answer in a room (turnrender.Streamed).
type poster struct{ d *delivery }

// undeliveredNotice follows an answer of which a part could not be
// delivered, so that the loss is not silent.
const undeliveredNotice = "⚠️ Part of this answer could not be delivered."

func (p poster) Render(text string) []rendered { return renderMarkdown(text) }

func (p poster) Post(ctx context.Context, r rendered) (id.EventID, error) {
	return p.d.g.post(ctx, p.d.room, messageContent(string(event.MsgText), r))
}

func (p poster) Edit(ctx context.Context, ev id.EventID, r rendered) error {
	return p.d.g.edit(ctx, p.d.room, ev, r)
}

func (p poster) EditDue() time.Duration { return p.d.editDue() }
func (p poster) Edited()                { p.d.edited() }

func (p poster) Persist(ctx context.Context, fn func() error) error { return p.d.g.persist(ctx, fn) }

func (p poster) Notice(ctx context.Context) error {
	_, err := p.d.g.post(ctx, p.d.room, messageContent(string(event.MsgNotice), rendered{plain: undeliveredNotice}))
	return err
}

func (p poster) Failed(ctx context.Context, what string, err error) { p.d.failed(ctx, what, err) }

// answerTries bounds the tries of a call that must not go missing.
const answerTries = 3

// persist makes fn up to answerTries times while it fails transiently
// (call has waited out 429s already; ErrRejected would only fail again).
func (g *Gateway) persist(ctx context.Context, fn func() error) error {
	return retry.Tries(ctx, retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}, answerTries,
		func(err error) bool { return errors.Is(err, adapter.ErrRejected) }, fn)
}
