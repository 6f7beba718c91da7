package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
)

func TestAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{"fraction", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"milliseconds win", http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"7"}}, 250 * time.Millisecond},
		{"date", http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, 30 * time.Second},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"negative", http.Header{"Retry-After": {"-3"}}, 0},
		{"junk", http.Header{"Retry-After": {"soon"}}, 0},
	}
	for _, tt := range tests {
		if got := After(tt.header, now); got != tt.want {
			t.Errorf("%s: After = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDelayBackOff(t *testing.T) {
	t.Parallel()
	p := Policy{}.withDefaults()
	for n, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second} {
		got, ok := p.delay(&provider.Error{}, n)
		if !ok || got > want || got < want*3/4 {
			t.Errorf("delay(attempt %d) = %v, %v; want %v less at most a quarter", n, got, ok, want)
		}
	}
	if _, ok := p.delay(&provider.Error{RetryAfter: 2 * time.Minute}, 0); ok {
		t.Error("a Retry-After beyond MaxWait was accepted")
	}
	if got, ok := p.delay(&provider.Error{RetryAfter: 3 * time.Second}, 5); !ok || got != 3*time.Second {
		t.Errorf("delay with Retry-After 3s = %v, %v", got, ok)
	}
}

func temporary() error {
	return &provider.Error{Provider: "test", Kind: provider.ErrUnavailable, Status: 500, Temporary: true, RetryAfter: time.Millisecond}
}

func TestDoRetriesTemporaryFailures(t *testing.T) {
	t.Parallel()
	calls := 0
	resp, err := Do(t.Context(), Policy{Provider: "test"}, nil, func(ctx context.Context, a *Attempt) (provider.Response, error) {
		calls++
		if a.N != calls-1 {
			t.Errorf("attempt N = %d on call %d", a.N, calls)
		}
		if calls < 3 {
			return provider.Response{}, temporary()
		}
		return provider.Response{StopReason: provider.StopEndTurn}, nil
	})
	if err != nil || resp.StopReason != provider.StopEndTurn || calls != 3 {
		t.Errorf("Do = %+v, %v after %d calls; want success on the third", resp, err, calls)
	}
}

func TestDoStopsAtMaxRetries(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ max, calls int }{{-1, 1}, {1, 2}, {3, 4}} {
		calls := 0
		_, err := Do(t.Context(), Policy{Provider: "test", MaxRetries: tt.max}, nil, func(context.Context, *Attempt) (provider.Response, error) {
			calls++
			return provider.Response{}, temporary()
		})
		if !errors.Is(err, provider.ErrUnavailable) || calls != tt.calls {
			t.Errorf("MaxRetries %d: %d calls, err %v; want %d calls", tt.max, calls, err, tt.calls)
		}
	}
}

func TestDoNeverRetriesAfterText(t *testing.T) {
	t.Parallel()
	calls := 0
	var got []string
	resp, err := Do(t.Context(), Policy{Provider: "test"}, func(s string) { got = append(got, s) },
		func(_ context.Context, a *Attempt) (provider.Response, error) {
			calls++
			a.Text("partial")
			return provider.Response{Content: []provider.Block{{Type: provider.BlockText, Text: "partial"}}}, temporary()
		})
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Partial || calls != 1 {
		t.Fatalf("Do: %d calls, err %v; want one call and a partial error", calls, err)
	}
	if len(got) != 1 || resp.Text() != "partial" {
		t.Errorf("delivered %q, response %q", got, resp.Text())
	}
}

func TestDoKeepsFinalErrors(t *testing.T) {
	t.Parallel()
	calls := 0
	final := errors.New("cannot encode")
	_, err := Do(t.Context(), Policy{Provider: "test"}, nil, func(context.Context, *Attempt) (provider.Response, error) {
		calls++
		return provider.Response{}, final
	})
	if err != final || calls != 1 {
		t.Errorf("Do = %v after %d calls, want the error as is after one", err, calls)
	}
}

func TestDoIdle(t *testing.T) {
	t.Parallel()
	calls := 0
	_, err := Do(t.Context(), Policy{Provider: "test", Idle: 200 * time.Millisecond}, nil,
		func(ctx context.Context, a *Attempt) (provider.Response, error) {
			calls++
			// Signs of life hold the timer off…
			for range 5 {
				a.Alive()
				select {
				case <-ctx.Done():
					t.Error("attempt ended while it was sending")
				case <-time.After(40 * time.Millisecond):
				}
			}
			// …until they stop.
			<-ctx.Done()
			return provider.Response{}, &provider.Error{Provider: "test", Kind: provider.ErrUnavailable, Temporary: true, Message: ctx.Err().Error()}
		})
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Idle != 200*time.Millisecond || pe.Temporary || pe.Message != "" {
		t.Fatalf("err = %#v, want an idle error", err)
	}
	if calls != 1 {
		t.Errorf("%d calls, want 1: a silent provider is not asked again", calls)
	}
}

func TestDoCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	start := time.Now()
	_, err := Do(ctx, Policy{Provider: "test"}, nil, func(context.Context, *Attempt) (provider.Response, error) {
		cancel()
		return provider.Response{}, &provider.Error{Provider: "test", Kind: provider.ErrRateLimited, Temporary: true, RetryAfter: 30 * time.Second}
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("Do waited out the Retry-After after its context ended")
	}
}
