// Package retry holds the waiting the chat adapters do between attempts:
// exponential back-off with jitter, and a sleep that ends with its context.
package retry

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Default bounds of a back-off, for a configuration that leaves them out.
const (
	DefaultMin = time.Second
	DefaultMax = time.Minute
)

// Limits returns a back-off's configured bounds with the defaults filled
// in (a bound ≤ 0 is unset) and max raised to min if below it.
func Limits(minWait, maxWait time.Duration) (time.Duration, time.Duration) {
	if minWait <= 0 {
		minWait = DefaultMin
	}
	if maxWait <= 0 {
		maxWait = DefaultMax
	}
	return minWait, max(maxWait, minWait)
}

// Backoff is exponential back-off with jitter: Min, then doubling up to
// Max. The jitter only lengthens a wait, so the minimum holds.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next is the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.Min
	} else {
		b.cur = min(b.cur*2, b.Max)
	}
	return min(b.cur+rand.N(b.cur/2+1), b.Max)
}

// Reset starts again from Min, after a success.
func (b *Backoff) Reset() { b.cur = 0 }

// Sleep waits for d or until ctx ends, and reports whether it waited the
// full time.
func Sleep(ctx context.Context, d time.Duration) bool {
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

// Until calls fn until it returns nil or ctx ends, waiting b's back-off
// between tries and logging each failure as what; it reports whether fn
// succeeded. The adapters store a batch this way: a batch not stored is
// not confirmed to the platform.
func Until(ctx context.Context, b Backoff, log *slog.Logger, what string, fn func() error) bool {
	for {
		err := fn()
		if err == nil {
			return true
		}
		wait := b.Next()
		log.Warn(what+"; trying again", "err", err, "retry_in", wait)
		if !Sleep(ctx, wait) {
			return false
		}
	}
}

// Tries calls fn up to n times while it fails, ctx lasts and final(err)
// is false, waiting b's back-off between tries; it returns fn's last
// error. The adapters send a part of an answer that must not go missing
// this way (final: the platform refused it, sending again cannot help).
func Tries(ctx context.Context, b Backoff, n int, final func(error) bool, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		if err == nil || try >= n || ctx.Err() != nil || final(err) {
			return err
		}
		if !Sleep(ctx, b.Next()) {
			return err
		}
	}
}
