package anthropic_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
)

const (
	testKey   = "sk-ant-api03-TESTKEY-0123456789abcdef"
	testModel = "claude-test-1"
)

var bashSchema = json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"shell command"},"timeout":{"type":"integer"}},"required":["command"],"additionalProperties":false}`)

// setup starts a fake and a client pointed at it; edit adjusts the config.
func setup(t *testing.T, edit func(*anthropic.Config)) (*anthropic.Client, *anthropictest.Server) {
	t.Helper()
	srv := anthropictest.New(testKey)
	t.Cleanup(srv.Close)
	cfg := anthropic.Config{APIKey: testKey, BaseURL: srv.URL(), Model: testModel}
	if edit != nil {
		edit(&cfg)
	}
	c, err := anthropic.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, srv
}

func ask(text string) provider.Request {
	return provider.Request{
		System:   "You are latch.",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: text}}}},
	}
}

// deltas collects what onText receives.
type deltas struct {
	mu  sync.Mutex
	got []string
}

func (d *deltas) add(s string) { d.mu.Lock(); d.got = append(d.got, s); d.mu.Unlock() }
func (d *deltas) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

func jsonEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("%s = %s, want %s", what, gb, wb)
	}
}

func TestStreamText(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	const reply = "Hello! Here is a reply that arrives in several pieces."
	srv.Script(anthropictest.Text(reply).Usage(42, 17))

	var d deltas
	resp, err := c.Stream(t.Context(), ask("hi"), d.add)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	got := d.all()
	if len(got) < 3 {
		t.Errorf("got %d deltas, want the reply in several pieces: %q", len(got), got)
	}
	if joined := strings.Join(got, ""); joined != reply {
		t.Errorf("deltas joined = %q, want %q", joined, reply)
	}
	if resp.Text() != reply {
		t.Errorf("response text = %q, want %q", resp.Text(), reply)
	}
	if resp.StopReason != provider.StopEndTurn {
		t.Errorf("stop reason = %q, want end_turn", resp.StopReason)
	}
	if resp.Usage != (provider.Usage{InputTokens: 42, OutputTokens: 17}) {
		t.Errorf("usage = %+v, want 42 in, 17 out", resp.Usage)
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
	input := `{"command":"ls -la /tmp","timeout":30}`
	srv.Script(
		anthropictest.Text("Let me look.").AndToolUse("toolu_01", "bash", input),
		anthropictest.Text("There are two files."),
	)
	req := ask("what is in /tmp?")
	req.Tools = []provider.Tool{{Name: "bash", Description: "Run a shell command.", Schema: bashSchema}}

	var d deltas
	resp, err := c.Stream(t.Context(), req, d.add)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.StopReason != provider.StopToolUse {
		t.Errorf("stop reason = %q, want tool_use", resp.StopReason)
	}
	if strings.Join(d.all(), "") != "Let me look." {
		t.Errorf("deltas = %q, want only the text", d.all())
	}
	uses := resp.ToolUses()
	if len(uses) != 1 || uses[0].ID != "toolu_01" || uses[0].Name != "bash" {
		t.Fatalf("tool uses = %+v, want one bash call toolu_01", uses)
	}
	jsonEqual(t, "tool input", uses[0].Input, []byte(input))

	tools := srv.Requests()[0].Params.Tools
	if len(tools) != 1 || tools[0].Name != "bash" || tools[0].Description != "Run a shell command." {
		t.Fatalf("tools sent = %+v, want bash with its description", tools)
	}
	jsonEqual(t, "input_schema", tools[0].InputSchema, bashSchema)

	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: resp.Content},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{
			{Type: provider.BlockToolResult, ID: "toolu_01", Text: "a.txt\nb.txt"},
		}},
	)
	resp2, err := c.Stream(t.Context(), req, nil)
	if err != nil {
		t.Fatalf("second Stream: %v", err)
	}
	if resp2.Text() != "There are two files." {
		t.Errorf("second reply = %q", resp2.Text())
	}
	msgs := srv.Requests()[1].Params.Messages
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want 3", len(msgs))
	}
	asst := msgs[1]
	if asst.Role != "assistant" || len(asst.Content) != 2 || asst.Content[0].Text != "Let me look." || asst.Content[1].Type != "tool_use" {
		t.Fatalf("assistant message sent back = %+v", asst)
	}
	jsonEqual(t, "tool_use input sent back", asst.Content[1].Input, []byte(input))
	res := msgs[2].Content[0]
	if msgs[2].Role != "user" || res.Type != "tool_result" || res.ToolUseID != "toolu_01" || res.ResultText() != "a.txt\nb.txt" || res.IsError {
		t.Errorf("tool result sent = %+v (text %q), want tool_result for toolu_01", res, res.ResultText())
	}
}

func TestToolResultError(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Text("Sorry."))
	req := ask("run it")
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
