package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/turn"
)

// Slack's limits latch relies on.
const (
	// maxText bounds a message's text: "limit the number of characters in
	// the text field to 4,000 characters"
	// (https://api.slack.com/methods/chat.postMessage#truncating).
	maxText = 4000
	// maxSection bounds a section block's text, which carries a message
	// with buttons (https://api.slack.com/reference/block-kit/blocks#section).
	maxSection = 3000
	// maxActionID bounds a button's action_id, which carries its payload
	// (https://api.slack.com/reference/block-kit/block-elements#button).
	maxActionID = 255
	// maxButtonText bounds a button's label (same source).
	maxButtonText = 75
	// maxRateWaits bounds the 429s one call waits out; maxRetryAfter caps
	// one wait.
	maxRateWaits  = 3
	maxRetryAfter = time.Minute
)

// Send posts a reply: plain text escaped, with Slack's formatting off; the
// Hub's own Markdown as mrkdwn; cut into messages within maxText (and the
// last within maxSection when it carries buttons). It returns the last
// message's ts.
func (g *Gateway) Send(ctx context.Context, chat string, r adapter.Reply) (string, error) {
	ch, err := g.channelOf(chat)
	if err != nil {
		return "", err
	}
	if r.Paired {
		g.markOwner(chat)
	}
	limit := maxText
	if len(r.Buttons) > 0 {
		limit = maxSection
	}
	parts := chunk(renderReply(r), limit)
	var ts string
	for i, p := range parts {
		var buttons []adapter.Button
		if i == len(parts)-1 {
			buttons = r.Buttons
		}
		if ts, err = g.post(ctx, ch, p, r.Markdown || r.Pre, buttons); err != nil {
			return "", err
		}
	}
	if len(r.Buttons) > 0 {
		g.remember(ts, parts[len(parts)-1])
	}
	return ts, nil
}

// renderReply is a reply's mrkdwn.
func renderReply(r adapter.Reply) string {
	switch {
	case r.Pre:
		return "```\n" + escape(r.Text) + "\n```"
	case r.Markdown:
		return toMrkdwn(r.Text)
	}
	return escape(r.Text)
}

// msgOptions: text as given, no unfurled links, mrkdwn only when set.
func msgOptions(text string, mrkdwn bool, buttons []adapter.Button) []slack.MsgOption {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionDisableLinkUnfurl(),
		slack.MsgOptionDisableMediaUnfurl()}
	if !mrkdwn {
		opts = append(opts, slack.MsgOptionDisableMarkdown())
	}
	if len(buttons) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(buttonBlocks(text, buttons)...))
	} else {
		// chat.update keeps blocks unless told: none.
		opts = append(opts, slack.MsgOptionBlocks())
	}
	return opts
}

func buttonBlocks(text string, buttons []adapter.Button) []slack.Block {
	var els []slack.BlockElement
	for _, b := range buttons {
		id := b.Data
		if len(id) > maxActionID {
			continue
		}
		els = append(els, slack.NewButtonBlockElement(id, b.Data, slack.NewTextBlockObject(slack.PlainTextType, turn.Clip(b.Label, maxButtonText), false, false)))
	}
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil)}
	if len(els) > 0 {
		blocks = append(blocks, slack.NewActionBlock("latch", els...))
	}
	return blocks
}

func (g *Gateway) post(ctx context.Context, ch, text string, mrkdwn bool, buttons []adapter.Button) (string, error) {
	var ts string
	err := g.call(ctx, func(ctx context.Context) (err error) {
		_, ts, err = g.api.PostMessageContext(ctx, ch, msgOptions(text, mrkdwn, buttons)...)
		return err
	})
	return ts, err
}

func (g *Gateway) update(ctx context.Context, ch, ts, text string, mrkdwn bool, buttons []adapter.Button) error {
	return g.call(ctx, func(ctx context.Context) error {
		_, _, _, err := g.api.UpdateMessageContext(ctx, ch, ts, msgOptions(text, mrkdwn, buttons)...)
		return err
	})
}

// call makes one Web API call, waiting out up to maxRateWaits 429s as
// Retry-After says (Slack rate-limits per method tier,
// https://api.slack.com/apis/rate-limits). Its error is scrubbed of the
// tokens; ErrRejected when Slack refused the request itself; and, when it
// refused the bot token, the refusal Run ends on (not ErrRejected: what
// was to be sent stays in the outbox for a start with a working token).
func (g *Gateway) call(ctx context.Context, fn func(context.Context) error) error {
	for waits := 0; ; waits++ {
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		err := fn(cctx)
		cancel()
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) && waits < maxRateWaits {
			wait := min(max(rl.RetryAfter, time.Second), maxRetryAfter)
			g.log.Info("rate limited by Slack", "retry_in", wait)
			if retry.Sleep(ctx, wait) {
				continue
			}
			return ctx.Err()
		}
		if err != nil && unauthorized(err) {
			err = refused("bot_token", g.scrub(err))
			g.revoke(err)
			return err
		}
		return g.classify(err)
	}
}

// classify scrubs err and marks what sending again cannot fix.
func (g *Gateway) classify(err error) error {
	if err == nil {
		return nil
	}
	err = g.scrub(err)
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code >= 400 && sc.Code < 500 && sc.Code != http.StatusTooManyRequests {
		return adapter.Rejected(fmt.Errorf("slack: %w", err))
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited":
			return fmt.Errorf("slack: %w", err)
		}
		return adapter.Rejected(fmt.Errorf("slack: %w", err))
	}
	return fmt.Errorf("slack: %w", err)
}

// describe is an event's data as text, for the log.
func describe(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	return fmt.Sprint(v)
}

// remember keeps the text of a message with buttons, by ts, so that
// answering a press can show the outcome under it.
func (g *Gateway) remember(ts, text string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.texts) >= 64 {
		clear(g.texts)
	}
	g.texts[ts] = text
}

func (g *Gateway) text(ts string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.texts[ts]
	return t, ok
}

// AnswerCallback answers a press: with resolved, the message shows it
// under its text and loses its buttons (chat.update); else the notice is
// shown to the presser only (chat.postEphemeral). A press needs no other
// answer: its envelope was acknowledged once stored.
func (g *Gateway) AnswerCallback(ctx context.Context, chat string, cb adapter.Callback, notice, resolved string) error {
	ch, err := g.channelOf(chat)
	if err != nil {
		return err
	}
	if resolved != "" && cb.MessageID != "" {
		text, ok := g.text(cb.MessageID)
		if !ok {
			text = "🔐"
		}
		return g.update(ctx, ch, cb.MessageID, text+"\n"+escape(resolved), true, nil)
	}
	if notice == "" {
		return nil
	}
	user := g.presser(cb)
	if user == "" {
		return nil
	}
	return g.call(ctx, func(ctx context.Context) error {
		_, err := g.api.PostEphemeralContext(ctx, ch, user, slack.MsgOptionText(escape(notice), false))
		return err
	})
}

// presser is the user who pressed, from the callback's id.
func (g *Gateway) presser(cb adapter.Callback) string {
	user, _, _ := strings.Cut(cb.ID, " ")
	return user
}
