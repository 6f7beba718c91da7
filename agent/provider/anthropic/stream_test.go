package anthropic_test

import (
	"bytes"
	"cmp"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/agent/provider/internal/adaptertest"
)

// A turn that thinks, says something and calls a tool, written every way
// the event-stream format allows, reads the same every time.
func TestFramings(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	var random []int
	for range 500 {
		random = append(random, 1+rnd.IntN(40))
	}
	framings := map[string]anthropictest.Framing{
		"byte by byte":   {Pieces: []int{1}},
		"random pieces":  {Pieces: random},
		"crlf":           {LineEnding: "\r\n"},
		"crlf in pieces": {LineEnding: "\r\n", Pieces: []int{1, 2, 3, 5, 8}},
		"lone cr":        {LineEnding: "\r", Pieces: []int{3}},
		"noise":          {Noise: true},
		"multi-line":     {MultiLine: true},
		"no space":       {NoSpace: true},
		"everything":     {LineEnding: "\r\n", Pieces: random, Noise: true, MultiLine: true, NoSpace: true},
	}
	const text = "Ünïcode — and \"quotes\",\nnew lines\tand tabs ✓"
	const input = `{"command":"printf '%s\\n' \"héllo ✓\"","timeout":30,"env":{"A":[1,2.5,null,true]}}`
	for name, f := range framings {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, srv := setup(t, nil)
			srv.Script(anthropictest.Reply{}.AndThinking("Let me think about this.").AndText(text).
				AndToolUse("toolu_1", "bash", input).Usage(11, 22).Framed(f))
			var d adaptertest.Deltas
			resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), d.Add)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if got := strings.Join(d.All(), ""); got != text || resp.Text() != text {
				t.Errorf("deltas %q, text %q, want %q (and no thinking)", got, resp.Text(), text)
			}
			uses := resp.ToolUses()
			if len(uses) != 1 || uses[0].ID != "toolu_1" || string(uses[0].Input) != input {
				t.Errorf("tool uses = %+v, want toolu_1 with its input byte for byte", uses)
			}
			if len(resp.Content) != 2 || resp.StopReason != provider.StopToolUse || resp.Usage != (provider.Usage{InputTokens: 11, OutputTokens: 22}) {
				t.Errorf("response = %+v, want text and tool_use, stop tool_use, usage 11/22", resp)
			}
		})
	}
}

func TestLargeEvents(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	text := strings.Repeat("0123456789", 20_000) // 200 KB in one text_delta
	input := `{"content":"` + strings.Repeat("abcdefghij", 20_000) + `"}`
	srv.Script(anthropictest.Text(text).AndToolUse("toolu_1", "write", input).Chunk(len(input)))
	resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Text() != text {
		t.Errorf("text is %d bytes, want %d", len(resp.Text()), len(text))
	}
	if uses := resp.ToolUses(); len(uses) != 1 || string(uses[0].Input) != input {
		t.Errorf("tool input wrong: %d uses", len(uses))
	}
}

func TestToolInputInManyPieces(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	first := `{"path":"a \"quoted\" name ✓.txt","content":"line 1\nline 2\\n","n":[1,{"x":null}]}`
	second := `{"command":"ls"}`
	srv.Script(anthropictest.ToolUse("toolu_1", "write_file", first).
		AndToolUse("toolu_2", "bash", second).
		AndToolUse("toolu_3", "ls", ""). // no parameters: only the empty opening piece
		Chunk(1))                        // input_json_delta pieces of two characters
	resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	uses := resp.ToolUses()
	want := []struct{ id, name, input string }{{"toolu_1", "write_file", first}, {"toolu_2", "bash", second}, {"toolu_3", "ls", "{}"}}
	if len(uses) != len(want) {
		t.Fatalf("got %d tool uses, want %d: %+v", len(uses), len(want), uses)
	}
	for i, w := range want {
		if uses[i].ID != w.id || uses[i].Name != w.name || string(uses[i].Input) != w.input {
			t.Errorf("tool use %d = %s %s %s, want %s %s %s", i, uses[i].ID, uses[i].Name, uses[i].Input, w.id, w.name, w.input)
		}
	}
}

