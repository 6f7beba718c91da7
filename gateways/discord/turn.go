package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/internal/turnrender"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/turn"
)

// turnTiming paces a rendered turn. Tests shorten it. (Edits are paced
// per channel by the gateway's editPacer.)
type turnTiming struct {
	// typing is how often "typing…" is renewed (Discord shows it ten
	// seconds, or until the bot sends a message).
	typing time.Duration
	// idle ends the renderer's goroutine when no event came for this long
	// and no tool is running, in case End is never called. A later event
	// starts it again.
	idle time.Duration
}

var defaultTiming = turnTiming{typing: 8 * time.Second, idle: time.Minute}

const (
	// maxOutcome is the room an approval request leaves in its message for
	// the outcome AnswerCallback appends ("✓ approved for this session"),
	// so that appending it never clips the request.
	maxOutcome = 64
	// maxToolName bounds the tool's name in an approval request.
	maxToolName = 64
)

// buttonStyles colour the buttons by what they do.
var buttonStyles = map[turn.Kind]discordgo.ButtonStyle{
	turn.KindApprove: discordgo.SuccessButton,
	turn.KindAlways:  discordgo.PrimaryButton,
	turn.KindDeny:    discordgo.DangerButton,
}

// RenderTurn returns the Events of one agent turn in a channel. The answer
// streams: its first text is sent at once as a reply to replyTo, then the
// message is edited as text comes in (edits of a channel at most one per
// edit interval, so pieces that arrive meanwhile go out together). Past
// Discord's 2000 characters the message is completed where Send would cut
// it and the answer goes on in a new one, so that when the step ends the
// messages are exactly those Send would have sent. Each tool call is a
// line that turns into ✓ or ✗ when it ends, an approval request is a
// message with Approve / Always / Deny buttons, files are uploaded. A
// message or final edit of the answer that fails transiently (a 5xx, no
// answer) is made up to three times; a part that still cannot be
// delivered is followed by a notice saying so.
// "typing…" shows while the turn runs and no approval waits. No message
// or edit pings anyone or unfurls a link.
//
// turnrender keeps the order and the goroutine, which makes every call to
// Discord (this file and turnsteps.go say how), so a slow or rate-limited
// channel never holds up the agent. The returned value also has End(),
// which the Hub calls after the turn: it shows what streamed so far in its
// final form (a turn that ended in an error or was stopped has no Final)
// and waits for the goroutine. The goroutine also stops when ctx ends, and
// after a minute without events while no tool runs.
func (g *Gateway) RenderTurn(ctx context.Context, chatID, replyTo string) turn.Events {
	if _, ok := snowflake(chatID); !ok {
		g.log.Warn("turn for an invalid channel id; nothing will be shown", logkey.Chat, chatID)
		return turnrender.Discard(errors.New("discord: invalid channel id " + chatID))
	}
	g.markOwner(chatID) // only the latched chat has turns
	d := &delivery{g: g, chatID: chatID, log: g.log.With(logkey.Chat, chatID)}
	if _, ok := snowflake(replyTo); ok {
		d.replyTo = replyTo
	}
	return turnrender.Start(ctx, d, turnrender.Options{
		Typing:    g.timing.typing,
		Idle:      g.timing.idle,
		LineWait:  d.editDue,
		HideTools: g.cfg.Verbosity == turn.VerbosityQuiet,
		Log:       d.log,
	})
}

// delivery makes a rendered turn's calls in one channel
// (turnrender.Delivery; a message is identified by its id).
type delivery struct {
	g       *Gateway
	chatID  string
	replyTo string       // the owner's message the answer replies to; "" none
	log     *slog.Logger // names the channel
}

var _ turnrender.Delivery[string] = (*delivery)(nil)

func (d *delivery) NewAnswer() turnrender.Answer { return &answer{d: d} }

// ToolLine escapes the tool's name and shows the summary and the error
// as inline code.
func (d *delivery) ToolLine(c turn.ToolCall, r *turn.ToolResult) string {
	return turn.ToolLine(c, r, d.g.cfg.Verbosity, turn.LineStyle{Name: escapeMarkdown, Code: inlineCode})
}

func (d *delivery) SendLine(ctx context.Context, line string) (string, error) {
	return d.post(ctx, newMessage(line))
}

func (d *delivery) EditLine(ctx context.Context, id, line string) error {
	return d.editMessage(ctx, id, line, nil)
}

