package openai_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/adapter"
	"github.com/latchd/latch/agent/provider/internal/adaptertest"
	"github.com/latchd/latch/agent/provider/openai"
	"github.com/latchd/latch/agent/provider/openai/openaitest"
)

const (
	testKey   = "sk-proj-TESTKEY-0123456789abcdef"
	testModel = "gpt-test-1"
)

// setup starts a fake and a client pointed at it; edit adjusts the config.
func setup(t *testing.T, edit func(*openai.Config)) (*openai.Client, *openaitest.Server) {
	t.Helper()
	srv := openaitest.New(testKey)
	cfg := openai.Config{APIKey: testKey, BaseURL: srv.URL(), Model: testModel}
	return adaptertest.Setup(t, srv, cfg, edit, openai.New), srv
}

// kit is the client and its fake as the shared scenarios drive them.
func kit() adaptertest.Kit[openaitest.Reply] {
	return adaptertest.Kit[openaitest.Reply]{
		Key:   testKey,
		Model: testModel,
		Start: func(t *testing.T, edit func(*adapter.Config)) (provider.Provider, adaptertest.Fake[openaitest.Reply]) {
			c, srv := setup(t, func(c *openai.Config) { edit((*adapter.Config)(c)) })
			return c, adaptertest.NewFake(srv, func(r openaitest.Request) http.Header { return r.Header })
		},
		New: func(cfg adapter.Config) (any, provider.Provider, error) {
			c, err := openai.New(openai.Config(cfg))
			return openai.Config(cfg), c, err
		},
		Text:    openaitest.Text,
		ToolUse: openaitest.ToolUse,
		APIError: func(status int, errType, message string) openaitest.Reply {
			return openaitest.APIError(status, errType, "", message)
		},
		RateLimited:      openaitest.RateLimited,
		ServerError:      openaitest.ServerError,
		Overloaded:       openaitest.Overloaded,
		OverloadedStatus: 503,
		StreamErrType:    "server_error",
		StreamErrMessage: "The server had an error",
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
	srv.Script(openaitest.Text("Hello!"))
	if _, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("fake got %d requests, want 1", len(reqs))
	}
	p := reqs[0].Params
	if p.Model != testModel || !p.Stream {
		t.Errorf("request model=%q stream=%v", p.Model, p.Stream)
	}
	if len(p.Messages) != 2 || p.Messages[0].Role != "system" || p.Messages[0].Text() != "You are latch." ||
		p.Messages[1].Role != "user" || p.Messages[1].Text() != "hi" {
		t.Errorf("messages = %+v, want the system prompt then the user's text", p.Messages)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q, want the configured key", got)
	}
	// Only fields every compatible server knows.
	if got, want := reqs[0].Fields(), []string{"messages", "model", "stream", "stream_options"}; !slices.Equal(got, want) {
		t.Errorf("request fields = %v, want %v", got, want)
	}
}

// TestTextBlocksJoin: a message's text blocks are one content string,
// separated by a blank line, with empty blocks left out.
func TestTextBlocksJoin(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(openaitest.Text("ok"))
	text := func(s string) provider.Block { return provider.Block{Type: provider.BlockText, Text: s} }
	req := adaptertest.Ask("first")
	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{text("one"), text(""), text("two"), text("three")}},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{text(""), text("only")}})
	if _, err := c.Stream(t.Context(), req, nil); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var got []string
	for _, m := range srv.Requests()[0].Params.Messages {
		got = append(got, m.Role+": "+m.Text())
	}
	want := []string{"system: You are latch.", "user: first", "assistant: one\n\ntwo\n\nthree", "user: only"}
	if !slices.Equal(got, want) {
		t.Errorf("messages = %q, want %q", got, want)
	}
}

