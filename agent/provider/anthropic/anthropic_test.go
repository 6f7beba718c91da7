package anthropic_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
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

// The API refuses a text block that is only whitespace, and a message
// without content. A reply of only a line break, or a history an older
// version stored with one, must not break every later request: blank text
// is left out, and a message left empty says so — "(no answer)", as the
// agent stores an empty reply — so user and assistant still alternate.
func TestBlankTextNotSent(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("\n"), anthropictest.Text("ok"))
	text := func(s string) provider.Block { return provider.Block{Type: provider.BlockText, Text: s} }
	req := adaptertest.Ask("what is in /tmp?")
	resp, err := c.Stream(t.Context(), req, nil)
	if err != nil || resp.Text() != "\n" {
		t.Fatalf("Stream = %q, %v; want a line break", resp.Text(), err)
	}
	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: resp.Content},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{text("hello?")}},
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{
			text(" \n\t"),
			{Type: provider.BlockToolUse, ID: "toolu_1", Name: "bash", Input: json.RawMessage(`{"command":"echo"}`)},
		}},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{
			{Type: provider.BlockToolResult, ID: "toolu_1", Text: "\n"},
			text("  "),
		}},
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{text("")}},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{text("\n")}},
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{text("Yes?")}},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{text("go on")}},
	)
	if _, err := c.Stream(t.Context(), req, nil); err != nil {
		t.Fatalf("the next request failed: %v", err)
	}
	var got []string
	for _, m := range srv.Requests()[1].Params.Messages {
		for _, b := range m.Content {
			got = append(got, fmt.Sprintf("%s %s %q %q", m.Role, b.Type, b.Text, b.ResultText()))
		}
	}
	want := []string{
		`user text "what is in /tmp?" ""`,
		`assistant text "(no answer)" ""`,
		`user text "hello?" ""`,
		`assistant tool_use "" ""`,
		`user tool_result "" ""`,
		`assistant text "(no answer)" ""`,
		`user text "(empty message)" ""`,
		`assistant text "Yes?" ""`,
		`user text "go on" ""`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("blocks sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Every step of a turn sends the whole history again; cache breakpoints
// let the API read what it has seen from its cache instead, at a tenth of
// the price and, on most models, outside the input-tokens-per-minute
// limit. One marks the end of the tools (or the system prompt), which stay
// the same all session; one the end of the history, which the next step
// sends again with a little more.
func TestPromptCaching(t *testing.T) {
	t.Parallel()
	tools := []provider.Tool{{Name: "ls"}, {Name: "bash", Schema: adaptertest.BashSchema}}
	afterTool := []provider.Message{
		{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockToolUse, ID: "toolu_1", Name: "bash"}}},
		{Role: provider.RoleUser, Content: []provider.Block{
			{Type: provider.BlockToolResult, ID: "toolu_1", Text: "a.txt"},
			{Type: provider.BlockText, Text: "\n"}, // left out: the breakpoint goes on the result
		}},
	}
	tests := []struct {
		name   string
		edit   func(*provider.Request)
		want   []string
		system bool
	}{
		{"tools", func(r *provider.Request) { r.Tools = tools }, []string{"tools.1", "messages.0.content.0"}, true},
		{"no tools", func(r *provider.Request) {}, []string{"system.0", "messages.0.content.0"}, true},
		{"no tools, no system", func(r *provider.Request) { r.System = "" }, []string{"messages.0.content.0"}, false},
		{"blank system", func(r *provider.Request) { r.System = " \n" }, []string{"messages.0.content.0"}, false},
		{"after a tool call", func(r *provider.Request) {
			r.Tools = tools
			r.Messages = append(r.Messages, afterTool...)
		}, []string{"tools.1", "messages.2.content.0"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, srv := setup(t, nil)
			srv.Script(anthropictest.Text("ok"))
			req := adaptertest.Ask("hi")
			tt.edit(&req)
			if _, err := c.Stream(t.Context(), req, nil); err != nil {
				t.Fatalf("Stream: %v", err)
			}
			p := srv.Requests()[0].Params
			if got := p.Breakpoints(); !slices.Equal(got, tt.want) {
				t.Errorf("cache breakpoints at %q, want %q", got, tt.want)
			}
			if got := p.SystemText(); (got != "") != tt.system {
				t.Errorf("system = %q, want one: %v", got, tt.system)
			}
			body := srv.Requests()[0].Body
			if n := bytes.Count(body, []byte(`"cache_control":{"type":"ephemeral"}`)); n != len(tt.want) {
				t.Errorf("%d cache_control of type ephemeral in the body, want %d: %s", n, len(tt.want), body)
			}
		})
	}
}
