// Package adaptertest holds what the tests of the provider adapters share:
// scenarios every client must come through the same way — a streamed
// reply, and the failures it must sort, retry or give up on — run against
// each client and its fake through a Kit, and the small helpers the
// adapters' own tests use.
package adaptertest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/adapter"
)

// Reply is what the scenarios need of a fake's reply type R: the faults
// and the usage a scripted turn can carry. anthropictest.Reply and
// openaitest.Reply have these methods.
type Reply[R any] interface {
	Usage(in, out int) R
	Delay(d time.Duration) R
	CutAfter(n int) R
	EndAfter(n int) R
	StallAfter(n int) R
	ErrorAfter(n int, errType, message string) R
	PauseAfter(n int, d time.Duration) R
	LingerEnd(d time.Duration) R
}

// Kit is one client under test and its fake, as the scenarios drive them.
type Kit[R Reply[R]] struct {
	Key   string // the key the fake accepts and Start configures
	Model string // the model Start configures
	// Start starts a fake that accepts Key and a client pointed at it;
	// edit (never nil) adjusts the client's config first.
	Start func(t *testing.T, edit func(*adapter.Config)) (provider.Provider, Fake[R])
	// New makes a client of cfg. It returns cfg as the adapter's own
	// Config too, for the scenarios that print it.
	New func(cfg adapter.Config) (config any, c provider.Provider, err error)

	// The fake's replies.
	Text        func(s string) R
	ToolUse     func(id, name, input string) R
	APIError    func(status int, errType, message string) R
	RateLimited func(retryAfter time.Duration) R
	ServerError func() R
	Overloaded  func() R

	// OverloadedStatus is the HTTP status of Overloaded.
	OverloadedStatus int
	// StreamErrType and StreamErrMessage are what the API says in the
	// error it sends inside a stream when it gives up on a reply.
	StreamErrType, StreamErrMessage string
}

// Fake is the fake server of one scenario.
type Fake[R any] struct {
	URL     string                // the base URL a client is configured with
	Script  func(replies ...R)    // queues replies
	Models  func(names ...string) // limits the models the fake knows
	Headers func() []http.Header  // the headers of every request received, in order
	Close   func()
}

// Server is what NewFake needs of a fake whose replies are R and whose
// record of requests holds Q.
type Server[R, Q any] interface {
	URL() string
	Script(replies ...R)
	Models(names ...string)
	Requests() []Q
	Close()
}

// NewFake is srv as a scenario uses it; header reads a request's headers.
func NewFake[R, Q any](srv Server[R, Q], header func(Q) http.Header) Fake[R] {
	return Fake[R]{
		URL:    srv.URL(),
		Script: srv.Script,
		Models: srv.Models,
		Headers: func() []http.Header {
			var out []http.Header
			for _, r := range srv.Requests() {
				out = append(out, header(r))
			}
			return out
		},
		Close: srv.Close,
	}
}

// BashSchema is the input schema of a bash tool, as the agent sends it.
var BashSchema = json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"shell command"},"timeout":{"type":"integer"}},"required":["command"],"additionalProperties":false}`)

// ToolInput is the input of the bash call in ToolUseRoundTrip.
const ToolInput = `{"command":"ls -la /tmp","timeout":30}`

// ToolUseRoundTrip drives c through a turn that calls a tool: a request
// offering bash, which the caller's fake answers with "Let me look." and a
// bash call id with ToolInput; then the call's result "a.txt\nb.txt" sent
// back, which the fake answers with "There are two files.". It checks what
// c made of both replies; the caller checks what its fake received.
func ToolUseRoundTrip(t *testing.T, c provider.Provider, id string) {
	t.Helper()
	req := Ask("what is in /tmp?")
	req.Tools = []provider.Tool{{Name: "bash", Description: "Run a shell command.", Schema: BashSchema}}

	var d Deltas
	resp, err := c.Stream(t.Context(), req, d.Add)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.StopReason != provider.StopToolUse {
		t.Errorf("stop reason = %q, want tool_use", resp.StopReason)
	}
	if strings.Join(d.All(), "") != "Let me look." {
		t.Errorf("deltas = %q, want only the text", d.All())
	}
	uses := resp.ToolUses()
	if len(uses) != 1 || uses[0].ID != id || uses[0].Name != "bash" {
		t.Fatalf("tool uses = %+v, want one bash call %s", uses, id)
	}
	JSONEqual(t, "tool input", uses[0].Input, []byte(ToolInput))

	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: resp.Content},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{
			{Type: provider.BlockToolResult, ID: id, Text: "a.txt\nb.txt"},
		}},
	)
	resp2, err := c.Stream(t.Context(), req, nil)
	if err != nil {
		t.Fatalf("second Stream: %v", err)
	}
	if resp2.Text() != "There are two files." {
		t.Errorf("second reply = %q", resp2.Text())
	}
}

// Ask is a request with a system prompt and one user message saying text.
func Ask(text string) provider.Request {
	return provider.Request{
		System:   "You are latch.",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: text}}}},
	}
}

// Deltas collects what onText receives.
type Deltas struct {
	mu  sync.Mutex
	got []string
}

// Add is an onText.
func (d *Deltas) Add(s string) { d.mu.Lock(); d.got = append(d.got, s); d.mu.Unlock() }

// All returns the deltas received so far.
func (d *Deltas) All() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

// JSONEqual fails t unless got and want are the same JSON value.
func JSONEqual(t *testing.T, what string, got, want []byte) {
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

// Setup makes a client with newClient of cfg, adjusted first by edit if
// it is not nil, and closes srv, the client's fake, when t ends.
func Setup[C, P any](t *testing.T, srv interface{ Close() }, cfg C, edit func(*C), newClient func(C) (P, error)) P {
	t.Helper()
	t.Cleanup(srv.Close)
	if edit != nil {
		edit(&cfg)
	}
	c, err := newClient(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}