func TestLocalServerWithoutKey(t *testing.T) {
	t.Parallel()
	srv := openaitest.New("") // like Ollama: no key needed
	t.Cleanup(srv.Close)
	c, err := openai.New(openai.Config{BaseURL: srv.URL(), Model: "llama3.2"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Script(openaitest.Text("local reply"))
	req := adaptertest.Ask("hi")
	req.MaxTokens = 256
	resp, err := c.Stream(t.Context(), req, nil)
	if err != nil || resp.Text() != "local reply" {
		t.Fatalf("Stream = %q, %v", resp.Text(), err)
	}
	r := srv.Requests()[0]
	if h := r.Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q, want none with no key", h)
	}
	if r.Params.MaxTokens != 256 || r.Params.MaxCompletionTokens != 0 {
		t.Errorf("max_tokens=%d max_completion_tokens=%d, want max_tokens 256", r.Params.MaxTokens, r.Params.MaxCompletionTokens)
	}
}

func TestServerRefusingStreamOptions(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.RejectFields("stream_options")
	srv.Script(openaitest.Text("first"), openaitest.Text("second"))
	for _, want := range []string{"first", "second"} {
		resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
		if err != nil || resp.Text() != want {
			t.Fatalf("Stream = %q, %v; want %q", resp.Text(), err, want)
		}
	}
	var with []bool
	for _, r := range srv.Requests() {
		with = append(with, slices.Contains(r.Fields(), "stream_options"))
	}
	if !slices.Equal(with, []bool{true, false, false}) {
		t.Errorf("stream_options sent in requests: %v, want only the first (refused) one", with)
	}
}

func TestReasoningModelGetsMaxCompletionTokens(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, func(c *openai.Config) { c.Model = "gpt-5-mini" })
	srv.Script(openaitest.Text("ok"))
	req := adaptertest.Ask("hi")
	req.MaxTokens = 1000
	if _, err := c.Stream(t.Context(), req, nil); err != nil {
		t.Fatalf("Stream: %v", err)
	}
	p := srv.Requests()[0].Params
	if p.MaxTokens != 0 || p.MaxCompletionTokens != 1000 {
		t.Errorf("max_tokens=%d max_completion_tokens=%d, want max_completion_tokens 1000", p.MaxTokens, p.MaxCompletionTokens)
	}
}

func TestSDKRefusalIsModelError(t *testing.T) {
	t.Parallel()
	// go-openai refuses tools with this reasoning model before sending.
	c, srv := setup(t, func(c *openai.Config) { c.Model = goopenai.GPT6Sol })
	req := adaptertest.Ask("hi")
	req.Tools = []provider.Tool{{Name: "bash", Schema: adaptertest.BashSchema}}
	_, err := c.Stream(t.Context(), req, nil)
	if !errors.Is(err, provider.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, goopenai.GPT6Sol) {
		t.Errorf("Describe = %q, want the model", msg)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("fake got %d requests, want none", n)
	}
}

func TestToolUseRoundTrip(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(
		openaitest.Text("Let me look.").AndToolUse("call_abc", "bash", adaptertest.ToolInput),
		openaitest.Text("There are two files."),
	)
	adaptertest.ToolUseRoundTrip(t, c, "call_abc")

	tools := srv.Requests()[0].Params.Tools
	if len(tools) != 1 || tools[0].Type != "function" || tools[0].Function.Name != "bash" || tools[0].Function.Description != "Run a shell command." {
		t.Fatalf("tools sent = %+v, want the bash function", tools)
	}
	adaptertest.JSONEqual(t, "parameters", tools[0].Function.Parameters, adaptertest.BashSchema)

	msgs := srv.Requests()[1].Params.Messages
	if len(msgs) != 4 {
		t.Fatalf("second request has %d messages, want 4: %+v", len(msgs), msgs)
	}
	asst := msgs[2]
	if asst.Role != "assistant" || asst.Text() != "Let me look." || len(asst.ToolCalls) != 1 {
		t.Fatalf("assistant message sent back = %+v", asst)
	}
	tc := asst.ToolCalls[0]
	if tc.ID != "call_abc" || tc.Type != "function" || tc.Function.Name != "bash" {
		t.Errorf("tool call sent back = %+v", tc)
	}
	adaptertest.JSONEqual(t, "arguments sent back", []byte(tc.Function.Arguments), []byte(adaptertest.ToolInput))
	if tool := msgs[3]; tool.Role != "tool" || tool.ToolCallID != "call_abc" || tool.Text() != "a.txt\nb.txt" {
		t.Errorf("tool message = %+v (text %q), want the result for call_abc", tool, tool.Text())
	}
}

