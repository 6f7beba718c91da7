package discord

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/internal/retry"
)

const (
	// maxAttempts bounds the tries of a call Discord keeps rate-limiting.
	maxAttempts = 5
	// minRetryAfter is the least wait after Discord's own 429, in case it
	// asks for none.
	minRetryAfter = 50 * time.Millisecond
	// minBlindWait is the least wait after a 429 that says nothing of how
	// long to wait: no JSON body and no Retry-After header (a proxy's, such
	// as Cloudflare's). Hurrying would only add to the invalid requests
	// Cloudflare counts against the address.
	minBlindWait = time.Second
	// maxRetryAfter bounds one wait a 429 asks for, so a garbled value
	// cannot stop a call for good.
	maxRetryAfter = 10 * time.Minute
)

// call makes one REST call through discordgo: fn must pass opts on. The
// call is bound to ctx and a timeout, goes through discordgo's per-route
// limiter (which reads the X-RateLimit-* headers), and a 429 is waited out
// (rateLimitWait) up to maxAttempts; discordgo's own 429 retry is off
// because it sleeps without a context. The error comes back scrubbed of
// the token and of secrets (an interaction token).
func (g *Gateway) call(ctx context.Context, timeout time.Duration, secrets []string, fn func(opts ...discordgo.RequestOption) error) error {
	bo := g.newBackoff()
	for attempt := 1; ; attempt++ {
		err := g.attempt(ctx, timeout, secrets, fn)
		var apiErr *APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests || attempt == maxAttempts {
			return err
		}
		wait := rateLimitWait(apiErr, &bo)
		g.log.Info("rate limited by Discord; waiting", "retry_after", wait)
		if !retry.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// attempt makes the call once, bound to ctx and timeout, and returns its
// error scrubbed. discordgo reports a 429 whose body is not Discord's JSON
// (a proxy's page) as a JSON error, and a 502 it gave up retrying as a
// bare error; attempt turns both into an APIError with the status (and
// the Retry-After header) of the answer, so callers can tell what came.
func (g *Gateway) attempt(ctx context.Context, timeout time.Duration, secrets []string, fn func(opts ...discordgo.RequestOption) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var note responseNote
	rctx, cancel := context.WithTimeout(context.WithValue(ctx, noteKey{}, &note), timeout)
	err := fn(discordgo.WithContext(rctx), discordgo.WithRetryOnRatelimit(false))
	cancel()
	err = g.scrub(err, secrets...)
	if err == nil {
		return nil
	}
	var apiErr *APIError
	switch {
	case errors.As(err, &apiErr):
		if apiErr.Status == http.StatusTooManyRequests && apiErr.RetryAfter <= 0 {
			apiErr.RetryAfter = note.retryAfter
		}
	case note.status >= http.StatusBadRequest:
		err = &APIError{Status: note.status, RetryAfter: note.retryAfter}
	}
	g.setError(err)
	return err
}

// rateLimitWait is how long to wait after a 429: what it asks for
// (retry_after, else the Retry-After header), at most maxRetryAfter.
// Discord's own answer asking for nothing is waited minRetryAfter; an
// answer that is not Discord's (no JSON body) and says nothing is waited
// out with back-off, at least minBlindWait.
func rateLimitWait(e *APIError, bo *retry.Backoff) time.Duration {
	switch {
	case e.RetryAfter > 0:
		return min(e.RetryAfter, maxRetryAfter)
	case e.Message != "":
		return minRetryAfter
	}
	return max(bo.Next(), minBlindWait)
}

// transient reports whether a failed call may succeed if made again
// unchanged: Discord (or a proxy in front of it) answered 429 or 5xx, or
// there was no answer at all (a network error or a timeout, which
// net/http reports as a *url.Error).
func transient(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status == http.StatusTooManyRequests || apiErr.Status >= http.StatusInternalServerError
	}
	var uerr *url.Error
	return errors.As(err, &uerr)
}

// responseNote is the status and Retry-After header of the last answer to
// one attempt; noteTransport fills it in for a request whose context
// carries it (under noteKey). discordgo keeps neither once it fails to
// read the body.
type responseNote struct {
	status     int
	retryAfter time.Duration
}

type noteKey struct{}

// noteTransport is the REST client's transport: base, noting each answer
// in the request's responseNote.
type noteTransport struct{ base http.RoundTripper }

func (t noteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if n, ok := r.Context().Value(noteKey{}).(*responseNote); ok {
		*n = responseNote{}
		if err == nil {
			n.status, n.retryAfter = resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
	}
	return resp, err
}

// parseRetryAfter reads a Retry-After header: seconds (Discord sends a
// whole number; a fraction is accepted) or an HTTP date. 0 if absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s > 0) { // also NaN
			return 0
		}
		return time.Duration(min(s, maxRetryAfter.Seconds()) * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0)
	}
	return 0
}

// newBackoff is a back-off within the configured bounds.
func (g *Gateway) newBackoff() retry.Backoff {
	return retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}
}
