package telegram

import (
	"context"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/internal/turnrender"
	"github.com/latchd/latch/gateways/telegram/tgmd"
	"github.com/latchd/latch/logkey"
)

// answer shows one answer of a turn (turnrender.Answer). An answer that is
// complete within a stream interval of its first text is sent once, as
// formatted HTML. A longer one streams: a message with the text so far, as
// plain text, a stream interval after its first text, edited at most once
// per interval; once complete, the first chunk of the HTML replaces the
// streaming message and the others follow as new messages.
type answer struct {
	d     *delivery
	first time.Time // when the answer first had text
	msgID int       // the streaming message; 0 not sent, -1 sending failed
	shown string    // what msgID shows now
	done  bool      // shown in its final form
}

func (a *answer) Done() bool { return a.done }

// Shown: a streaming answer counts as shown once its message exists.
func (a *answer) Shown(md string) bool { return a.msgID != 0 || strings.TrimSpace(md) == "" }

func (a *answer) Next(md string, frozen bool) (turnrender.Step, time.Duration) {
	switch {
	case frozen:
		return a.deliverStep(md), 0
	case a.msgID == 0:
		if strings.TrimSpace(md) == "" {
			return nil, 0 // no message for white space alone
		}
		if a.first.IsZero() {
			a.first = time.Now()
		}
		if d := time.Until(a.first.Add(a.d.stream)); d > 0 {
			return nil, d // the answer may be complete by then
		}
		return a.streamStep(md, true), 0
	case a.msgID > 0 && preview(md) != a.shown:
		if d := time.Until(a.d.lastStream.Add(a.d.stream)); d > 0 {
			return nil, d
		}
		return a.streamStep(md, false), 0
	}
	return nil, 0
}

// preview is a streaming answer as plain text within one message.
func preview(md string) string {
	if strings.TrimSpace(md) == "" {
		return placeholder
	}
	return clipUnits(md, tgmd.MaxUnits-2)
}

// streamStep sends the streaming message (first) or edits it.
func (a *answer) streamStep(md string, first bool) turnrender.Step {
	d := a.d
	text := preview(md)
	id := a.msgID
	d.lastStream = time.Now()
	return func(ctx context.Context) func() {
		var err error
		if first {
			cfg := tgbotapi.NewMessage(d.to.chat, text)
			d.thread(&cfg.BaseChat)
			cfg.DisableWebPagePreview = true
			id, err = d.g.sendMessage(ctx, d.to, cfg)
		} else {
			edit := tgbotapi.NewEditMessageText(d.to.chat, id, text)
			edit.DisableWebPagePreview = true
			_, err = d.g.post(ctx, d.to, libCall(edit), 0)
		}
		return func() {
			d.lastStream = time.Now()
			switch {
			case err == nil || notModified(err):
				a.msgID, a.shown = id, text
			case first:
				d.failed(ctx, "sending the streaming answer failed", err)
				a.msgID = -1
			default:
				// Keep streaming into it: a later edit may work.
				d.failed(ctx, "editing the streaming answer failed", err)
				a.shown = text
			}
		}
	}
}

// lostNotice stands in for a part of an answer that could not be
// delivered, so that the owner knows the answer has a hole in it.
const lostNotice = "⚠ part of this answer could not be delivered"

// deliverStep shows a complete answer as formatted HTML: the first chunk
// replaces the streaming message, the others follow as new messages. Each
// is tried again after a transient failure (postReliably); a chunk that
// still fails is followed by the rest, then by lostNotice.
func (a *answer) deliverStep(md string) turnrender.Step {
	d, id := a.d, a.msgID
	return func(ctx context.Context) func() {
		chunks := htmlChunks(md)
		lost := false
		for i, c := range chunks {
			if i == 0 && id > 0 {
				if err := d.editHTML(ctx, id, c); err == nil {
					continue
				}
			}
			reply := i == 0
			if err := d.sendHTML(ctx, c, reply); err != nil {
				d.failed(ctx, "sending the answer failed", err)
				lost = true
			}
		}
		if lost && ctx.Err() == nil {
			d.noticeLost(ctx)
		}
		return func() { a.done = true }
	}
}

// noticeLost posts lostNotice, as a reply to the owner's message. It is
// best effort: Telegram may still be failing.
func (d *delivery) noticeLost(ctx context.Context) {
	cfg := tgbotapi.NewMessage(d.to.chat, lostNotice)
	d.thread(&cfg.BaseChat)
	if _, err := d.g.sendReliably(ctx, d.to, cfg); err != nil {
		d.failed(ctx, "sending the notice of a lost part of the answer failed", err)
	}
}

// htmlChunks renders Markdown and cuts it into messages, leaving out blank
// ones.
func htmlChunks(md string) []string {
	var out []string
	for _, c := range tgmd.Chunk(tgmd.Render(md), tgmd.MaxUnits) {
		if strings.TrimSpace(tgmd.Visible(c)) != "" {
			out = append(out, c)
		}
	}
	return out
}

// editHTML edits a message to an HTML chunk (postReliably), falling back
// to its plain text if Telegram cannot parse it.
func (d *delivery) editHTML(ctx context.Context, id int, chunk string) error {
	edit := tgbotapi.NewEditMessageText(d.to.chat, id, chunk)
	edit.ParseMode = tgbotapi.ModeHTML
	edit.DisableWebPagePreview = true
	_, err := d.g.postReliably(ctx, d.to, libCall(edit))
	if badMarkup(err) {
		d.g.log.Warn("Telegram could not parse the answer's HTML; showing it as plain text", logkey.Err, err)
		edit.ParseMode, edit.Text = "", tgmd.Visible(chunk)
		_, err = d.g.postReliably(ctx, d.to, libCall(edit))
	}
	if err != nil && !notModified(err) {
		d.failed(ctx, "editing the answer failed; sending it anew", err)
		return err
	}
	return nil
}

// sendHTML sends an HTML chunk as a new message (postReliably), as plain
// text if Telegram cannot parse it.
func (d *delivery) sendHTML(ctx context.Context, chunk string, reply bool) error {
	cfg := tgbotapi.NewMessage(d.to.chat, chunk)
	cfg.ParseMode = tgbotapi.ModeHTML
	cfg.DisableWebPagePreview = true
	if reply {
		d.thread(&cfg.BaseChat)
	}
	_, err := d.g.sendReliably(ctx, d.to, cfg)
	if badMarkup(err) {
		d.g.log.Warn("Telegram could not parse the answer's HTML; sending it as plain text", logkey.Err, err)
		cfg.ParseMode, cfg.Text = "", tgmd.Visible(chunk)
		_, err = d.g.sendReliably(ctx, d.to, cfg)
	}
	return err
}
