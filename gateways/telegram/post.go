package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"golang.org/x/time/rate"

	"github.com/latchd/latch/gateways/internal/retry"
)

const (
	// chatInterval and chatBurst pace what latch posts into one chat:
	// Telegram allows about one message per second per chat, edits
	// included, and tolerates short bursts.
	chatInterval = time.Second
	chatBurst    = 3
	// uploadTimeout bounds one upload or download; a 50 MB file on a slow
	// line needs far longer than an API call.
	uploadTimeout = 10 * time.Minute
)

// chatLimiter returns the pacing limiter of a chat.
func (g *Gateway) chatLimiter(chat int64) *rate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.chats[chat]
	if l == nil {
		l = rate.NewLimiter(rate.Every(g.chatEvery), chatBurst)
		g.chats[chat] = l
	}
	return l
}

// post makes one call that sends or edits something in chat. Every such
// call waits for the chat's limiter and the bot-wide one, and a 429 is
// waited out as Telegram asks (retry_after), up to maxSendAttempts. A
// timeout of 0 means the normal request timeout.
func (g *Gateway) post(ctx context.Context, chat int64, c tgbotapi.Chattable, timeout time.Duration) (*tgbotapi.APIResponse, error) {
	if timeout <= 0 {
		timeout = g.cfg.PollTimeout + requestSlack
	}
	for attempt := 1; ; attempt++ {
		if err := g.chatLimiter(chat).Wait(ctx); err != nil {
			return nil, err
		}
		if err := g.limiter.Wait(ctx); err != nil {
			return nil, err
		}
		b, err := g.botTimeout(ctx, timeout)
		if err != nil {
			return nil, err
		}
		resp, err := b.Request(c)
		err = g.scrub(err)
		g.setRequestStatus(err)
		if err == nil {
			g.typing.Posted(strconv.FormatInt(chat, 10))
			return resp, nil
		}
		wait, limited := retryAfter(err)
		if !limited || attempt == maxSendAttempts {
			return nil, err
		}
		g.log.Info("rate limited by the Bot API; waiting to send", "retry_after", wait)
		if !retry.Sleep(ctx, wait) {
			return nil, ctx.Err()
		}
	}
}

// postMessage is post for calls that answer with a Message.
func (g *Gateway) postMessage(ctx context.Context, chat int64, c tgbotapi.Chattable, timeout time.Duration) (tgbotapi.Message, error) {
	resp, err := g.post(ctx, chat, c, timeout)
	if err != nil {
		return tgbotapi.Message{}, err
	}
	var m tgbotapi.Message
	if err := json.Unmarshal(resp.Result, &m); err != nil {
		return tgbotapi.Message{}, g.scrub(err)
	}
	return m, nil
}

// retryAfter reports whether err is a 429 and how long Telegram asked to
// wait. The library leaves Code unset on upload errors, so a retry_after
// alone counts too.
func retryAfter(err error) (time.Duration, bool) {
	var apiErr *tgbotapi.Error
	if !errors.As(err, &apiErr) {
		return 0, false
	}
	if apiErr.Code != http.StatusTooManyRequests && !(apiErr.Code == 0 && apiErr.RetryAfter > 0) {
		return 0, false
	}
	return time.Duration(max(apiErr.RetryAfter, 1)) * time.Second, true
}

// isAPIError reports whether err is a Bot API error whose description
// contains text (case-insensitive).
func isAPIError(err error, text string) bool {
	var apiErr *tgbotapi.Error
	return errors.As(err, &apiErr) && strings.Contains(strings.ToLower(apiErr.Message), text)
}

// notModified is Telegram's answer to an edit that changes nothing; it is
// success for latch.
func notModified(err error) bool { return isAPIError(err, "message is not modified") }

// badMarkup is Telegram's answer to HTML it cannot parse.
func badMarkup(err error) bool { return isAPIError(err, "can't parse entities") }
