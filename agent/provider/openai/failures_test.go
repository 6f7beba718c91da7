package openai_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/openai"
	"github.com/latchd/latch/agent/provider/openai/openaitest"
)

func TestAuthError(t *testing.T) {
	t.Parallel()
	const wrong = "sk-proj-WRONG-9876543210"
	c, srv := setup(t, func(c *openai.Config) { c.APIKey = wrong })
	srv.Script(openaitest.Text("unreachable"))
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
		t.Errorf("fake got %d requests, want 1", n)
	}
}

func TestNoKeyForServerThatNeedsOne(t *testing.T) {
	t.Parallel()
	c, _ := setup(t, func(c *openai.Config) { c.APIKey = "" })
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrAuth) || !strings.Contains(provider.Describe(err), "needs an API key") {
		t.Errorf("err = %v (%q), want ErrAuth asking for a key", err, provider.Describe(err))
	}
}

func TestEnvironmentIgnored(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env-000000")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	c, srv := setup(t, func(c *openai.Config) { c.APIKey = "" })
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrAuth) {
		t.Errorf("err = %v, want ErrAuth: the environment's key must not be sent", err)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q, want none", h)
	}
}

func TestModelNotFound(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *openai.Config) { c.Model = "gpt-nope" })
	srv.Models(testModel)
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, `"gpt-nope"`) || !strings.Contains(msg, "404") {
		t.Errorf("Describe = %q, want the model and the status", msg)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.RateLimited(time.Second), openaitest.Text("ok"))
	start := time.Now()
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if err != nil || resp.Text() != "ok" {
		t.Fatalf("Stream = %q, %v", resp.Text(), err)
	}
	if waited := time.Since(start); waited < 950*time.Millisecond {
		t.Errorf("retried after %v, want at least the 1s Retry-After", waited)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("fake got %d requests, want 2", n)
	}
}

func TestQuotaIsNotRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.APIError(429, "insufficient_quota", "insufficient_quota",
		"You exceeded your current quota, please check your plan and billing details."), openaitest.Text("no"))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrRequest) {
		t.Fatalf("err = %v, want ErrRequest", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "quota") {
		t.Errorf("Describe = %q, want the provider's explanation", msg)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

func TestServerErrorsRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.ServerError(), openaitest.Overloaded(), openaitest.Text("ok"))
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if err != nil || resp.Text() != "ok" || len(srv.Requests()) != 3 {
		t.Errorf("Stream = %q, %v after %d requests; want ok after 3", resp.Text(), err, len(srv.Requests()))
	}
}

func TestRetriesBounded(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *openai.Config) { c.MaxRetries = 1 })
	srv.Script(openaitest.Overloaded(), openaitest.Overloaded(), openaitest.Text("too late"))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) || !strings.Contains(provider.Describe(err), "503") {
		t.Fatalf("err = %v (%q), want ErrUnavailable 503", err, provider.Describe(err))
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("fake got %d requests, want 2 (one retry)", n)
	}
}

func TestProxyErrorPage(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *openai.Config) { c.MaxRetries = -1 })
	srv.Script(openaitest.RawError(502, "<html><body>502 Bad Gateway</body></html>"))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnavailable) || pe.Status != 502 || pe.Message != "Bad Gateway" {
		t.Errorf("err = %#v, want ErrUnavailable 502 Bad Gateway", err)
	}
}

