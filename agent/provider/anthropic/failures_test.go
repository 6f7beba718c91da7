package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
)

func TestAuthError(t *testing.T) {
	t.Parallel()
	const wrong = "sk-ant-api03-WRONG-9876543210"
	c, srv := setup(t, func(c *anthropic.Config) { c.APIKey = wrong })
	srv.Script(anthropictest.Text("unreachable"))

	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	msg := provider.Describe(err)
	for _, s := range []string{err.Error(), msg} {
		if strings.Contains(s, wrong) || strings.Contains(s, testKey) {
			t.Errorf("key leaked: %q", s)
		}
	}
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "api_key") {
		t.Errorf("Describe = %q, want the status and the setting to check", msg)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1: a 401 is not retried", n)
	}
}

func TestNoAPIKey(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *anthropic.Config) { c.APIKey = "" })
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "needs an API key") {
		t.Errorf("Describe = %q, want it to ask for a key", msg)
	}
	h := srv.Requests()[0].Header
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Errorf("a credential was sent with no key configured: %v", h)
	}
}

// The official SDK reads these by default; the config must be all that
// counts.
func TestEnvironmentIgnored(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-000000")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-env-000000")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Env-Header: yes")

	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("ok"))
	if _, err := c.Stream(t.Context(), ask("hi"), nil); err != nil {
		t.Fatalf("Stream with explicit config: %v", err)
	}
	h := srv.Requests()[0].Header
	if h.Get("X-Api-Key") != testKey || h.Get("Authorization") != "" || h.Get("X-Env-Header") != "" {
		t.Errorf("request headers = %v, want the configured key and nothing from the environment", h)
	}

	// With no key configured, the one in the environment is not used either.
	c2, err := anthropic.New(anthropic.Config{BaseURL: srv.URL(), Model: testModel})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Stream(t.Context(), ask("hi"), nil); !errors.Is(err, provider.ErrAuth) {
		t.Errorf("err = %v, want ErrAuth: the environment's key must not be sent", err)
	}
}

func TestModelNotFound(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *anthropic.Config) { c.Model = "claude-nope" })
	srv.Models(testModel)
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, `"claude-nope"`) || !strings.Contains(msg, "404") {
		t.Errorf("Describe = %q, want the model and the status", msg)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

func TestNoModelConfigured(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *anthropic.Config) { c.Model = "" })
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "[agent] model") {
		t.Errorf("Describe = %q, want the setting", msg)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("fake got %d requests, want none", n)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.RateLimited(time.Second), anthropictest.Text("ok"))
	start := time.Now()
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Text() != "ok" {
		t.Errorf("text = %q, want ok", resp.Text())
	}
	if waited := time.Since(start); waited < 950*time.Millisecond {
		t.Errorf("retried after %v, want at least the 1s Retry-After", waited)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("fake got %d requests, want 2", n)
	}
}

func TestRateLimitTooLongIsReturned(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.RateLimited(5*time.Minute), anthropictest.Text("later"))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrRateLimited) {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "5 minutes") {
		t.Errorf("Describe = %q, want when to try again", msg)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1: a 5-minute wait is not waited out", n)
	}
}

func TestServerErrorsRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.ServerError(), anthropictest.Overloaded(), anthropictest.Text("ok"))
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Text() != "ok" || len(srv.Requests()) != 3 {
		t.Errorf("text %q after %d requests, want ok after 3", resp.Text(), len(srv.Requests()))
	}
}

func TestRetriesBounded(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *anthropic.Config) { c.MaxRetries = 1 })
	srv.Script(anthropictest.Overloaded(), anthropictest.Overloaded(), anthropictest.Text("too late"))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "529") {
		t.Errorf("Describe = %q, want the status", msg)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("fake got %d requests, want 2 (one retry)", n)
	}
}

func TestStreamErrorBeforeTextRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(
		anthropictest.Text("never seen").ErrorAfter(0, "overloaded_error", "Overloaded"),
		anthropictest.Text("second try"),
	)
	var d deltas
	resp, err := c.Stream(t.Context(), ask("hi"), d.add)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got := strings.Join(d.all(), ""); got != "second try" || resp.Text() != "second try" {
		t.Errorf("deltas %q, text %q, want only the second try", got, resp.Text())
	}
}

func TestCutAfterTextNotRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("Hello, this reply is cut short.").CutAfter(2), anthropictest.Text("duplicate"))
	var d deltas
	resp, err := c.Stream(t.Context(), ask("hi"), d.add)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Partial {
		t.Errorf("err = %#v, want a partial-reply error", err)
	}
	if got := strings.Join(d.all(), ""); got != "Hello, thi" || resp.Text() != got {
		t.Errorf("deltas %q, partial text %q, want the two pieces sent", got, resp.Text())
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1: text had been delivered", n)
	}
}

func TestCleanEndWithoutMessageStop(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"ls"}`).EndAfter(2))
	srv.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"ls"}`).EndAfter(2))
	srv.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"ls"}`).EndAfter(2))
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable for a stream without message_stop", err)
	}
	if len(resp.ToolUses()) != 0 {
		t.Errorf("unfinished tool call returned: %+v", resp.Content)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("fake got %d requests, want 3: nothing had been delivered, so it was retried", n)
	}
}

func TestCutBeforeTextRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("lost").CutAfter(0), anthropictest.Text("ok"))
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if err != nil || resp.Text() != "ok" {
		t.Fatalf("Stream = %q, %v; want ok", resp.Text(), err)
	}
}

func TestCancelStopsStalledStream(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("First words, then nothing.").StallAfter(1))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var d deltas
	done := make(chan struct{})
	var (
		resp provider.Response
		err  error
	)
	go func() {
		defer close(done)
		resp, err = c.Stream(ctx, ask("hi"), func(s string) { d.add(s); cancel() })
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stream did not return after its context was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if resp.Text() != "First" {
		t.Errorf("partial text = %q, want the piece that arrived", resp.Text())
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "stopped") {
		t.Errorf("Describe = %q", msg)
	}
}

func TestDeadlineDuringSlowFirstByte(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("late").Delay(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Stream(ctx, ask("hi"), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Stream took %v to give up", took)
	}
}

func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *anthropic.Config) { c.Timeout = 300 * time.Millisecond })
	srv.Script(anthropictest.Text("late").Delay(time.Minute), anthropictest.Text("not asked for"))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnavailable) || pe.Idle != 300*time.Millisecond {
		t.Fatalf("err = %v, want ErrUnavailable after 300ms idle", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "sent nothing") {
		t.Errorf("Describe = %q", msg)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1: a silent provider is not asked again", n)
	}
}

// Keep-alives (ping events) show that the provider is still there.
func TestKeepAlivesHoldOffIdleTimeout(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *anthropic.Config) { c.Timeout = 300 * time.Millisecond })
	srv.Script(anthropictest.Text("Hello, after a long think.").PauseAfter(1, time.Second))
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if err != nil || resp.Text() != "Hello, after a long think." {
		t.Fatalf("Stream = %q, %v; want the whole reply", resp.Text(), err)
	}
}

// A provider or proxy that echoes the key must not get it into the error.
func TestKeyScrubbedFromProviderMessages(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.APIError(400, "invalid_request_error", "header x-api-key: "+testKey+" is malformed"))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrRequest) {
		t.Fatalf("err = %v, want ErrRequest", err)
	}
	for _, s := range []string{err.Error(), provider.Describe(err)} {
		if strings.Contains(s, testKey) {
			t.Errorf("key leaked: %q", s)
		}
		if !strings.Contains(s, "[redacted]") {
			t.Errorf("%q: want the provider's message with the key redacted", s)
		}
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(testKey)
	url := srv.URL()
	srv.Close()
	c, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: url, Model: testModel, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, url) || strings.Contains(err.Error(), testKey) {
		t.Errorf("Describe = %q, want where it tried", msg)
	}
}

func TestBadBaseURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"api.anthropic.com", "ftp://example.com", "http://"} {
		if _, err := anthropic.New(anthropic.Config{BaseURL: u}); err == nil {
			t.Errorf("New(BaseURL %q) = nil error", u)
		}
	}
}

// A Config or Client that ends up in a log must not carry the key.
func TestPrintingHidesKey(t *testing.T) {
	t.Parallel()
	cfg := anthropic.Config{APIKey: testKey, BaseURL: "https://user:pass@proxy.example/v1?key=" + testKey, Model: testModel}
	c, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("provider", "config", cfg, "client", c)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg),
		fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), buf.String()} {
		if strings.Contains(s, testKey) || strings.Contains(s, "pass") {
			t.Errorf("secret printed: %s", s)
		}
		if !strings.Contains(s, "proxy.example") {
			t.Errorf("%s: want the endpoint", s)
		}
	}
}