// Approval sends the request with Approve / Always / Deny buttons; should
// the id make a custom_id too long, the text commands stand in for them.
func (d *delivery) Approval(ctx context.Context, a turn.Approval) error {
	var commands string
	if !turn.PayloadsFit(turn.ApprovalButtons, a.ID, maxCustomID) {
		commands = "\n" + turn.ApprovalCommands(a.ID)
	}
	m := newMessage(approvalText(a, commands))
	if commands == "" {
		var row []discordgo.MessageComponent
		for _, b := range turn.ApprovalButtons {
			row = append(row, discordgo.Button{Label: b.Label, Style: buttonStyles[b.Kind], CustomID: turn.Payload(b.Kind, a.ID)})
		}
		m.Components = []discordgo.MessageComponent{discordgo.ActionsRow{Components: row}}
	}
	// Reliably: an approval that never shows is denied at the timeout.
	var id string
	err := d.persist(ctx, func() (err error) {
		id, err = d.post(ctx, m)
		return err
	})
	if err == nil {
		d.g.texts.remember(id, m.Content)
	}
	return err
}

// approvalText is an approval request: the tool, the call's detail in a
// code block, and commands (the text commands, or ""). The detail is
// clipped in the middle to what fits once escaped — escapeFences can make
// a run of backticks two thirds longer — in one message with room left for
// the outcome; a note under the block says how much is left out.
func approvalText(a turn.Approval, commands string) string {
	text := "🔐 Allow **" + escapeMarkdown(turn.Clip(a.Tool, maxToolName)) + "**?"
	detail := a.Detail
	if detail == "" {
		detail = a.Summary
	}
	if detail == "" {
		return text + commands
	}
	const open, closing = "\n" + fence + "\n", "\n" + fence
	room := maxContent - maxOutcome - utf8.RuneCountInString(text+open+closing+commands)
	if esc := escapeFences(detail); utf8.RuneCountInString(esc) <= room {
		return text + open + esc + closing + commands
	}
	// The note is measured as if nothing were shown: left is never more.
	room -= utf8.RuneCountInString(leftOutNote(utf8.RuneCountInString(detail)))
	shown, left := clipEscaped(detail, room)
	if shown == "" {
		return text + leftOutNote(left) + commands
	}
	return text + open + shown + closing + leftOutNote(left) + commands
}

// clipEscaped returns the longest middle-clip of s (turn.ClipMiddle)
// that is at most room code points once escaped, escaped, and how many
// code points of s it leaves out; "" and all of them if none fits.
func clipEscaped(s string, room int) (shown string, left int) {
	left = utf8.RuneCountInString(s)
	for lo, hi := 0, room; lo <= hi; {
		n := lo + (hi-lo)/2
		clipped, l := turn.ClipMiddle(s, n)
		if esc := escapeFences(clipped); utf8.RuneCountInString(esc) <= room {
			shown, left, lo = esc, l, n+1
		} else {
			hi = n - 1
		}
	}
	return shown, left
}

func leftOutNote(left int) string {
	return fmt.Sprintf("\n⚠️ Too long to show whole: %d characters are left out above. Approving runs them too.", left)
}

// File uploads a file.
func (d *delivery) File(ctx context.Context, f turn.File) error {
	return d.g.SendFile(ctx, d.chatID, f, d.replyTo)
}

func (d *delivery) Typing(ctx context.Context) { d.g.Typing(ctx, d.chatID) }

// editDue is how long until an edit in the channel may start.
func (d *delivery) editDue() time.Duration { return d.g.edits.due(d.chatID) }

func (d *delivery) post(ctx context.Context, m *discordgo.MessageSend) (string, error) {
	s, err := d.g.started()
	if err != nil {
		return "", err
	}
	sent, err := d.g.post(ctx, s, d.chatID, m)
	if err != nil {
		return "", err
	}
	return sent.ID, nil
}

func (d *delivery) editMessage(ctx context.Context, id, text string, rows *[]discordgo.MessageComponent) error {
	s, err := d.g.started()
	if err != nil {
		return err
	}
	return d.g.edit(ctx, s, d.chatID, id, text, rows)
}

func (d *delivery) deleteMessage(ctx context.Context, id string) error {
	s, err := d.g.started()
	if err != nil {
		return err
	}
	return d.g.call(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) error {
		return s.ChannelMessageDelete(d.chatID, id, opts...)
	})
}

func (d *delivery) failed(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		d.log.Warn(what, logkey.Err, err)
	}
}
