package anthropic_test

import (
	"net/http"
	"testing"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/agent/provider/internal/adapter"
	"github.com/latchd/latch/agent/provider/internal/adaptertest"
)

const (
	testKey   = "sk-ant-api03-TESTKEY-0123456789abcdef"
	testModel = "claude-test-1"
)

// setup starts a fake and a client pointed at it; edit adjusts the config.
func setup(t *testing.T, edit func(*anthropic.Config)) (*anthropic.Client, *anthropictest.Server) {
	t.Helper()
	srv := anthropictest.New(testKey)
	cfg := anthropic.Config{APIKey: testKey, BaseURL: srv.URL(), Model: testModel}
	return adaptertest.Setup(t, srv, cfg, edit, anthropic.New), srv
}

// kit is the client and its fake as the shared scenarios drive them.
func kit() adaptertest.Kit[anthropictest.Reply] {
	return adaptertest.Kit[anthropictest.Reply]{
		Key:   testKey,
		Model: testModel,
		Start: func(t *testing.T, edit func(*adapter.Config)) (provider.Provider, adaptertest.Fake[anthropictest.Reply]) {
			c, srv := setup(t, func(c *anthropic.Config) { edit((*adapter.Config)(c)) })
			return c, adaptertest.NewFake(srv, func(r anthropictest.Request) http.Header { return r.Header })
		},
		New: func(cfg adapter.Config) (any, provider.Provider, error) {
			c, err := anthropic.New(anthropic.Config(cfg))
			return anthropic.Config(cfg), c, err
		},
		Text:             anthropictest.Text,
		ToolUse:          anthropictest.ToolUse,
		APIError:         anthropictest.APIError,
		RateLimited:      anthropictest.RateLimited,
		ServerError:      anthropictest.ServerError,
		Overloaded:       anthropictest.Overloaded,
		OverloadedStatus: 529,
		StreamErrType:    "overloaded_error",
		StreamErrMessage: "Overloaded",
	}
}

// The scenarios every adapter shares: a streamed reply, and the failures.
func TestScenarios(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, kit())
}

// What a request sends; what comes back is the StreamText scenario's.
func TestRequest(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("Hello!"))
	if _, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("fake got %d requests, want 1", len(reqs))
	}
	p := reqs[0].Params
	if p.Model != testModel || !p.Stream || p.MaxTokens != anthropic.DefaultMaxTokens {
		t.Errorf("request model=%q stream=%v max_tokens=%d, want %q true %d", p.Model, p.Stream, p.MaxTokens, testModel, anthropic.DefaultMaxTokens)
	}
	if p.SystemText() != "You are latch." {
		t.Errorf("system = %q, want the system prompt", p.SystemText())
	}
	if len(p.Messages) != 1 || p.Messages[0].Role != "user" || p.Messages[0].Content[0].Text != "hi" {
		t.Errorf("messages = %+v, want one user message \"hi\"", p.Messages)
	}
	h := reqs[0].Header
	if got := h.Get("X-Api-Key"); got != testKey {
		t.Errorf("x-api-key = %q, want the configured key", got)
	}
	if got := h.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none: the API documents x-api-key", got)
	}
	for k, want := range map[string]string{"Anthropic-Version": "2023-06-01", "Content-Type": "application/json", "Accept": "text/event-stream"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if reqs[0].Method != "POST" || reqs[0].Path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", reqs[0].Method, reqs[0].Path)
	}
}

func TestToolUseRoundTrip(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(
		anthropictest.Text("Let me look.").AndToolUse("toolu_01", "bash", adaptertest.ToolInput),
		anthropictest.Text("There are two files."),
	)
	adaptertest.ToolUseRoundTrip(t, c, "toolu_01")

	tools := srv.Requests()[0].Params.Tools
	if len(tools) != 1 || tools[0].Name != "bash" || tools[0].Description != "Run a shell command." {
		t.Fatalf("tools sent = %+v, want bash with its description", tools)
	}
	adaptertest.JSONEqual(t, "input_schema", tools[0].InputSchema, adaptertest.BashSchema)

	msgs := srv.Requests()[1].Params.Messages
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want 3", len(msgs))
	}
	asst := msgs[1]
	if asst.Role != "assistant" || len(asst.Content) != 2 || asst.Content[0].Text != "Let me look." || asst.Content[1].Type != "tool_use" {
		t.Fatalf("assistant message sent back = %+v", asst)
	}
	adaptertest.JSONEqual(t, "tool_use input sent back", asst.Content[1].Input, []byte(adaptertest.ToolInput))
	res := msgs[2].Content[0]
	if msgs[2].Role != "user" || res.Type != "tool_result" || res.ToolUseID != "toolu_01" || res.ResultText() != "a.txt\nb.txt" || res.IsError {
		t.Errorf("tool result sent = %+v (text %q), want tool_result for toolu_01", res, res.ResultText())
	}
}

func TestToolResultError(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("Sorry."))
	req := adaptertest.Ask("run it")
	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{
			{Type: provider.BlockText, Text: ""}, // dropped: the API refuses empty text
			{Type: provider.BlockToolUse, ID: "toolu_9", Name: "bash"},
		}},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{
			{Type: provider.BlockToolResult, ID: "toolu_9", Text: "exit status 2", IsError: true},
		}},
	)
	if _, err := c.Stream(t.Context(), req, nil); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	msgs := srv.Requests()[0].Params.Messages
	if got := msgs[1].Content; len(got) != 1 || string(got[0].Input) != "{}" {
		t.Errorf("assistant content = %+v, want the tool_use alone with input {}", got)
	}
	if res := msgs[2].Content[0]; !res.IsError || res.ResultText() != "exit status 2" {
		t.Errorf("tool result = %+v, want is_error with the text", res)
	}
}
