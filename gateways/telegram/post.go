package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"golang.org/x/time/rate"

	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/logkey"
)

const (
	// chatInterval and chatBurst pace what latch posts into one chat:
	// Telegram allows about one message per second per chat, edits
	// included, and tolerates short bursts.
	chatInterval = time.Second
	chatBurst    = 3
	// groupLimit messages per groupWindow is what Telegram allows into one
	// group, edits included. A group's bucket holds chatBurst and refills
	// at (groupLimit-chatBurst) per window, so that no window ever sees
	// more than groupLimit: a full bucket plus a window's refill. The
	// refill comes every 3.5 s or so; a request that arrives a little
	// late or early still keeps a whole interval of slack.
	groupLimit  = 20
	groupWindow = time.Minute
	// uploadTimeout bounds one upload or download; a 50 MB file on a slow
	// line needs far longer than an API call.
	uploadTimeout = 10 * time.Minute
	// maxReliableAttempts bounds the tries of postReliably.
	maxReliableAttempts = 3
)

// isGroup reports whether a chat id is a group's or supergroup's (or a
// channel's): Telegram gives those negative ids, private chats positive.
func isGroup(chat int64) bool { return chat < 0 }

// chatLimiter returns the pacing limiter of a chat: one post per
// chatEvery, or in a group one per groupWindow/(groupLimit-chatBurst),
// whichever is slower. The topics of a forum share their group's.
func (g *Gateway) chatLimiter(chat int64) *rate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.chats[chat]
	if l == nil {
		every := g.chatEvery
		if isGroup(chat) {
			every = max(every, g.groupWindow/(groupLimit-chatBurst))
		}
		l = rate.NewLimiter(rate.Every(every), chatBurst)
		g.chats[chat] = l
	}
	return l
}

// post makes one call that sends or edits something in a chat. Every such
// call waits for the chat's limiter and the bot-wide one, and a 429 is
// waited out as Telegram asks (retry_after), up to maxSendAttempts. A
// timeout of 0 means the normal request timeout. to.topic is where "typing…"
// ends, as the post shows there.
func (g *Gateway) post(ctx context.Context, to target, c call, timeout time.Duration) (*tgbotapi.APIResponse, error) {
	if timeout <= 0 {
		timeout = g.cfg.PollTimeout + requestSlack
	}
	for attempt := 1; ; attempt++ {
		if err := g.chatLimiter(to.chat).Wait(ctx); err != nil {
			return nil, err
		}
		if err := g.limiter.Wait(ctx); err != nil {
			return nil, err
		}
		b, err := g.botTimeout(ctx, timeout)
		if err != nil {
			return nil, err
		}
		resp, err := c.do(b)
		err = g.scrub(err)
		g.setRequestStatus(err)
		if err == nil {
			g.typing.Posted(to.key())
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
func (g *Gateway) postMessage(ctx context.Context, to target, c call, timeout time.Duration) (tgbotapi.Message, error) {
	return g.messageOf(g.post(ctx, to, c, timeout))
}

// messageOf reads the Message a call answered with.
func (g *Gateway) messageOf(resp *tgbotapi.APIResponse, err error) (tgbotapi.Message, error) {
	if err != nil {
		return tgbotapi.Message{}, err
	}
	var m tgbotapi.Message
	if err := json.Unmarshal(resp.Result, &m); err != nil {
		return tgbotapi.Message{}, g.scrub(err)
	}
	return m, nil
}

// postReliably is post for what must not go missing from the middle of an
// answer: a chunk of it, or the edit that turns the streaming message into
// its first chunk. A transient failure (see transient) is tried again after
// a back-off, up to maxReliableAttempts tries in all; any other error is
// the answer the next try would get too.
//
// A timeout or a connection lost after the request went out may come after
// Telegram posted the message, and the next try then shows it twice. That
// is accepted: a chunk shown twice is plain to see and harmless, one
// missing from the middle of an answer goes unnoticed and changes what the
// answer says. (An edit tried twice is harmless: the second is "not
// modified".)
func (g *Gateway) postReliably(ctx context.Context, to target, c call) (*tgbotapi.APIResponse, error) {
	return g.postReliablyFor(ctx, to, c, 0)
}

// postReliablyFor is postReliably with a timeout for each try, as post
// takes it (an upload needs longer than a message).
func (g *Gateway) postReliablyFor(ctx context.Context, to target, c call, timeout time.Duration) (*tgbotapi.APIResponse, error) {
	bo := g.newBackoff()
	for attempt := 1; ; attempt++ {
		resp, err := g.post(ctx, to, c, timeout)
		if err == nil || attempt == maxReliableAttempts || !transient(ctx, err) {
			return resp, err
		}
		d := bo.Next()
		g.log.Warn("posting to Telegram failed; trying again", logkey.Err, err, "attempt", attempt, "retry_in", d)
		if !retry.Sleep(ctx, d) {
			return nil, err
		}
	}
}

// transient reports whether err may be gone on another try: a server error
// (5xx) from the Bot API or a proxy in front of it, an answer that is not
// Bot API JSON (an HTML error page), or a network failure (refused, reset
// or dropped connection, timeout). A 4xx is the Bot API's verdict on the
// request and stays (429 is post's to wait out), and nothing is transient
// once ctx has ended.
func transient(ctx context.Context, err error) bool {
	var apiErr *tgbotapi.Error
	var status *statusError
	var syntax *json.SyntaxError
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case ctx.Err() != nil:
		return false
	case errors.As(err, &apiErr):
		return apiErr.Code >= 500
	case errors.As(err, &status):
		return status.code >= 500 || status.code == http.StatusTooManyRequests
	}
	return errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.As(err, &opErr) || errors.As(err, &netErr) && netErr.Timeout()
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
