package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/telegram/tgmd"
	"github.com/latchd/latch/turn"
)

const (
	// maxCallbackData is Telegram's limit on a button's payload, in bytes.
	maxCallbackData = 64
	// maxNotice is Telegram's limit on a callback answer's text.
	maxNotice = 200
	// maxApprovalTexts bounds the approval texts kept for AnswerCallback.
	maxApprovalTexts = 64
	// maxDetailRunes bounds what an approval request shows of a call:
	// 3,800 UTF-16 units even if every character took two, inside one
	// message's 4,096 with the rest of the request.
	maxDetailRunes = 1900
)

// msgKey identifies a message.
type msgKey struct {
	chat int64
	id   int
}

// approvalTexts remembers the HTML of the latest approval requests, oldest
// forgotten first. After a restart it is empty; AnswerCallback then only
// removes the buttons.
type approvalTexts struct {
	order []msgKey
	text  map[msgKey]string
}

func (g *Gateway) rememberApproval(k msgKey, html string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := &g.approvals
	if a.text == nil {
		a.text = map[msgKey]string{}
	}
	if len(a.order) == maxApprovalTexts {
		delete(a.text, a.order[0])
		a.order = a.order[1:]
	}
	a.order = append(a.order, k)
	a.text[k] = html
}

func (g *Gateway) approvalText(k msgKey) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.approvals.text[k]
	return t, ok
}

// approvalMessage is an approval request: the tool and what it would do,
// with Approve / Always / Deny buttons. Should the id make the payload too
// long for a button, the text commands stand in for the buttons.
func approvalMessage(chat int64, a turn.Approval) tgbotapi.MessageConfig {
	text := "🔐 Allow " + tgmd.Escape(a.Tool) + "?"
	detail := a.Detail
	if detail == "" {
		detail = a.Summary
	}
	if detail != "" {
		shown, left := turn.ClipMiddle(detail, maxDetailRunes)
		text += "\n<pre>" + tgmd.Escape(shown) + "</pre>"
		if left > 0 {
			text += "\n⚠️ " + tgmd.Escape(fmt.Sprintf("Too long to show whole: %d characters are left out above. Approving runs them too.", left))
		}
	}
	cfg := tgbotapi.NewMessage(chat, "")
	cfg.ParseMode = tgbotapi.ModeHTML
	cfg.DisableWebPagePreview = true
	if !turn.PayloadsFit(turn.ApprovalButtons, a.ID, maxCallbackData) {
		cfg.Text = text + "\n\n" + tgmd.Escape(turn.ApprovalCommands(a.ID))
		return cfg
	}
	cfg.Text = text
	var row []tgbotapi.InlineKeyboardButton
	for _, b := range turn.ApprovalButtons {
		row = append(row, tgbotapi.NewInlineKeyboardButtonData(b.Label, turn.Payload(b.Kind, a.ID)))
	}
	cfg.ReplyMarkup = tgbotapi.NewInlineKeyboardMarkup(row)
	return cfg
}

// sendApproval posts an approval request (reliably: without it the call
// waits for nothing and is denied at the approval timeout) and remembers
// its text.
func (g *Gateway) sendApproval(ctx context.Context, to target, a turn.Approval) error {
	cfg := approvalMessage(to.chat, a)
	m, err := g.messageOf(g.postReliably(ctx, to, sendCall(cfg, to.topic)))
	if badMarkup(err) {
		cfg.ParseMode, cfg.Text = "", tgmd.Visible(cfg.Text)
		m, err = g.messageOf(g.postReliably(ctx, to, sendCall(cfg, to.topic)))
	}
	if err != nil {
		return fmt.Errorf("telegram: send approval request: %w", err)
	}
	if cfg.ParseMode == tgbotapi.ModeHTML {
		g.rememberApproval(msgKey{to.chat, m.MessageID}, cfg.Text)
	}
	return nil
}

// AnswerCallback acknowledges a button press with notice (shown briefly by
// the user's client; "" for none). When resolved is not "", the message
// that carries the buttons is edited to show resolved under its text, and
// the edit removes the buttons. If latch no longer knows that message's
// text (it restarted since), only the buttons are removed.
func (g *Gateway) AnswerCallback(ctx context.Context, chatID string, cb adapter.Callback, notice, resolved string) error {
	var errs []error
	answer := tgbotapi.NewCallback(cb.ID, turn.Clip(notice, maxNotice))
	if _, err := g.request(ctx, answer); err != nil {
		errs = append(errs, fmt.Errorf("telegram: answer callback: %w", err))
	}
	if resolved == "" {
		return errors.Join(errs...)
	}
	chat, err := strconv.ParseInt(chatID, 10, 64)
	ref, ok := parseRef(cb.MessageID)
	if err != nil || !ok {
		return errors.Join(append(errs, fmt.Errorf("telegram: invalid chat %q or message id %q", chatID, cb.MessageID))...)
	}
	if err := g.resolve(ctx, target{chat, ref.topic}, ref.id, resolved); err != nil {
		errs = append(errs, fmt.Errorf("telegram: mark the request %s: %w", resolved, err))
	}
	return errors.Join(errs...)
}

// resolve edits a message with buttons to show how it was answered,
// removing the buttons.
func (g *Gateway) resolve(ctx context.Context, to target, id int, resolved string) error {
	var err error
	if text, ok := g.approvalText(msgKey{to.chat, id}); ok {
		// An edit of the text without reply_markup drops the keyboard.
		edit := tgbotapi.NewEditMessageText(to.chat, id, text+"\n\n"+tgmd.Escape(resolved))
		edit.ParseMode = tgbotapi.ModeHTML
		edit.DisableWebPagePreview = true
		_, err = g.post(ctx, to, libCall(edit), 0)
	} else {
		empty := tgbotapi.InlineKeyboardMarkup{InlineKeyboard: [][]tgbotapi.InlineKeyboardButton{}}
		_, err = g.post(ctx, to, libCall(tgbotapi.NewEditMessageReplyMarkup(to.chat, id, empty)), 0)
	}
	if notModified(err) {
		return nil
	}
	return err
}

// clipUnits cuts s to at most n UTF-16 units.
func clipUnits(s string, n int) string {
	if utf16Len(s) <= n {
		return s
	}
	used := 0
	for i, r := range s {
		if used+utf16Len(string(r)) > n-1 {
			return s[:i] + "…"
		}
		used += utf16Len(string(r))
	}
	return s
}