func TestParallelToolCallsAndResults(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(
		openaitest.ToolUse("call_1", "read", `{"path":"a.txt"}`).AndToolUse("call_2", "read", `{"path":"b.txt"}`),
		openaitest.Text("done"),
	)
	req := adaptertest.Ask("read both")
	req.Tools = []provider.Tool{{Name: "read", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
	resp, err := c.Stream(t.Context(), req, nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	uses := resp.ToolUses()
	if len(uses) != 2 || uses[0].ID != "call_1" || uses[1].ID != "call_2" {
		t.Fatalf("tool uses = %+v, want call_1 and call_2 in order", uses)
	}
	adaptertest.JSONEqual(t, "second input", uses[1].Input, []byte(`{"path":"b.txt"}`))

	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: resp.Content},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{
			{Type: provider.BlockToolResult, ID: "call_1", Text: "alpha"},
			{Type: provider.BlockToolResult, ID: "call_2", Text: "no such file", IsError: true},
			{Type: provider.BlockText, Text: "and be brief"},
		}},
	)
	if _, err := c.Stream(t.Context(), req, nil); err != nil {
		t.Fatalf("second Stream: %v", err)
	}
	msgs := srv.Requests()[1].Params.Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if want := []string{"system", "user", "assistant", "tool", "tool", "user"}; !slices.Equal(roles, want) {
		t.Fatalf("roles = %v, want %v", roles, want)
	}
	if msgs[2].Text() != "" || msgs[2].Content != nil {
		t.Errorf("assistant content = %s, want none beside the tool calls", msgs[2].Content)
	}
	if msgs[4].ToolCallID != "call_2" || msgs[4].Text() != "Error: no such file" {
		t.Errorf("failed tool message = %+v (%q), want the error marked", msgs[4], msgs[4].Text())
	}
	if msgs[5].Text() != "and be brief" {
		t.Errorf("user text after the results = %q", msgs[5].Text())
	}
}

