package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/telegram/tgmd"
	"github.com/latchd/latch/logkey"
)

const (
	// maxMessageUnits is Telegram's limit on a message, in UTF-16 code
	// units. latch counts its own markup too, to stay clear of it.
	maxMessageUnits = 4096
	preOpen         = "<pre>"
	preClose        = "</pre>"
	// maxSendAttempts bounds retries of a message Telegram rate-limited.
	maxSendAttempts = 5
)

// Send delivers r to a chat, split into as many messages as Telegram's limit
// needs, and returns the id of the last one. Plain text goes without a parse
// mode, so nothing in it is interpreted; a Pre reply is escaped into HTML
// <pre> blocks. ReplyTo threads the first message; every message goes to
// the forum topic of the message it answers, or without ReplyTo to the
// topic latch last answered in — and should Telegram refuse that topic,
// to the spares placementOf names (see topic.go).
func (g *Gateway) Send(ctx context.Context, chatID string, r adapter.Reply) (string, error) {
	chat, err := strconv.ParseInt(chatID, 10, 64)
	if err != nil {
		return "", fmt.Errorf("telegram: invalid chat id %q", chatID)
	}
	p, reply, ok := g.placementOf(chat, r.ReplyTo)
	if !ok {
		return "", fmt.Errorf("telegram: invalid reply-to message id %q", r.ReplyTo)
	}
	chunks := render(r)
	if len(chunks) == 0 {
		return "", ErrEmptyReply
	}
	var last int
	for i, text := range chunks {
		threadTo := 0
		if i == 0 {
			threadTo = reply.id
		}
		var buttons []adapter.Button
		if i == len(chunks)-1 {
			buttons = r.Buttons
		}
		if last, err = g.sendChunk(ctx, &p, text, r.Pre || r.Markdown, threadTo, buttons); err != nil {
			return "", fmt.Errorf("telegram: send message %d of %d: %w", i+1, len(chunks), rejected(err))
		}
	}
	if p.moved {
		// Where it landed is where latch last answered.
		g.setTopic(p.to)
	}
	return msgRef{id: last, topic: p.to.topic}.String(), nil
}

// sendChunk sends one message of a reply to p.to, threaded to the message
// reply (0: none). Reliably: a !command's output or a notice that meets a
// passing 5xx or a dropped connection would otherwise be lost, or lose its
// middle. Should Telegram refuse the topic, it goes to p's next spare,
// unthreaded: the message it answers is in the topic refused.
func (g *Gateway) sendChunk(ctx context.Context, p *placement, text string, html bool, reply int, buttons []adapter.Button) (int, error) {
	for {
		cfg := tgbotapi.NewMessage(p.to.chat, text)
		// Previews make Telegram fetch any URL in the text, which would let
		// a manipulated agent exfiltrate data without a click.
		cfg.DisableWebPagePreview = true
		if html {
			cfg.ParseMode = tgbotapi.ModeHTML
		}
		if kb, ok := keyboard(buttons); ok {
			cfg.ReplyMarkup = kb
		}
		if reply != 0 && !p.moved {
			cfg.ReplyToMessageID = reply
			cfg.AllowSendingWithoutReply = true
		}
		id, err := g.sendReliably(ctx, p.to, cfg)
		refused := p.to
		if err == nil || !p.move(err) {
			return id, err
		}
		g.log.Info("Telegram refused the forum topic; posting in another",
			logkey.Chat, refused.chat, "topic", refused.topic, "instead", p.to.topic, logkey.Err, err)
	}
}

// keyboard is one row of inline buttons; a payload too long for Telegram
// is left out (the Hub's texts carry typed commands for every button).
func keyboard(buttons []adapter.Button) (tgbotapi.InlineKeyboardMarkup, bool) {
	var row []tgbotapi.InlineKeyboardButton
	for _, b := range buttons {
		if len(b.Data) > 0 && len(b.Data) <= maxCallbackData {
			row = append(row, tgbotapi.NewInlineKeyboardButtonData(b.Label, b.Data))
		}
	}
	return tgbotapi.NewInlineKeyboardMarkup(row), len(row) > 0
}

