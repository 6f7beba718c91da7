package slack

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/gateways/internal/turnrender"
	"github.com/latchd/latch/turn"
)

// RenderTurn shows one agent turn in a conversation: the answer streams
// by chat.update (paced per conversation by EditInterval, within
// chat.update's Tier 3), cut into messages as Send would cut it; a tool
// call is a line that turns into ✓ or ✗; an approval request is a
// message with Block Kit buttons; files are uploaded.
func (g *Gateway) RenderTurn(ctx context.Context, chat, replyTo string) turn.Events {
	ch, err := g.channelOf(chat)
	if err != nil {
		g.log.Warn("turn for a conversation of another workspace; nothing will be shown")
		return turnrender.Discard(errors.New("slack: " + err.Error()))
	}
	g.markOwner(chat) // only the latched chat has turns
	d := &delivery{g: g, chat: chat, ch: ch, log: g.log.With("chat", chat)}
	if isTS(replyTo) {
		d.replyTo = replyTo
	}
	t := turnrender.Start(ctx, d, turnrender.Options{
		Typing:    time.Hour,
		Idle:      time.Minute,
		LineWait:  d.editDue,
		HideTools: g.cfg.Verbosity == turn.VerbosityQuiet,
		Log:       d.log,
	})
	return ended{t, d}
}

// ended is a rendered turn whose End also takes back the "working…"
// reaction.
type ended struct {
	*turnrender.Turn[string]
	d *delivery
}

func (e ended) End() {
	e.Turn.End()
	e.d.unreact()
}

// working is the reaction on the owner's message while latch works on it:
// Slack shows a bot no "typing…".
const working = "hourglass_flowing_sand"

// isTS reports whether s is a message timestamp ("1700000000.000100").
func isTS(s string) bool {
	sec, micro, ok := strings.Cut(s, ".")
	return ok && sec != "" && micro != "" && strings.Trim(sec+micro, "0123456789") == ""
}

// delivery makes a rendered turn's calls in one conversation; a message
// is identified by its ts.
type delivery struct {
	g        *Gateway
	chat, ch string
	replyTo  string // the owner's message, for the reaction; "" none
	log      *slog.Logger
	reacted  atomic.Bool
}

var _ turnrender.Delivery[string] = (*delivery)(nil)

func (d *delivery) NewAnswer() turnrender.Answer {
	return &turnrender.Streamed[string, string]{P: poster{d}, First: d.g.cfg.EditInterval}
}

func (d *delivery) ToolLine(c turn.ToolCall, r *turn.ToolResult) string {
	return turn.ToolLine(c, r, d.g.cfg.Verbosity, turn.LineStyle{Name: escape, Code: inlineCode})
}

func inlineCode(s string) string {
	for _, c := range s {
		if c == '`' || c == '\n' {
			return escape(s)
		}
	}
	return "`" + escape(s) + "`"
}

func (d *delivery) SendLine(ctx context.Context, line string) (string, error) {
	return d.g.post(ctx, d.ch, line, true, nil)
}

func (d *delivery) EditLine(ctx context.Context, ts, line string) error {
	d.edited()
	return d.g.update(ctx, d.ch, ts, line, true, nil)
}

// Approval sends the request with Approve / Always / Deny buttons, or the
// typed commands should the payloads not fit an action_id.
func (d *delivery) Approval(ctx context.Context, a turn.Approval) error {
	detail := a.Detail
	if detail == "" {
		detail = a.Summary
	}
	text := "🔐 Allow *" + escape(turn.Clip(a.Tool, 64)) + "*?"
	if detail != "" {
		shown, _ := turn.ClipMiddle(detail, maxSection-200)
		text += "\n```\n" + escape(shown) + "\n```"
	}
	var buttons []adapter.Button
	if turn.PayloadsFit(turn.ApprovalButtons, a.ID, maxActionID) {
		for _, b := range turn.ApprovalButtons {
			buttons = append(buttons, adapter.Button{Label: b.Label, Data: turn.Payload(b.Kind, a.ID)})
		}
	} else {
		text += "\n" + escape(turn.ApprovalCommands(a.ID))
	}
	parts := chunk(text, maxSection)
	text = parts[0]
	// Reliably: an approval that never shows is denied at the timeout.
	var ts string
	err := d.g.persist(ctx, func() (err error) {
		ts, err = d.g.post(ctx, d.ch, text, true, buttons)
		return err
	})
	if err == nil {
		d.g.remember(ts, text)
	}
	return err
}

func (d *delivery) File(ctx context.Context, f turn.File) error {
	return d.g.SendFile(ctx, d.chat, f, "")
}

// Typing marks the owner's message with the working reaction, once per
// turn (reactions.add; a message latch cannot react to shows nothing).
func (d *delivery) Typing(ctx context.Context) {
	if d.replyTo == "" || d.reacted.Swap(true) {
		return
	}
	err := d.g.call(ctx, func(ctx context.Context) error {
		return d.g.api.AddReactionContext(ctx, working, slack.NewRefToMessage(d.ch, d.replyTo))
	})
	if err != nil {
		d.failed(ctx, "showing that latch works failed", err)
	}
}

// unreact takes the working reaction back once the turn is shown.
func (d *delivery) unreact() {
	if !d.reacted.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	err := d.g.call(ctx, func(ctx context.Context) error {
		return d.g.api.RemoveReactionContext(ctx, working, slack.NewRefToMessage(d.ch, d.replyTo))
	})
	if err != nil {
		d.failed(ctx, "removing the working reaction failed", err)
	}
}

func (d *delivery) editDue() time.Duration {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	return max(time.Until(d.g.edits[d.ch].Add(d.g.cfg.EditInterval)), 0)
}

func (d *delivery) edited() {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	d.g.edits[d.ch] = time.Now()
}

// poster streams an answer in a conversation (turnrender.Streamed): cut
// as Send would cut it, by chat.update.
type poster struct{ d *delivery }

// undeliveredNotice follows an answer of which a part could not be
// delivered, so that the loss is not silent.
const undeliveredNotice = "⚠️ Part of this answer could not be delivered."

func (p poster) Render(text string) []string {
	rendered := toMrkdwn(text)
	if rendered == "" {
		return nil
	}
	return chunk(rendered, maxText)
}

func (p poster) Post(ctx context.Context, text string) (string, error) {
	return p.d.g.post(ctx, p.d.ch, text, true, nil)
}

func (p poster) Edit(ctx context.Context, ts, text string) error {
	return p.d.g.update(ctx, p.d.ch, ts, text, true, nil)
}

func (p poster) EditDue() time.Duration { return p.d.editDue() }
func (p poster) Edited()                { p.d.edited() }

func (p poster) Persist(ctx context.Context, fn func() error) error { return p.d.g.persist(ctx, fn) }

func (p poster) Notice(ctx context.Context) error {
	_, err := p.d.g.post(ctx, p.d.ch, escape(undeliveredNotice), false, nil)
	return err
}

func (p poster) Failed(ctx context.Context, what string, err error) { p.d.failed(ctx, what, err) }

func (d *delivery) failed(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		d.log.Warn(what, "err", err)
	}
}

// answerTries bounds the tries of a call that must not go missing.
const answerTries = 3

// persist makes fn up to answerTries times while it fails transiently
// (call has waited out 429s already; ErrRejected would only fail again).
// After a timeout Slack may have posted the message all the same, which
// then shows twice: a missing part of an answer is the worse outcome.
func (g *Gateway) persist(ctx context.Context, fn func() error) error {
	return retry.Tries(ctx, retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}, answerTries,
		func(err error) bool { return errors.Is(err, adapter.ErrRejected) }, fn)
}
