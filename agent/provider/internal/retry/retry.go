// Package retry runs the attempts of one provider call, the same way for
// every adapter: it retries what the provider calls temporary (429, 5xx, a
// connection that failed before anything arrived), waiting as long as the
// provider asked (Retry-After) or backing off, up to a bounded number of
// attempts; it never retries once text has reached the caller, since the
// caller would see that text twice; and it abandons an attempt that goes
// quiet for too long.
//
// The clients' own retry loops are switched off (go-openai's; the anthropic
// client has none): they would retry a stream that breaks after text was
// delivered, could honour any Retry-After however long, and differ between
// clients.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/logkey"
)

// Defaults for Policy fields left zero.
const (
	DefaultMaxRetries = 2
	DefaultIdle       = 5 * time.Minute
	DefaultMaxWait    = time.Minute
	DefaultBaseDelay  = 500 * time.Millisecond
	DefaultMaxDelay   = 8 * time.Second
)

// Policy says how the attempts of one call are made.
type Policy struct {
	Provider string // the adapter's name, for errors and logs
	// MaxRetries is how many times a temporary failure is retried after the
	// first attempt. 0 means DefaultMaxRetries; negative means never.
	MaxRetries int
	// Idle is how long one attempt may go without hearing from the
	// provider — while waiting for the response to start, and between two
	// stream events — before it is abandoned. 0 means DefaultIdle.
	Idle time.Duration
	// MaxWait is the longest Retry-After that is waited out; a provider
	// asking for longer gets its error returned at once, so the chat can
	// say when to try again. 0 means DefaultMaxWait.
	MaxWait time.Duration
	// BaseDelay and MaxDelay shape the exponential back-off used when the
	// provider did not say how long to wait. 0 means the defaults.
	BaseDelay, MaxDelay time.Duration
	Logger              *slog.Logger // nil: no logs
}

func (p Policy) withDefaults() Policy {
	switch {
	case p.MaxRetries == 0:
		p.MaxRetries = DefaultMaxRetries
	case p.MaxRetries < 0:
		p.MaxRetries = 0
	}
	if p.Idle <= 0 {
		p.Idle = DefaultIdle
	}
	if p.MaxWait <= 0 {
		p.MaxWait = DefaultMaxWait
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.Logger == nil {
		p.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return p
}

// Attempt is what one try sees of the caller.
type Attempt struct {
	N         int // 0 for the first attempt
	onText    func(string)
	kick      func()
	delivered bool
}

// Text passes a text delta to the caller. It also counts as a sign of life.
func (a *Attempt) Text(s string) {
	a.kick()
	if s == "" {
		return
	}
	a.delivered = true
	a.onText(s)
}

// Alive tells the idle timer that the provider sent something.
func (a *Attempt) Alive() { a.kick() }

// Try makes one attempt. It returns nil, an *provider.Error, or an error
// that is final (a request that could not even be encoded).
type Try func(ctx context.Context, a *Attempt) (provider.Response, error)

var errIdle = errors.New("provider went quiet")

// Do makes attempts with try until one succeeds, one fails for good, the
// attempts run out or ctx ends. When ctx ends it returns an error that
// matches ctx.Err() with errors.Is. With any error, the Response is the last
// attempt's, holding what had arrived.
func Do(ctx context.Context, p Policy, onText func(string), try Try) (provider.Response, error) {
	p = p.withDefaults()
	if onText == nil {
		onText = func(string) {}
	}
	for n := 0; ; n++ {
		o := once(ctx, p, n, onText, try)
		resp, err := o.resp, o.err
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return resp, fmt.Errorf("%s: %w", p.Provider, ctx.Err())
		}
		var pe *provider.Error
		if !errors.As(err, &pe) {
			return resp, err
		}
		if o.idle {
			pe.Kind, pe.Idle, pe.Temporary, pe.Message = provider.ErrUnavailable, p.Idle, false, ""
		}
		if o.delivered {
			pe.Partial = true
			return resp, pe
		}
		if !pe.Temporary || n >= p.MaxRetries {
			return resp, pe
		}
		wait, ok := p.delay(pe, n)
		if deadline, has := ctx.Deadline(); !ok || has && time.Until(deadline) < wait {
			// Waiting would outlast the caller: say why now.
			return resp, pe
		}
		p.Logger.Warn("model provider call failed; retrying",
			"provider", p.Provider, "attempt", n+1, "wait", wait, logkey.Err, pe.Error())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, fmt.Errorf("%s: %w", p.Provider, ctx.Err())
		case <-t.C:
		}
	}
}

// outcome is how one attempt ended.
type outcome struct {
	resp      provider.Response
	err       error
	delivered bool // text reached the caller
	idle      bool // the idle timer ended the attempt
}

// once runs attempt n under an idle timer.
func once(ctx context.Context, p Policy, n int, onText func(string), try Try) outcome {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(p.Idle, func() { cancel(errIdle) })
	defer timer.Stop()
	a := &Attempt{N: n, onText: onText, kick: func() { timer.Reset(p.Idle) }}
	resp, err := try(context.WithValue(actx, kickKey{}, a.kick), a)
	timer.Stop()
	return outcome{
		resp:      resp,
		err:       err,
		delivered: a.delivered,
		idle:      err != nil && errors.Is(context.Cause(actx), errIdle),
	}
}

// delay is how long to wait before attempt n+1, and whether to make it.
func (p Policy) delay(pe *provider.Error, n int) (time.Duration, bool) {
	if pe.RetryAfter > 0 {
		return pe.RetryAfter, pe.RetryAfter <= p.MaxWait
	}
	d := p.MaxDelay
	if n < 16 && p.BaseDelay<<n < p.MaxDelay {
		d = p.BaseDelay << n
	}
	return d - rand.N(d/4+1), true
}

type kickKey struct{}

// HTTPClient returns a copy of hc (nil: http.DefaultClient) whose
// responses count as signs of life for the attempt that made them: the
// response, and every read of its body that returns data, reset the
// attempt's idle timer. The clients swallow the keep-alives a provider sends
// while a model is slow (Anthropic's ping events, OpenRouter's comment
// lines), so only the bytes show that the provider is still there.
func HTTPClient(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = aliveTransport{next: next}
	return &c
}

type aliveTransport struct{ next http.RoundTripper }

func (t aliveTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if kick, ok := req.Context().Value(kickKey{}).(func()); ok && resp != nil && resp.Body != nil {
		kick()
		resp.Body = &aliveBody{ReadCloser: resp.Body, kick: kick}
	}
	return resp, err
}

type aliveBody struct {
	io.ReadCloser
	kick func()
}

func (b *aliveBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.kick()
	}
	return n, err
}

// After reads how long a response asks the client to wait: retry-after-ms
// (OpenAI), or Retry-After in seconds or as an HTTP date. It returns 0 when
// the response does not say.
func After(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
