package openai_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/adaptertest"
	"github.com/latchd/latch/agent/provider/openai"
	"github.com/latchd/latch/agent/provider/openai/openaitest"
)

// The failures every adapter shares are adaptertest's scenarios (see
// TestScenarios); what is OpenAI's own, or its compatible servers', is
// here.

func TestEnvironmentIgnored(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env-000000")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	c, srv := setup(t, func(c *openai.Config) { c.APIKey = "" })
	_, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
	if !errors.Is(err, provider.ErrAuth) {
		t.Errorf("err = %v, want ErrAuth: the environment's key must not be sent", err)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q, want none", h)
	}
}

func TestQuotaIsNotRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.APIError(429, "insufficient_quota", "insufficient_quota",
		"You exceeded your current quota, please check your plan and billing details."), openaitest.Text("no"))
	_, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
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

func TestProxyErrorPage(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *openai.Config) { c.MaxRetries = -1 })
	srv.Script(openaitest.RawError(502, "<html><body>502 Bad Gateway</body></html>"))
	_, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
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
			_, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
			var pe *provider.Error
			if !errors.As(err, &pe) || !errors.Is(err, tt.kind) || pe.Message != tt.message {
				t.Errorf("err = %v, want %v with message %q", err, tt.kind, tt.message)
			}
		})
	}
}

// OpenRouter reports a failure mid-reply as an ordinary chunk with an error
// object and finish_reason "error". It is a stream error like OpenAI's:
// retried while nothing has reached the caller, else a partial reply —
// never a finished answer.
func TestErrorChunk(t *testing.T) {
	t.Parallel()
	const code, msg = "server_error", "Provider disconnected unexpectedly"
	tests := []struct {
		name     string
		reply    openaitest.Reply
		wantType string
		wantMsg  string
		wantText string
	}{
		{"error object", openaitest.Text("Half an answer, then nothing.").ErrorChunkAfter(2, code, msg), code, msg, "Half an an"},
		{"finish_reason alone", openaitest.Text("Cut").FinishReason("error"), "", `finish_reason "error"`, "Cut"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, srv := setup(t, nil)
			srv.Script(tt.reply, openaitest.Text("again"))
			var d adaptertest.Deltas
			resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), d.Add)
			var pe *provider.Error
			if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnavailable) {
				t.Fatalf("err = %v (stop reason %q), want ErrUnavailable", err, resp.StopReason)
			}
			if pe.Type != tt.wantType || !strings.Contains(pe.Message, tt.wantMsg) || pe.Status != 200 || !pe.Partial {
				t.Errorf("err = %+v, want type %q, message %q, status 200, partial", pe, tt.wantType, tt.wantMsg)
			}
			if got := strings.Join(d.All(), ""); got != tt.wantText || resp.Text() != got {
				t.Errorf("deltas %q, partial text %q, want %q", got, resp.Text(), tt.wantText)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("fake got %d requests, want 1: text had been delivered", n)
			}
		})
	}
}

func TestErrorChunkBeforeTextRetried(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.Text("never seen").ErrorChunkAfter(0, "server_error", "Provider disconnected unexpectedly"), openaitest.Text("second try"))
	var d adaptertest.Deltas
	resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), d.Add)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got := strings.Join(d.All(), ""); got != "second try" || resp.Text() != "second try" {
		t.Errorf("deltas %q, text %q, want only the second try", got, resp.Text())
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("fake got %d requests, want 2", n)
	}
}
