package discord

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/bwmarrin/discordgo"
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
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// backoff is exponential back-off with jitter. The jitter only lengthens a
// wait, so the minimum holds.
type backoff struct {
	min, max, cur time.Duration
}

func (g *Gateway) newBackoff() backoff {
	return backoff{min: g.cfg.MinBackoff, max: g.cfg.MaxBackoff}
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	return min(b.cur+rand.N(b.cur/2+1), b.max)
}

// sleep waits for d or until ctx ends, and reports whether it waited the
// full time.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