func TestStopReasonsPassThrough(t *testing.T) {
	t.Parallel()
	for _, stop := range []string{provider.StopMaxTokens, "refusal", "stop_sequence", "pause_turn"} {
		c, srv := setup(t, nil)
		srv.Script(anthropictest.Text("cut").StopReason(stop))
		resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
		if err != nil || resp.StopReason != stop {
			t.Errorf("stop reason = %q, %v; want %q", resp.StopReason, err, stop)
		}
	}
}

func TestErrorEventKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ  string
		kind error
		reqs int
	}{
		{"invalid_request_error", provider.ErrRequest, 1},
		{"rate_limit_error", provider.ErrRateLimited, 2},
		{"some_new_error", provider.ErrUnavailable, 2},
	}
	for _, tt := range tests {
		c, srv := setup(t, func(c *anthropic.Config) { c.MaxRetries = 1 })
		srv.Script(anthropictest.Text("x").ErrorAfter(0, tt.typ, "no"), anthropictest.Text("x").ErrorAfter(0, tt.typ, "no"))
		_, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
		if !errors.Is(err, tt.kind) || len(srv.Requests()) != tt.reqs {
			t.Errorf("%s: err = %v after %d requests, want %v after %d", tt.typ, err, len(srv.Requests()), tt.kind, tt.reqs)
		}
	}
}

func TestCutInToolInput(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	// Two text deltas, then the connection drops inside the tool input.
	srv.Script(anthropictest.Text("Let me").AndToolUse("toolu_1", "bash", `{"command":"rm -rf /tmp/x"}`).Chunk(3).CutAfter(4))
	resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnavailable) || !pe.Partial {
		t.Fatalf("err = %v, want a partial ErrUnavailable", err)
	}
	if resp.Text() != "Let me" || len(resp.ToolUses()) != 0 {
		t.Errorf("partial response = %+v, want the text and no half tool call", resp.Content)
	}
}

func TestRetryAfterMilliseconds(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.Overloaded().Header("Retry-After-Ms", "400"), anthropictest.Text("ok"))
	start := time.Now()
	resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
	if err != nil || resp.Text() != "ok" {
		t.Fatalf("Stream = %q, %v; want ok", resp.Text(), err)
	}
	if waited := time.Since(start); waited < 380*time.Millisecond {
		t.Errorf("retried after %v, want the 400ms retry-after-ms", waited)
	}
}

func TestShouldRetryFalse(t *testing.T) {
	t.Parallel()
	c, srv := setup(t, nil)
	srv.Script(anthropictest.ServerError().Header("X-Should-Retry", "false"), anthropictest.Text("not asked for"))
	if _, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil); !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1: the API said not to retry", n)
	}
}