// Compatible servers that do not use OpenAI's error JSON still get their
// explanation through.
func TestOtherErrorShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		status     int
		kind       error
		message    string
	}{
		{"ollama native", `{"error":"model 'llama9' not found, try pulling it first"}`, 404, provider.ErrModel, "model 'llama9' not found, try pulling it first"},
		{"vllm", `{"object":"error","message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, 404, provider.ErrModel, "The model `x` does not exist."},
		{"plain text", "404 page not found\n", 404, provider.ErrModel, "404 page not found"},
		{"fastapi detail", `{"detail":"Not authenticated"}`, 401, provider.ErrAuth, "Not authenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, srv := setup(t, nil)
			srv.Script(openaitest.RawError(tt.status, tt.body))
			_, err := c.Stream(t.Context(), ask("hi"), nil)
			var pe *provider.Error
			if !errors.As(err, &pe) || !errors.Is(err, tt.kind) || pe.Message != tt.message {
				t.Errorf("err = %v, want %v with message %q", err, tt.kind, tt.message)
			}
		})
	}
}

func TestStreamErrorBeforeTextRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.Text("never seen").ErrorAfter(0, "server_error", "The server had an error"), openaitest.Text("second try"))
	var d deltas
	resp, err := c.Stream(t.Context(), ask("hi"), d.add)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got := strings.Join(d.all(), ""); got != "second try" || resp.Text() != "second try" {
		t.Errorf("deltas %q, text %q, want only the second try", got, resp.Text())
	}
}

func TestStreamErrorAfterTextNotRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.Text("Hello, this breaks.").ErrorAfter(1, "server_error", "The server had an error"), openaitest.Text("dup"))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Partial || pe.Type != "server_error" {
		t.Fatalf("err = %v, want a partial server_error", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

func TestCutAfterTextNotRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.Text("Hello, this reply is cut short.").CutAfter(2), openaitest.Text("duplicate"))
	var d deltas
	resp, err := c.Stream(t.Context(), ask("hi"), d.add)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Partial {
		t.Errorf("err = %#v, want a partial-reply error", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "broke off") {
		t.Errorf("Describe = %q", msg)
	}
	if got := strings.Join(d.all(), ""); got != "Hello, thi" || resp.Text() != got {
		t.Errorf("deltas %q, partial text %q, want the two pieces sent", got, resp.Text())
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1: text had been delivered", n)
	}
}

func TestCleanEndWithoutFinish(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *openai.Config) { c.MaxRetries = -1 })
	srv.Script(openaitest.ToolUse("c1", "bash", `{"command":"ls"}`).EndAfter(2))
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable for a stream without finish_reason", err)
	}
	if len(resp.ToolUses()) != 0 {
		t.Errorf("unfinished tool call returned: %+v", resp.Content)
	}
}

func TestCutBeforeTextRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.Text("lost").CutAfter(0), openaitest.Text("ok"))
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if err != nil || resp.Text() != "ok" {
		t.Fatalf("Stream = %q, %v; want ok", resp.Text(), err)
	}
}

func TestCancelStopsStalledStream(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.Text("First words, then nothing.").StallAfter(1))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	var (
		resp provider.Response
		err  error
	)
	go func() {
		defer close(done)
		resp, err = c.Stream(ctx, ask("hi"), func(string) { cancel() })
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
}

func TestDeadlineDuringSlowFirstByte(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.Text("late").Delay(time.Minute))
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
	c, srv := setup(t, func(c *openai.Config) { c.Timeout = 300 * time.Millisecond })
	srv.Script(openaitest.Text("first, then silence").StallAfter(1), openaitest.Text("not asked for"))
	var d deltas
	_, err := c.Stream(t.Context(), ask("hi"), d.add)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Idle != 300*time.Millisecond {
		t.Fatalf("err = %v, want an idle timeout", err)
	}
	if !pe.Partial {
		t.Errorf("err = %v, want it marked partial: text had arrived", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

// Keep-alives that the SDK swallows still show the provider is there.
func TestKeepAlivesHoldOffIdleTimeout(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *openai.Config) { c.Timeout = 300 * time.Millisecond })
	srv.Script(openaitest.Text("Hello, after a long think.").PauseAfter(1, time.Second))
	resp, err := c.Stream(t.Context(), ask("hi"), nil)
	if err != nil || resp.Text() != "Hello, after a long think." {
		t.Fatalf("Stream = %q, %v; want the whole reply", resp.Text(), err)
	}
}

func TestKeyScrubbedFromProviderMessages(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.APIError(400, "invalid_request_error", "", "proxy saw Authorization: Bearer "+testKey))
	_, err := c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrRequest) {
		t.Fatalf("err = %v, want ErrRequest", err)
	}
	for _, s := range []string{err.Error(), provider.Describe(err)} {
		if strings.Contains(s, testKey) || !strings.Contains(s, "[redacted]") {
			t.Errorf("%q: want the provider's message with the key redacted", s)
		}
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := openaitest.New("")
	url := srv.URL()
	srv.Close()
	c, err := openai.New(openai.Config{BaseURL: url, Model: "llama3.2", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stream(t.Context(), ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, strings.TrimSuffix(url, "/v1")) || !strings.Contains(msg, "base_url") {
		t.Errorf("Describe = %q, want where it tried", msg)
	}
}

// A Config or Client that ends up in a log must not carry the key.
func TestPrintingHidesKey(t *testing.T) {
	t.Parallel()
	cfg := openai.Config{APIKey: testKey, BaseURL: "https://user:pass@proxy.example/v1?key=" + testKey, Model: testModel}
	c, err := openai.New(cfg)
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
