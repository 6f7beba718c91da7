package discord

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/internal/retry"
)

const (
	// maxAttempts bounds the tries of a call Discord keeps rate-limiting.
	maxAttempts = 5
	// minRetryAfter is the least wait after a 429, in case Discord asks
	// for none.
	minRetryAfter = 50 * time.Millisecond
)

// call makes one REST call through discordgo: fn must pass opts on. The
// call is bound to ctx and a timeout, goes through discordgo's per-route
// limiter (which reads the X-RateLimit-* headers), and a 429 is waited out
// as Discord asks (retry_after) up to maxAttempts; discordgo's own 429
// retry is off because it sleeps without a context. The error comes back
// scrubbed of the token and of secrets (an interaction token).
func (g *Gateway) call(ctx context.Context, timeout time.Duration, secrets []string, fn func(opts ...discordgo.RequestOption) error) error {
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := fn(discordgo.WithContext(rctx), discordgo.WithRetryOnRatelimit(false))
		cancel()
		err = g.scrub(err, secrets...)
		if err == nil {
			return nil
		}
		g.setError(err)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests || attempt == maxAttempts {
			return err
		}
		wait := max(apiErr.RetryAfter, minRetryAfter)
		g.log.Info("rate limited by Discord; waiting", "retry_after", wait)
		if !retry.Sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// newBackoff is a back-off within the configured bounds.
func (g *Gateway) newBackoff() retry.Backoff {
	return retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}
}