// raw serves one fixed answer, for what the fake does not produce.
func raw(t *testing.T, status int, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const (
	start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
	text0 = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	// A block type latch does not know, with fields unlike text's.
	mystery = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"mystery\",\"text\":{\"rich\":true},\"id\":5}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"mystery_delta\",\"text\":[1,2]}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	stop = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":7,\"cache_read_input_tokens\":100,\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

func TestStreamShapes(t *testing.T) {
	t.Parallel()
	dataOnly := func(s string) string { // what a proxy that drops event names sends
		var b strings.Builder
		for line := range strings.SplitSeq(s, "\n") {
			if !strings.HasPrefix(line, "event: ") {
				b.WriteString(line + "\n")
			}
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	tests := []struct {
		name    string
		status  int
		ctype   string
		body    string
		text    string
		kind    error
		message string
	}{
		{name: "whole", body: start + text0 + stop, text: "Hi"},
		{name: "data only", body: dataOnly(start + text0 + stop), text: "Hi"},
		{name: "block of a type added later", body: start + mystery + strings.ReplaceAll(text0, `"index":0`, `"index":1`) + stop, text: "Hi"},
		{name: "message_stop not ended", body: start + text0 + strings.TrimSuffix(stop, "\n\n"), text: "Hi",
			kind: provider.ErrUnavailable, message: "before message_stop"},
		{name: "delta for a block never started", body: start + strings.Replace(text0, `"index":0,"delta"`, `"index":3,"delta"`, 1) + stop,
			kind: provider.ErrUnavailable, message: "content block 3"},
		{name: "block out of order", body: start + strings.Replace(text0, `"index":0,"content_block"`, `"index":1,"content_block"`, 1) + stop,
			kind: provider.ErrUnavailable, message: "index 1, expected 0"},
		{name: "malformed event", body: start + "event: content_block_start\ndata: {not json\n\n" + stop,
			kind: provider.ErrUnavailable, message: "malformed content_block_start"},
		{name: "malformed error event", body: start + "event: error\ndata: Internal Server Error\n\n",
			kind: provider.ErrUnavailable, message: "Internal Server Error"},
		{name: "html 502", status: 502, ctype: "text/html", body: "<html><body>Bad Gateway</body></html>",
			kind: provider.ErrUnavailable, message: "Bad Gateway"},
		{name: "413 from a proxy", status: 413, ctype: "text/plain", body: "too big",
			kind: provider.ErrRequest, message: "Request Entity Too Large"},
		{name: "json, not a stream", ctype: "application/json", body: `{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}]}`,
			kind: provider.ErrUnavailable, message: "before message_stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := raw(t, cmp.Or(tt.status, 200), cmp.Or(tt.ctype, "text/event-stream"), tt.body)
			c, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: base, Model: testModel, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil)
			if tt.kind == nil {
				if err != nil || resp.Text() != tt.text {
					t.Fatalf("Stream = %q, %v; want %q", resp.Text(), err, tt.text)
				}
				if resp.Usage != (provider.Usage{InputTokens: 107, OutputTokens: 3}) {
					t.Errorf("usage = %+v, want message_delta's counts, cache reads included", resp.Usage)
				}
				return
			}
			var pe *provider.Error
			if !errors.As(err, &pe) || !errors.Is(err, tt.kind) || !strings.Contains(pe.Message, tt.message) {
				t.Fatalf("err = %v, want %v saying %q", err, tt.kind, tt.message)
			}
			if resp.Text() != tt.text {
				t.Errorf("partial text = %q, want %q", resp.Text(), tt.text)
			}
		})
	}
}

// The key goes only to the configured host: a redirect elsewhere goes
// without it (net/http drops Authorization there, but not x-api-key).
func TestRedirectKeepsKeyHome(t *testing.T) {
	t.Parallel()
	fake := anthropictest.New(testKey)
	t.Cleanup(fake.Close)
	away := httptest.NewServer(http.RedirectHandler(fake.URL()+"/v1/messages", http.StatusTemporaryRedirect))
	t.Cleanup(away.Close)
	c, err := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: away.URL, Model: testModel})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stream(t.Context(), adaptertest.Ask("hi"), nil); !errors.Is(err, provider.ErrAuth) {
		t.Errorf("err = %v, want ErrAuth from the other host, which got no key", err)
	}
	for _, r := range fake.Requests() {
		if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Authorization") != "" {
			t.Errorf("the key followed a redirect to another host: %v", r.Header)
		}
	}

	// Within the same host it is kept.
	target, _ := url.Parse(fake.URL())
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.RedirectHandler("/moved/v1/messages", http.StatusPermanentRedirect))
	mux.Handle("/moved/", http.StripPrefix("/moved", httputil.NewSingleHostReverseProxy(target)))
	home := httptest.NewServer(mux)
	t.Cleanup(home.Close)
	c2, _ := anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: home.URL, Model: testModel})
	fake.Script(anthropictest.Text("moved"))
	resp, err := c2.Stream(t.Context(), adaptertest.Ask("hi"), nil)
	if err != nil || resp.Text() != "moved" {
		t.Errorf("Stream through a same-host redirect = %q, %v; want moved", resp.Text(), err)
	}
	reqs := fake.Requests()
	if last := reqs[len(reqs)-1]; !bytes.Contains(last.Body, []byte(`"stream":true`)) {
		t.Errorf("the redirected request lost its body: %s", last.Body)
	}
}
