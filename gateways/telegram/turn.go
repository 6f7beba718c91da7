package telegram

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/turnrender"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/turn"
)

// turnTiming paces a rendered turn. Tests shorten it.
type turnTiming struct {
	// stream is the least time between two edits of a streaming answer.
	stream time.Duration
	// groupStream is stream in a group, whose posts Telegram limits to 20
	// a minute: at most 10 edits a minute leave the rest for tool lines,
	// approvals and the answer's other chunks.
	groupStream time.Duration
	// typing is how often "typing…" is renewed (Telegram shows it ~5 s).
	typing time.Duration
	// idle ends the renderer's goroutine when no event came for this long
	// and no tool is running, in case End is never called. A later event
	// starts it again.
	idle time.Duration
}

var defaultTiming = turnTiming{stream: time.Second, groupStream: 6 * time.Second, typing: 4 * time.Second, idle: time.Minute}

// placeholder is what a streaming message shows of an answer that is only
// white space.
const placeholder = "…"

var _ adapter.TurnRenderer = (*Gateway)(nil)

// RenderTurn returns the Events of one agent turn in a chat: the answer
// streams into a message threaded to replyTo (edited at most once per
// stream interval, plain text), then becomes formatted HTML when the step
// ends; tool calls show as one line each (none at quiet verbosity),
// approvals as a message with buttons. "typing…" shows while the turn runs.
// Everything goes to the forum topic of replyTo (see topic.go), and in a
// group the answer is edited less often (groupStream).
// turnrender keeps the order and the goroutine; this file and turnsteps.go
// make the Telegram calls.
//
// The returned value also has End(). Its goroutine stops at Final, at End,
// when ctx ends, or after a minute without events while no tool runs; the
// Hub should call End after every turn, above all after one that ended in
// an error (Final never comes then): End shows what streamed so far in its
// final form and waits for the goroutine.
func (g *Gateway) RenderTurn(ctx context.Context, chatID, replyTo string) turn.Events {
	chat, err := strconv.ParseInt(chatID, 10, 64)
	if err != nil {
		g.log.Warn("turn for an invalid chat id; nothing will be shown", logkey.Chat, chatID)
		return turnrender.Discard(errors.New("telegram: invalid chat id " + strconv.Quote(chatID)))
	}
	to, reply, ok := g.targetOf(chat, replyTo)
	if !ok {
		// Still a turn to show: unthreaded, where latch last answered.
		g.log.Warn("turn replying to an invalid message id; not threaded", logkey.Chat, chatID, "reply_to", replyTo)
		to = g.chatTarget(chat)
	}
	stream := g.timing.stream
	if isGroup(chat) {
		stream = max(stream, g.timing.groupStream)
	}
	d := &delivery{g: g, chatID: chatID, to: to, replyTo: reply.id, stream: stream, log: g.log.With(logkey.Chat, chatID)}
	return turnrender.Start(ctx, d, turnrender.Options{
		Typing:    g.timing.typing,
		Idle:      g.timing.idle,
		HideTools: g.cfg.Verbosity == VerbosityQuiet,
		Log:       d.log,
	})
}

// delivery makes a rendered turn's calls in one chat (turnrender.Delivery;
// a message is identified by its id).
type delivery struct {
	g       *Gateway
	chatID  string
	to      target        // the chat, and the topic of the owner's message
	replyTo int           // the owner's message the answer replies to; 0 none
	stream  time.Duration // the least time between two streaming edits
	log     *slog.Logger  // names the chat

	// lastStream is the last streaming send or edit of any answer of the
	// turn. Only answers touch it, under the turn's lock.
	lastStream time.Time
}

var _ turnrender.Delivery[int] = (*delivery)(nil)

func (d *delivery) NewAnswer() turnrender.Answer { return &answer{d: d} }

func (d *delivery) ToolLine(c turn.ToolCall, r *turn.ToolResult) string {
	return turn.ToolLine(c, r, d.g.cfg.Verbosity, turn.LineStyle{})
}

func (d *delivery) SendLine(ctx context.Context, line string) (int, error) {
	cfg := tgbotapi.NewMessage(d.to.chat, line)
	cfg.DisableWebPagePreview = true
	return d.g.sendMessage(ctx, d.to, cfg)
}

func (d *delivery) EditLine(ctx context.Context, id int, line string) error {
	edit := tgbotapi.NewEditMessageText(d.to.chat, id, line)
	edit.DisableWebPagePreview = true
	if _, err := d.g.post(ctx, d.to, libCall(edit), 0); err != nil && !notModified(err) {
		return err
	}
	return nil
}

// Approval sends the request with Approve / Always / Deny buttons.
func (d *delivery) Approval(ctx context.Context, a turn.Approval) error {
	return d.g.sendApproval(ctx, d.to, a)
}

func (d *delivery) File(ctx context.Context, f turn.File) error {
	return d.g.sendFile(ctx, d.to, f, d.replyTo)
}

func (d *delivery) Typing(ctx context.Context) { d.g.typingIn(ctx, d.to) }

// thread makes the message a reply to the owner's.
func (d *delivery) thread(c *tgbotapi.BaseChat) {
	if d.replyTo != 0 {
		c.ReplyToMessageID = d.replyTo
		c.AllowSendingWithoutReply = true
	}
}

func (d *delivery) failed(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		d.log.Warn(what, logkey.Err, err)
	}
}
