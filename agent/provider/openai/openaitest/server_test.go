package openaitest_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/provider/openai/openaitest"
)

const key = "sk-fake-0123456789"

func post(t *testing.T, srv *openaitest.Server, body, auth string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readData returns the data lines of a stream, [DONE] included.
func readData(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func TestStreamShape(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(key)
	defer srv.Close()
	srv.Script(openaitest.Text("Hello world").AndToolUse("call_1", "bash", `{"command":"ls -la"}`).Usage(9, 4))
	resp := post(t, srv, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "Bearer "+key)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q", ct)
	}
	data := readData(t, resp.Body)
	if len(data) == 0 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", data)
	}
	var text, args strings.Builder
	var finish string
	argPieces, usageChunks := 0, 0
	for _, d := range data[:len(data)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(d), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("bad chunk %s: %v", d, err)
		}
		if c.Usage != nil {
			usageChunks++
			if len(c.Choices) != 0 || c.Usage.PromptTokens != 9 || c.Usage.CompletionTokens != 4 {
				t.Errorf("usage chunk = %s", d)
			}
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == nil || *tc.Index != 0 {
					t.Errorf("tool call without index 0: %s", d)
				}
				if tc.Function.Arguments != "" {
					argPieces++
				}
				args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if text.String() != "Hello world" || args.String() != `{"command":"ls -la"}` || argPieces < 2 {
		t.Errorf("text %q, arguments %q in %d pieces", text.String(), args.String(), argPieces)
	}
	if finish != "tool_calls" || usageChunks != 1 {
		t.Errorf("finish_reason %q, %d usage chunks; want tool_calls and 1", finish, usageChunks)
	}
}

func TestErrorsInAPIShape(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(key)
	defer srv.Close()
	srv.Models("m")
	tests := []struct {
		name, body, auth string
		status           int
		code, msg        string
	}{
		{"wrong key", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Bearer sk-wrong-000000000", 401, "invalid_api_key", "sk-*"},
		{"no key", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "", 401, "", "didn't provide an API key"},
		{"unknown model", `{"model":"x","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Bearer " + key, 404, "model_not_found", "`x` does not exist"},
		{"orphan tool message", `{"model":"m","stream":true,"messages":[{"role":"tool","tool_call_id":"c","content":"out"}]}`, "Bearer " + key, 400, "", "preceeding message with 'tool_calls'"},
		{"unanswered call", `{"model":"m","stream":true,"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"?"}]}`,
			"Bearer " + key, 400, "", "did not have response messages: c1"},
		{"arguments not an object", `{"model":"m","stream":true,"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}{\"b\":2}"}}]},{"role":"tool","tool_call_id":"c1","content":"out"}]}`,
			"Bearer " + key, 400, "", "invalid tool call arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, srv, tt.body, tt.auth)
			var body struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    *string
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			code := ""
			if body.Error.Code != nil {
				code = *body.Error.Code
			}
			if resp.StatusCode != tt.status || code != tt.code || !strings.Contains(body.Error.Message, tt.msg) {
				t.Errorf("got %d %+v (code %q), want %d code %q containing %q", resp.StatusCode, body.Error, code, tt.status, tt.code, tt.msg)
			}
			if strings.Contains(body.Error.Message, "sk-wrong-000000000") {
				t.Errorf("401 repeats the whole key: %q", body.Error.Message)
			}
		})
	}
}

// OpenRouter's report of a failure mid-reply: after the content sent so
// far, a chunk with an error object and finish_reason "error", and no
// [DONE].
func TestErrorChunkShape(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(key)
	defer srv.Close()
	srv.Script(openaitest.Text("Hello world").ErrorChunkAfter(1, "server_error", "Provider disconnected"))
	resp := post(t, srv, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "Bearer "+key)
	data := readData(t, resp.Body)
	if len(data) != 3 {
		t.Fatalf("got %d data lines, want the role chunk, one content chunk and the error chunk: %q", len(data), data)
	}
	var last struct {
		chunk
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(data[2]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Object != "chat.completion.chunk" || len(last.Choices) != 1 || last.Choices[0].FinishReason == nil ||
		*last.Choices[0].FinishReason != "error" || last.Error.Code != "server_error" || last.Error.Message != "Provider disconnected" {
		t.Errorf("error chunk = %s", data[2])
	}
}

func TestEmptyKeyAcceptsAnyRequest(t *testing.T) {
	t.Parallel()
	srv := openaitest.New("")
	defer srv.Close()
	srv.Script(openaitest.Text("a"), openaitest.Text("b"))
	for _, auth := range []string{"", "Bearer anything"} {
		resp := post(t, srv, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, auth)
		data := readData(t, resp.Body)
		if resp.StatusCode != 200 || data[len(data)-1] != "[DONE]" {
			t.Errorf("auth %q: got %d %q", auth, resp.StatusCode, data)
		}
		for _, d := range data {
			if strings.Contains(d, `"usage"`) {
				t.Errorf("usage sent without stream_options.include_usage: %s", d)
			}
		}
	}
}
