package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"maunium.net/go/mautrix"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
)

const (
	// maxRateWaits bounds the M_LIMIT_EXCEEDED one call waits out;
	// maxRetryAfter caps one wait.
	maxRateWaits  = 3
	maxRetryAfter = time.Minute
)

// call makes one API call, waiting out up to maxRateWaits 429s
// (M_LIMIT_EXCEEDED) as retry_after_ms, or else Retry-After, says. Its
// error is scrubbed of the token, and ErrRejected when the homeserver
// refused the request itself.
func (g *Gateway) call(ctx context.Context, fn func(context.Context) error) error {
	for waits := 0; ; waits++ {
		cctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
		err := fn(cctx)
		cancel()
		if wait, ok := rateLimited(err); ok && waits < maxRateWaits {
			g.log.Info("rate limited by the homeserver", "retry_in", wait)
			if retry.Sleep(ctx, wait) {
				continue
			}
			return ctx.Err()
		}
		return g.classify(err)
	}
}

// rateLimited reports whether err is a 429 and how long it asks to wait
// (at least 100 ms, at most maxRetryAfter).
func rateLimited(err error) (time.Duration, bool) {
	var he mautrix.HTTPError
	if !errors.As(err, &he) || !he.IsStatus(http.StatusTooManyRequests) &&
		(he.RespError == nil || he.RespError.ErrCode != mautrix.MLimitExceeded.ErrCode) {
		return 0, false
	}
	wait := time.Second
	if he.RespError != nil {
		if ms, ok := he.RespError.ExtraData["retry_after_ms"].(float64); ok && ms > 0 {
			wait = time.Duration(ms) * time.Millisecond
		}
	}
	if he.Response != nil {
		if s, err := strconv.Atoi(he.Response.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = max(wait, time.Duration(s)*time.Second)
		}
	}
	return min(max(wait, 100*time.Millisecond), maxRetryAfter), true
}

// classify scrubs err and marks what sending again cannot fix: a 4xx but
// 429 (and 401, which ends Run instead).
func (g *Gateway) classify(err error) error {
	if err == nil {
		return nil
	}
	err = g.scrub(err)
	if unauthorized(err) {
		return errors.Join(adapter.ErrUnauthorized, fmt.Errorf("matrix: %w", err))
	}
	var he mautrix.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		if c := he.Response.StatusCode; c >= 400 && c < 500 && c != http.StatusTooManyRequests {
			return adapter.Rejected(fmt.Errorf("matrix: %w", err))
		}
	}
	return fmt.Errorf("matrix: %w", err)
}
