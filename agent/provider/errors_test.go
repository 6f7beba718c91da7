package provider_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	base := provider.Error{Provider: "anthropic", Model: "claude-x", Endpoint: "https://api.example.com"}
	with := func(edit func(*provider.Error)) error {
		e := base
		edit(&e)
		return &e
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"cancelled", fmt.Errorf("anthropic: %w", context.Canceled), "The request to the model was stopped."},
		{"deadline", fmt.Errorf("anthropic: %w", context.DeadlineExceeded), "The model took too long to answer."},
		{"foreign", errors.New("boom"), "The call to the model failed."},
		{"bad key", with(func(e *provider.Error) { e.Kind, e.Status = provider.ErrAuth, 401 }),
			"The model provider rejected the API key (401). Check [agent] api_key."},
		{"no key", with(func(e *provider.Error) { e.Kind, e.Status, e.NoKey = provider.ErrAuth, 401, true }),
			"The model provider needs an API key (401). Set [agent] api_key."},
		{"forbidden", with(func(e *provider.Error) { e.Kind, e.Status = provider.ErrAuth, 403 }),
			"The model provider refused this API key access (403). Check [agent] api_key and what the key is allowed to use."},
		{"unknown model", with(func(e *provider.Error) { e.Kind, e.Status = provider.ErrModel, 404 }),
			`The model provider does not offer the model "claude-x" (404). Check [agent] model and base_url.`},
		{"no model", with(func(e *provider.Error) { e.Kind, e.Model = provider.ErrModel, "" }),
			"No model is configured. Set [agent] model."},
		{"refused before sending", with(func(e *provider.Error) { e.Kind, e.Message = provider.ErrModel, "tools need the Responses API" }),
			`The model "claude-x" cannot be used here: tools need the Responses API.`},
		{"rate limited", with(func(e *provider.Error) { e.Kind, e.Status, e.RetryAfter = provider.ErrRateLimited, 429, 90*time.Second }),
			"The model provider is rate-limiting requests (429). Try again in 2 minutes."},
		{"rate limited, no hint", with(func(e *provider.Error) { e.Kind, e.Status = provider.ErrRateLimited, 429 }),
			"The model provider is rate-limiting requests (429). Try again in a minute."},
		{"overloaded", with(func(e *provider.Error) { e.Kind, e.Status = provider.ErrUnavailable, 529 }),
			"The model provider is overloaded or having trouble (529). Try again shortly."},
		{"overloaded in stream", with(func(e *provider.Error) { e.Kind, e.Status, e.Type = provider.ErrUnavailable, 200, "overloaded_error" }),
			"The model provider is overloaded or having trouble. Try again shortly."},
		{"unreachable", with(func(e *provider.Error) { e.Kind = provider.ErrUnavailable }),
			"Could not reach the model provider at https://api.example.com. Check that it is running and [agent] base_url."},
		{"partial", with(func(e *provider.Error) { e.Kind, e.Status, e.Partial = provider.ErrUnavailable, 200, true }),
			"The connection to the model provider broke off in the middle of the reply. Send the message again."},
		{"idle", with(func(e *provider.Error) { e.Kind, e.Idle = provider.ErrUnavailable, 5*time.Minute }),
			"The model provider sent nothing for 5 minutes, so the request was abandoned. Try again."},
		{"ended early", with(func(e *provider.Error) { e.Kind, e.Status = provider.ErrUnavailable, 200 }),
			"The model provider ended the reply before it was complete. Try again."},
		{"refused request", with(func(e *provider.Error) { e.Kind, e.Status, e.Message = provider.ErrRequest, 400, "prompt is too long" }),
			"The model provider refused the request (400): prompt is too long."},
		{"wrapped", fmt.Errorf("agent: %w", with(func(e *provider.Error) { e.Kind, e.Status = provider.ErrAuth, 401 })),
			"The model provider rejected the API key (401). Check [agent] api_key."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := provider.Describe(tt.err); got != tt.want {
				t.Errorf("Describe() = %q\n want %q", got, tt.want)
			}
		})
	}
}

func TestErrorMatchesItsKindOnly(t *testing.T) {
	t.Parallel()
	kinds := []error{provider.ErrAuth, provider.ErrModel, provider.ErrRateLimited, provider.ErrUnavailable, provider.ErrRequest}
	for _, k := range kinds {
		err := fmt.Errorf("wrapped: %w", &provider.Error{Provider: "p", Kind: k})
		for _, other := range kinds {
			if got := errors.Is(err, other); got != (other == k) {
				t.Errorf("errors.Is(%v error, %v) = %v", k, other, got)
			}
		}
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	e := &provider.Error{Provider: "openai", Kind: provider.ErrRateLimited, Status: 429, Type: "rate_limit_exceeded",
		Message: "slow down", RetryAfter: 2 * time.Second}
	want := "openai: rate limited (HTTP 429): rate_limit_exceeded: slow down (retry after 2s)"
	if got := e.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	const key = "sk-secret-123456"
	tests := []struct {
		name, in, want string
		secrets        []string
	}{
		{"key", "bad key " + key + " given", "bad key [redacted] given", []string{key}},
		{"twice", key + key, "[redacted][redacted]", []string{key}},
		{"empty secret ignored", "plain text", "plain text", []string{""}},
		{"short secret ignored", "a b c", "a b c", []string{"a"}},
		{"lines joined", "one\n  two\r\nthree", "one two three", nil},
		{"long cut", strings.Repeat("é", 400), strings.Repeat("é", 150) + "…", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := provider.Scrub(tt.in, tt.secrets...); got != tt.want {
				t.Errorf("Scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://api.anthropic.com", "https://api.anthropic.com"},
		{"http://user:secret@localhost:11434/v1?key=abc", "http://localhost:11434"},
		{"not a url", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := provider.Endpoint(tt.in); got != tt.want {
			t.Errorf("Endpoint(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestResponseHelpers(t *testing.T) {
	t.Parallel()
	r := provider.Response{Content: []provider.Block{
		{Type: provider.BlockText, Text: "a"},
		{Type: provider.BlockToolUse, ID: "1", Name: "x"},
		{Type: provider.BlockText, Text: "b"},
	}}
	if r.Text() != "ab" {
		t.Errorf("Text() = %q, want ab", r.Text())
	}
	if u := r.ToolUses(); len(u) != 1 || u[0].ID != "1" {
		t.Errorf("ToolUses() = %+v", u)
	}
}
