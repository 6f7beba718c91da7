package anthropictest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
)

const key = "sk-ant-fake-key"

func post(t *testing.T, srv *anthropictest.Server, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type sse struct {
	name string
	data map[string]any
}

// readEvents takes a stream with LF line ends apart as the event-stream
// format says: optional space after the colon, comments, data lines joined
// with "\n", a blank line dispatching an event that has data.
func readEvents(t *testing.T, r io.Reader) []sse {
	t.Helper()
	var out []sse
	var name, data string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != "" {
				var d map[string]any
				if err := json.Unmarshal([]byte(strings.TrimSuffix(data, "\n")), &d); err != nil {
					t.Fatalf("event %s: bad JSON: %v", name, err)
				}
				if name == "" {
					name, _ = d["type"].(string)
				}
				if d["type"] != name {
					t.Errorf("event %s carries type %v", name, d["type"])
				}
				out = append(out, sse{name, d})
			}
			name, data = "", ""
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data += value + "\n"
		}
	}
	return out
}

const hello = `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

func TestStreamShape(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(key)
	defer srv.Close()
	srv.Script(anthropictest.Text("Hello world").AndToolUse("toolu_1", "bash", `{"command":"ls -la"}`))
	resp := post(t, srv, hello, nil)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q", ct)
	}
	evs := readEvents(t, resp.Body)
	var names []string
	var text, input strings.Builder
	jsonPieces := 0
	for _, e := range evs {
		names = append(names, e.name)
		if e.name == "content_block_delta" {
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				text.WriteString(d["text"].(string))
			case "input_json_delta":
				input.WriteString(d["partial_json"].(string))
				jsonPieces++
			}
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_delta content_block_stop content_block_start"
	if got := strings.Join(names, " "); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "content_block_stop message_delta message_stop") {
		t.Errorf("events = %s", got)
	}
	if text.String() != "Hello world" || input.String() != `{"command":"ls -la"}` || jsonPieces < 3 {
		t.Errorf("text %q, input %q in %d pieces", text.String(), input.String(), jsonPieces)
	}
	md := evs[len(evs)-2].data
	if md["delta"].(map[string]any)["stop_reason"] != "tool_use" {
		t.Errorf("message_delta = %v, want stop_reason tool_use", md)
	}
}

func TestErrorsInAPIShape(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(key)
	defer srv.Close()
	tests := []struct {
		name    string
		body    string
		header  map[string]string
		status  int
		errType string
		msg     string
	}{
		{"wrong key", hello, map[string]string{"X-Api-Key": "nope"}, 401, "authentication_error", "invalid x-api-key"},
		{"bearer is accepted too", hello, map[string]string{"X-Api-Key": "", "Authorization": "Bearer " + key}, 400, "invalid_request_error", "no reply scripted"},
		{"no version", hello, map[string]string{"Anthropic-Version": ""}, 400, "invalid_request_error", "anthropic-version"},
		{"orphan tool_result", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"out"}]}]}`,
			nil, 400, "invalid_request_error", "unexpected `tool_use_id`"},
		{"unanswered tool_use", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}]},{"role":"user","content":"well?"}]}`,
			nil, 400, "invalid_request_error", "without `tool_result`"},
		{"empty text", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`,
			nil, 400, "invalid_request_error", "non-empty"},
		{"whitespace text", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"\n"}]},{"role":"user","content":"well?"}]}`,
			nil, 400, "invalid_request_error", "non-whitespace"},
		{"whitespace system", `{"model":"m","max_tokens":10,"stream":true,"system":[{"type":"text","text":" "}],"messages":[{"role":"user","content":"hi"}]}`,
			nil, 400, "invalid_request_error", "non-whitespace"},
		{"whitespace tool result", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"\n"}]}]}]}`,
			nil, 400, "invalid_request_error", "non-whitespace"},
		{"four breakpoints", `{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"bash","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"bash","input":{},"cache_control":{"type":"ephemeral"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"out","cache_control":{"type":"ephemeral","ttl":"5m"}}]}]}`,
			nil, 400, "invalid_request_error", "no reply scripted"},
		{"five breakpoints", `{"model":"m","max_tokens":10,"stream":true,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"c","cache_control":{"type":"ephemeral"}},{"type":"text","text":"d","cache_control":{"type":"ephemeral"}},{"type":"text","text":"e","cache_control":{"type":"ephemeral"}}]}]}`,
			nil, 400, "invalid_request_error", "A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"breakpoint of another type", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"persistent"}}]}]}`,
			nil, 400, "invalid_request_error", "messages.0.content.0.cache_control.type"},
		{"breakpoint with another ttl", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1d"}}]}]}`,
			nil, 400, "invalid_request_error", "cache_control.ttl"},
		{"breakpoint on a thinking block", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"x","cache_control":{"type":"ephemeral"}},{"type":"text","text":"ok"}]},{"role":"user","content":"and?"}]}`,
			nil, 400, "invalid_request_error", "messages.1.content.0.thinking.cache_control"},
		{"breakpoint on empty text", `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"","cache_control":{"type":"ephemeral"}}]}]}`,
			nil, 400, "invalid_request_error", "cannot be set for empty text blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, srv, tt.body, tt.header)
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type, Message string
				} `json:"error"`
				RequestID string `json:"request_id"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || body.Type != "error" || body.Error.Type != tt.errType ||
				!strings.Contains(body.Error.Message, tt.msg) || body.RequestID == "" {
				t.Errorf("got %d %+v, want %d %s containing %q", resp.StatusCode, body, tt.status, tt.errType, tt.msg)
			}
		})
	}
	if n := len(srv.Requests()); n != len(tests) {
		t.Errorf("recorded %d requests, want %d", n, len(tests))
	}
}

