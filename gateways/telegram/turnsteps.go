package telegram

import (
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/tgmd"
)

// The steps of a rendered turn: each returns the call to make, run by the
// turn's goroutine without the lock, recording the outcome under it.

// preview is a streaming answer as plain text within one message.
func preview(md string) string {
	if strings.TrimSpace(md) == "" {
		return placeholder
	}
	return clipUnits(md, tgmd.MaxUnits-2)
}

// streamStep sends the streaming message (first) or edits it.
func (t *turn) streamStep(it *item, first bool) func() {
	text := placeholder
	if !first {
		text = preview(it.text)
	}
	id := it.msgID
	t.lastStream = time.Now()
	return func() {
		var err error
		if first {
			cfg := tgbotapi.NewMessage(t.chat, text)
			t.thread(&cfg.BaseChat)
			cfg.DisableWebPagePreview = true
			id, err = t.g.sendMessage(t.ctx, cfg)
		} else {
			edit := tgbotapi.NewEditMessageText(t.chat, id, text)
			edit.DisableWebPagePreview = true
			_, err = t.g.post(t.ctx, t.chat, edit, 0)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.lastStream = time.Now()
		switch {
		case err == nil || notModified(err):
			it.msgID, it.shown = id, text
		case first:
			t.failed("sending the streaming answer failed", err)
			it.msgID = -1
		default:
			// Keep streaming into it: a later edit may work.
			t.failed("editing the streaming answer failed", err)
			it.shown = text
		}
	}
}

// thread makes the message a reply to the user's.
func (t *turn) thread(c *tgbotapi.BaseChat) {
	if t.replyTo != 0 {
		c.ReplyToMessageID = t.replyTo
		c.AllowSendingWithoutReply = true
	}
}

func (t *turn) failed(what string, err error) {
	if t.ctx.Err() == nil {
		t.g.log.Warn(what, "chat_id", t.chatID, "err", err)
	}
}

// deliverStep shows a complete answer as formatted HTML: the first chunk
// replaces the streaming message, the others follow as new messages.
func (t *turn) deliverStep(it *item) func() {
	md, id := it.text, it.msgID
	return func() {
		chunks := htmlChunks(md)
		for i, c := range chunks {
			if i == 0 && id > 0 {
				if err := t.editHTML(id, c); err == nil {
					continue
				}
			}
			reply := i == 0
			if err := t.sendHTML(c, reply); err != nil {
				t.failed("sending the answer failed", err)
			}
		}
		t.mu.Lock()
		it.done = true
		t.mu.Unlock()
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

// editHTML edits a message to an HTML chunk, falling back to its plain
// text if Telegram cannot parse it.
func (t *turn) editHTML(id int, chunk string) error {
	edit := tgbotapi.NewEditMessageText(t.chat, id, chunk)
	edit.ParseMode = tgbotapi.ModeHTML
	edit.DisableWebPagePreview = true
	_, err := t.g.post(t.ctx, t.chat, edit, 0)
	if badMarkup(err) {
		t.g.log.Warn("Telegram could not parse the answer's HTML; showing it as plain text", "err", err)
		edit.ParseMode, edit.Text = "", tgmd.Visible(chunk)
		_, err = t.g.post(t.ctx, t.chat, edit, 0)
	}
	if err != nil && !notModified(err) {
		t.failed("editing the answer failed; sending it anew", err)
		return err
	}
	return nil
}

// sendHTML sends an HTML chunk as a new message, as plain text if Telegram
// cannot parse it.
func (t *turn) sendHTML(chunk string, reply bool) error {
	cfg := tgbotapi.NewMessage(t.chat, chunk)
	cfg.ParseMode = tgbotapi.ModeHTML
	cfg.DisableWebPagePreview = true
	if reply {
		t.thread(&cfg.BaseChat)
	}
	_, err := t.g.sendMessage(t.ctx, cfg)
	if badMarkup(err) {
		t.g.log.Warn("Telegram could not parse the answer's HTML; sending it as plain text", "err", err)
		cfg.ParseMode, cfg.Text = "", tgmd.Visible(chunk)
		_, err = t.g.sendMessage(t.ctx, cfg)
	}
	return err
}

// toolStep sends or edits a tool line.
func (t *turn) toolStep(it *item, line string) func() {
	id := it.msgID
	return func() {
		var err error
		if id == 0 {
			cfg := tgbotapi.NewMessage(t.chat, line)
			cfg.DisableWebPagePreview = true
			id, err = t.g.sendMessage(t.ctx, cfg)
		} else {
			edit := tgbotapi.NewEditMessageText(t.chat, id, line)
			edit.DisableWebPagePreview = true
			_, err = t.g.post(t.ctx, t.chat, edit, 0)
			if notModified(err) {
				err = nil
			}
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if err != nil {
			t.failed("showing a tool call failed", err)
			if id == 0 {
				id = -1
			}
			it.done = it.result != nil || id == -1
		}
		it.msgID, it.shown = id, line
	}
}

// sendApprovalStep sends an approval request.
func (t *turn) sendApprovalStep(it *item) func() {
	a := it.approval
	return func() {
		if err := t.g.sendApproval(t.ctx, t.chat, a); err != nil {
			t.failed("sending an approval request failed", err)
		}
		t.mu.Lock()
		it.done = true
		t.mu.Unlock()
	}
}