func TestToolCallVariants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reply     openaitest.Reply
		wantIDs   []string
		wantInput []string
		wantStop  string
	}{
		{
			name:      "whole calls without index",
			reply:     openaitest.ToolUse("c1", "ls", `{"path":"."}`).AndToolUse("c2", "ls", `{"path":"/"}`).WholeToolCalls().NoToolCallIndex(),
			wantIDs:   []string{"c1", "c2"},
			wantInput: []string{`{"path":"."}`, `{"path":"/"}`},
			wantStop:  provider.StopToolUse,
		},
		{
			// Ollama 0.20 (ollama/ollama#15457).
			name:      "whole calls all under index 0",
			reply:     openaitest.ToolUse("c1", "ls", `{"path":"a"}`).AndToolUse("c2", "ls", `{"path":"b"}`).WholeToolCalls().SameToolCallIndex(),
			wantIDs:   []string{"c1", "c2"},
			wantInput: []string{`{"path":"a"}`, `{"path":"b"}`},
			wantStop:  provider.StopToolUse,
		},
		{
			name:      "pieces all under index 0",
			reply:     openaitest.ToolUse("c1", "ls", `{"path":"some/long/path"}`).AndToolUse("c2", "ls", `{"path":"/"}`).SameToolCallIndex(),
			wantIDs:   []string{"c1", "c2"},
			wantInput: []string{`{"path":"some/long/path"}`, `{"path":"/"}`},
			wantStop:  provider.StopToolUse,
		},
		{
			name:      "pieces without index",
			reply:     openaitest.ToolUse("c1", "ls", `{"path":"some/long/path"}`).NoToolCallIndex(),
			wantIDs:   []string{"c1"},
			wantInput: []string{`{"path":"some/long/path"}`},
			wantStop:  provider.StopToolUse,
		},
		{
			name:      "finish_reason stop with tool calls",
			reply:     openaitest.ToolUse("c1", "ls", `{}`).FinishReason("stop"),
			wantIDs:   []string{"c1"},
			wantInput: []string{`{}`},
			wantStop:  provider.StopToolUse,
		},
		{
			name:      "no id and no arguments",
			reply:     openaitest.ToolUse("", "ls", "").WholeToolCalls(),
			wantIDs:   []string{"call_0"},
			wantInput: []string{`{}`},
			wantStop:  provider.StopToolUse,
		},
		{
			name:      "arguments that are not JSON",
			reply:     openaitest.ToolUse("c1", "ls", `{"path": "unterminated`),
			wantIDs:   []string{"c1"},
			wantInput: []string{`"{\"path\": \"unterminated"`},
			wantStop:  provider.StopToolUse,
		},
		{
			name:      "cut by max tokens",
			reply:     openaitest.Text("Long").FinishReason("length"),
			wantStop:  provider.StopMaxTokens,
			wantIDs:   nil,
			wantInput: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, srv := setup(t, nil)
			srv.Script(tt.reply)
			resp, err := c.Stream(t.Context(), adaptertest.Ask("go"), nil)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if resp.StopReason != tt.wantStop {
				t.Errorf("stop reason = %q, want %q", resp.StopReason, tt.wantStop)
			}
			uses := resp.ToolUses()
			if len(uses) != len(tt.wantIDs) {
				t.Fatalf("tool uses = %+v, want ids %v", uses, tt.wantIDs)
			}
			for i, u := range uses {
				if u.ID != tt.wantIDs[i] || u.Name != "ls" {
					t.Errorf("call %d = %s %s, want %s ls", i, u.ID, u.Name, tt.wantIDs[i])
				}
				if string(u.Input) != tt.wantInput[i] {
					t.Errorf("call %d input = %s, want %s", i, u.Input, tt.wantInput[i])
				}
			}
		})
	}
}

// Arguments a model got wrong stay in the history as it sent them, but go
// back to the server as {}: Ollama and vLLM (and the fake) refuse a request
// whose history holds a call with arguments that are not a JSON object,
// which would leave the session failing until /new.
func TestBadArgumentsRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, args, finish string }{
		{"cut by max tokens", `{"path": "big.py", "content": "import os\n`, "length"},
		{"two objects run together", `{"path":"a"}{"path":"b"}`, ""},
		{"not an object", `["a","b"]`, ""},
		{"not JSON", `path=a`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, srv := setup(t, nil)
			srv.Script(openaitest.ToolUse("c1", "ls", tt.args).FinishReason(tt.finish), openaitest.Text("sorry"))
			req := adaptertest.Ask("go")
			resp, err := c.Stream(t.Context(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			uses := resp.ToolUses()
			if len(uses) != 1 {
				t.Fatalf("tool uses = %+v, want one", uses)
			}
			var kept string
			if err := json.Unmarshal(uses[0].Input, &kept); err != nil || kept != tt.args {
				t.Errorf("input kept = %s, want the arguments as a JSON string", uses[0].Input)
			}
			req.Messages = append(req.Messages,
				provider.Message{Role: provider.RoleAssistant, Content: resp.Content},
				provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockToolResult, ID: "c1", IsError: true}}},
			)
			if _, err := c.Stream(t.Context(), req, nil); err != nil {
				t.Fatalf("the next request failed: %v", err)
			}
			msgs := srv.Requests()[1].Params.Messages
			if got := msgs[2].ToolCalls[0].Function.Arguments; got != "{}" {
				t.Errorf("arguments sent back = %q, want {}", got)
			}
			if got := msgs[3].Text(); got != "Error: " {
				t.Errorf("empty error result = %q, want the error marker", got)
			}
		})
	}
}