func TestRateLimitedHeader(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(key)
	defer srv.Close()
	srv.Script(anthropictest.RateLimited(1500 * time.Millisecond)) // rounds up to 2s
	resp := post(t, srv, hello, nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("got %d Retry-After %q, want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func get(t *testing.T, srv *anthropictest.Server, path string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestModelsAPI(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(key)
	defer srv.Close()
	srv.Models("claude-sonnet-4-5", "claude-opus-4-1", "claude-3-5-haiku")

	status, m := get(t, srv, "/v1/models/claude-sonnet-4-5", nil)
	if status != 200 || m["type"] != "model" || m["id"] != "claude-sonnet-4-5" || m["display_name"] != "Claude Sonnet 4.5" || m["created_at"] == nil {
		t.Errorf("GET model = %d %v", status, m)
	}
	status, m = get(t, srv, "/v1/models/claude-nope", nil)
	if e, _ := m["error"].(map[string]any); status != 404 || e["type"] != "not_found_error" {
		t.Errorf("GET unknown model = %d %v, want 404 not_found_error", status, m)
	}
	status, _ = get(t, srv, "/v1/models", map[string]string{"X-Api-Key": "nope"})
	if status != 401 {
		t.Errorf("GET models with a wrong key = %d, want 401", status)
	}

	var pages []string
	after := ""
	for range 3 {
		path := "/v1/models?limit=2"
		if after != "" {
			path += "&after_id=" + after
		}
		status, page := get(t, srv, path, nil)
		if status != 200 {
			t.Fatalf("GET %s = %d %v", path, status, page)
		}
		var ids []string
		for _, d := range page["data"].([]any) {
			ids = append(ids, d.(map[string]any)["id"].(string))
		}
		pages = append(pages, fmt.Sprintf("%v more=%v first=%v last=%v", ids, page["has_more"], page["first_id"], page["last_id"]))
		if page["has_more"] != true {
			break
		}
		after = page["last_id"].(string)
	}
	want := []string{
		"[claude-sonnet-4-5 claude-opus-4-1] more=true first=claude-sonnet-4-5 last=claude-opus-4-1",
		"[claude-3-5-haiku] more=false first=claude-3-5-haiku last=claude-3-5-haiku",
	}
	if strings.Join(pages, "\n") != strings.Join(want, "\n") {
		t.Errorf("pages:\n%s\nwant:\n%s", strings.Join(pages, "\n"), strings.Join(want, "\n"))
	}

	srv.Models()
	status, page := get(t, srv, "/v1/models", nil)
	if status != 200 || len(page["data"].([]any)) != 0 || page["first_id"] != nil || page["has_more"] != false {
		t.Errorf("empty list = %d %v, want no data and null ids", status, page)
	}
}

// Every Framing is still an event stream a standard reader takes apart the
// same way.
func TestFramingKeepsEvents(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(key)
	defer srv.Close()
	reply := anthropictest.Text("Hello world").AndThinking("hm").AndToolUse("toolu_1", "bash", `{"command":"ls"}`)
	srv.Script(reply, reply.Framed(anthropictest.Framing{Pieces: []int{1, 7}, MultiLine: true, Noise: true, NoSpace: true}))
	var got []string
	for range 2 {
		resp := post(t, srv, hello, nil)
		var names []string
		for _, e := range readEvents(t, resp.Body) {
			if e.name != "ping" && e.name != "future_event" {
				names = append(names, e.name)
			}
		}
		got = append(got, strings.Join(names, " "))
	}
	if got[0] != got[1] || !strings.HasSuffix(got[1], "message_delta message_stop") {
		t.Errorf("framed events:\n%s\nwant as plain:\n%s", got[1], got[0])
	}
}
