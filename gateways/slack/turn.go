package slack

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"github.com/latchd/latch/gateways"
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

func (d *delivery) NewAnswer() turnrender.Answer { return &answer{d: d} }

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
	var buttons []gateways.Button
	if turn.PayloadsFit(turn.ApprovalButtons, a.ID, maxActionID) {
		for _, b := range turn.ApprovalButtons {
			buttons = append(buttons, gateways.Button{Label: b.Label, Data: turn.Payload(b.Kind, a.ID)})
		}
	} else {
		text += "\n" + escape(turn.ApprovalCommands(a.ID))
	}
	parts := chunk(text, maxSection)
	text = parts[0]
	ts, err := d.g.post(ctx, d.ch, text, true, buttons)
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

// answer shows one answer as the messages Send would cut it into,
// streamed by edits.
type answer struct {
	d     *delivery
	first time.Time
	msgs  []shown
	done  bool
}

type shown struct{ ts, text string }

func (a *answer) Done() bool        { return a.done }
func (a *answer) Shown(string) bool { return true }

func (a *answer) Next(text string, frozen bool) (turnrender.Step, time.Duration) {
	if a.done {
		return nil, 0
	}
	rendered := toMrkdwn(text)
	if rendered == "" {
		if frozen {
			a.done = true
		}
		return nil, 0
	}
	if !frozen && len(a.msgs) == 0 {
		if a.first.IsZero() {
			a.first = time.Now()
		}
		if wait := time.Until(a.first.Add(a.d.g.cfg.EditInterval)); wait > 0 {
			return nil, wait // the answer may be complete by then: sent once
		}
	}
	want := chunk(rendered, maxText)
	for i, w := range want {
		if i == len(a.msgs) {
			return a.sendStep(w), 0
		}
		if a.msgs[i].text == w {
			continue
		}
		if wait := a.d.editDue(); wait > 0 {
			return nil, wait
		}
		return a.editStep(i, w), 0
	}
	if frozen {
		a.done = true
	}
	return nil, 0
}

func (a *answer) sendStep(text string) turnrender.Step {
	return func(ctx context.Context) func() {
		ts, err := a.d.g.post(ctx, a.d.ch, text, true, nil)
		return func() {
			if err != nil {
				a.d.failed(ctx, "sending the answer failed", err)
				a.done = true
				return
			}
			a.msgs = append(a.msgs, shown{ts, text})
		}
	}
}

func (a *answer) editStep(i int, text string) turnrender.Step {
	ts := a.msgs[i].ts
	return func(ctx context.Context) func() {
		a.d.edited()
		err := a.d.g.update(ctx, a.d.ch, ts, text, true, nil)
		return func() {
			if err != nil {
				a.d.failed(ctx, "editing the answer failed", err)
			}
			a.msgs[i].text = text // not tried again: the next edit supersedes it
		}
	}
}

func (d *delivery) failed(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		d.log.Warn(what, "err", err)
	}
}