// rejected marks err adapter.ErrRejected when Telegram refused the
// message itself (a 4xx other than 429).
func rejected(err error) error {
	var apiErr *tgbotapi.Error
	if errors.As(err, &apiErr) && apiErr.Code >= 400 && apiErr.Code < 500 && apiErr.Code != http.StatusTooManyRequests {
		return adapter.Rejected(err)
	}
	return err
}

// sendMessage sends one message to a target through post and returns its
// id.
func (g *Gateway) sendMessage(ctx context.Context, to target, cfg tgbotapi.MessageConfig) (int, error) {
	m, err := g.postMessage(ctx, to, sendCall(cfg, to.topic), 0)
	return m.MessageID, err
}

// sendReliably sends one message through postReliably and returns its id.
func (g *Gateway) sendReliably(ctx context.Context, to target, cfg tgbotapi.MessageConfig) (int, error) {
	m, err := g.messageOf(g.postReliably(ctx, to, sendCall(cfg, to.topic)))
	return m.MessageID, err
}

// Typing shows "typing…" in a chat, in the topic latch last answered in,
// unless the last request for it still shows (typing.Gate). It is a
// courtesy: errors are logged at debug and otherwise ignored.
func (g *Gateway) Typing(ctx context.Context, chatID string) {
	chat, err := strconv.ParseInt(chatID, 10, 64)
	if err != nil {
		g.log.Debug("typing: invalid chat id", logkey.Chat, chatID)
		return
	}
	g.typingIn(ctx, g.chatTarget(chat))
}

// typingIn is Typing in a target.
func (g *Gateway) typingIn(ctx context.Context, to target) {
	g.typing.Show(ctx, to.key(), func(ctx context.Context) {
		b, err := g.bot(ctx)
		if err == nil {
			_, err = actionCall(to, tgbotapi.ChatTyping).do(b)
		}
		if err != nil {
			g.log.Debug("sendChatAction failed; ignored", logkey.Err, g.scrub(err))
		}
	})
}

// render splits a reply into message texts of at most maxMessageUnits UTF-16
// units each, markup included. Chunks Telegram would reject as empty (only
// white space) are left out.
func render(r adapter.Reply) []string {
	text := strings.ToValidUTF8(r.Text, "\uFFFD")
	var chunks []string
	if r.Markdown && !r.Pre {
		return slices.DeleteFunc(tgmd.Chunk(tgmd.Render(text), maxMessageUnits), func(c string) bool {
			return strings.TrimSpace(c) == ""
		})
	}
	if r.Pre {
		budget := maxMessageUnits - utf16Len(preOpen) - utf16Len(preClose)
		chunks = split(text, budget, escapedLen)
	} else {
		chunks = split(text, maxMessageUnits, utf16.RuneLen)
	}
	out := chunks[:0]
	for _, c := range chunks {
		if strings.TrimSpace(c) == "" {
			continue
		}
		if r.Pre {
			c = preOpen + escapeHTML(c) + preClose
		}
		out = append(out, c)
	}
	return out
}

// split cuts text into chunks whose cost is at most budget: at line ends
// where it can, else between runes. Concatenated, the chunks give text back.
func split(text string, budget int, cost func(rune) int) []string {
	var chunks []string
	var cur strings.Builder
	used := 0
	flush := func() {
		if cur.Len() > 0 {
			chunks = append(chunks, cur.String())
			cur.Reset()
			used = 0
		}
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		n := 0
		for _, r := range line {
			n += cost(r)
		}
		if used+n > budget {
			flush()
		}
		if n <= budget {
			cur.WriteString(line)
			used += n
			continue
		}
		for _, r := range line {
			if c := cost(r); used+c > budget {
				flush()
			}
			cur.WriteRune(r)
			used += cost(r)
		}
	}
	flush()
	return chunks
}

// escapedLen is the UTF-16 length of r after escapeHTML.
func escapedLen(r rune) int {
	switch r {
	case '<', '>':
		return len("&lt;")
	case '&':
		return len("&amp;")
	}
	return utf16.RuneLen(r)
}

// escapeHTML escapes the three characters Telegram's HTML mode reserves.
func escapeHTML(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(s)
}
