package coder

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
)

// These tests replay event streams the real CLIs wrote (recorded from the
// tests that run them, see claude_test.go and codex_test.go) through the
// decoders, without a process: what the chat is shown, what is stored,
// and what latch answers on the CLI's standard input.

// stdin collects what a Stream writes to the CLI.
type stdin struct {
	bytes.Buffer
	closed bool
}

func (s *stdin) Close() error { s.closed = true; return nil }

// replayTurn is a Turn over a store, with no process behind it.
func replayTurn(t *testing.T, cli CLI, policy agent.Policy) (*Turn, *recorder, *stdin) {
	b := New(Config{CLI: cli, Policy: policy, Store: openDB(t, filepath.Join(t.TempDir(), "latch.db"))})
	in := &stdin{}
	ev := newRecorder()
	ev.approvals = make(chan agent.Approval, 1<<10)
	ev.startedCh = make(chan agent.ToolCall, 1<<10)
	tr := &Turn{b: b, key: testKey, ev: ev, in: in, prompt: "hi", decisions: make(chan decision, 16),
		asks: make(map[string]*ask), calls: make(map[string]*call)}
	return tr, ev, in
}

func replay(t *testing.T, s Stream, file string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(raw) {
		if err := s.Line(bytes.TrimSpace(line)); err != nil {
			t.Fatalf("line %.80s: %v", line, err)
		}
	}
}

// sent decodes the JSON lines written to the CLI's standard input.
func sent(t *testing.T, in *stdin) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := json.NewDecoder(bytes.NewReader(in.Bytes()))
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("latch wrote a line that is not JSON: %v", err)
		}
		out = append(out, m)
	}
}

func TestClaudeDecodeAllowed(t *testing.T) {
	policy := agent.DefaultPolicy()
	policy[agent.ToolBash] = agent.Allow
	tr, ev, in := replayTurn(t, &ClaudeCode{Policy: policy}, policy)
	replay(t, &claudeStream{c: &ClaudeCode{Policy: policy}, t: tr}, "claude-allowed.jsonl")
	text, _, started, done := ev.snapshot()
	if text != "All done." {
		t.Errorf("streamed text %q, want the answer's deltas joined", text)
	}
	if len(started) != 1 || started[0].Name != "Bash" || started[0].Summary != "echo from-the-tool > out.txt" {
		t.Errorf("started %+v", started)
	}
	if len(done) != 1 || done[0].result.Err != nil {
		t.Errorf("finished %+v", done)
	}
	if tr.out == nil || tr.out.Text != "All done." || tr.out.CostUSD <= 0 || tr.out.Turns != 2 || tr.out.Session == "" || tr.out.Err != nil {
		t.Errorf("outcome %+v", tr.out)
	}
	// The hook's answer leaves the allowed call to Claude Code.
	msgs := sent(t, in)
	if len(msgs) != 1 || msgs[0]["type"] != "control_response" {
		t.Fatalf("wrote %v, want one control response", msgs)
	}
	resp := msgs[0]["response"].(map[string]any)
	if resp["subtype"] != "success" || len(resp["response"].(map[string]any)) != 0 {
		t.Errorf("hook answer %v, want success with no decision", resp)
	}
}

func TestClaudeDecodeAsk(t *testing.T) {
	policy := agent.DefaultPolicy()
	tr, ev, in := replayTurn(t, &ClaudeCode{Policy: policy}, policy)
	replay(t, &claudeStream{c: &ClaudeCode{Policy: policy}, t: tr}, "claude-ask.jsonl")
	var a agent.Approval
	select {
	case a = <-ev.approvals:
	default:
		t.Fatal("no approval request")
	}
	if a.Tool != "Bash" || a.Detail != "echo asked > asked.txt" {
		t.Errorf("approval %+v", a)
	}
	if err := tr.b.Decide(testKey, a.ID, agent.Approve); err != nil {
		t.Fatal(err)
	}
	tr.decide(<-tr.decisions)
	msgs := sent(t, in)
	if len(msgs) != 2 {
		t.Fatalf("wrote %d lines, want the hook's and the permission's answers", len(msgs))
	}
	hook := msgs[0]["response"].(map[string]any)["response"].(map[string]any)["hookSpecificOutput"].(map[string]any)
	if hook["permissionDecision"] != "ask" {
		t.Errorf("hook answered %v, want ask", hook)
	}
	perm := msgs[1]["response"].(map[string]any)
	if perm["request_id"] == "" || perm["response"].(map[string]any)["behavior"] != "allow" {
		t.Errorf("permission answer %v, want allow", perm)
	}
	if err := tr.b.Decide(testKey, a.ID, agent.Approve); err == nil {
		t.Error("an approval was answered twice")
	}
}

// TestClaudeApprovalOtherChat: a press from another chat's key does not
// answer the request.
func TestClaudeApprovalOtherChat(t *testing.T) {
	policy := agent.DefaultPolicy()
	tr, ev, _ := replayTurn(t, &ClaudeCode{Policy: policy}, policy)
	replay(t, &claudeStream{c: &ClaudeCode{Policy: policy}, t: tr}, "claude-ask.jsonl")
	a := <-ev.approvals
	if err := tr.b.Decide(agent.SessionKey{Gateway: "discord", Chat: "42"}, a.ID, agent.Approve); err == nil {
		t.Error("another chat answered the request")
	}
}

// TestApprovalExpires: an unanswered request is denied once its time is up.
func TestApprovalExpires(t *testing.T) {
	policy := agent.DefaultPolicy()
	tr, ev, in := replayTurn(t, &ClaudeCode{Policy: policy}, policy)
	replay(t, &claudeStream{c: &ClaudeCode{Policy: policy}, t: tr}, "claude-ask.jsonl")
	a := <-ev.approvals
	tr.expire(time.Now().Add(time.Hour))
	msgs := sent(t, in)
	perm := msgs[len(msgs)-1]["response"].(map[string]any)["response"].(map[string]any)
	if perm["behavior"] != "deny" || !strings.Contains(perm["message"].(string), "did not answer") {
		t.Errorf("expired request answered %v, want deny", perm)
	}
	if err := tr.b.Decide(testKey, a.ID, agent.Approve); err == nil {
		t.Error("an expired request could still be approved")
	}
}

func TestCodexDecode(t *testing.T) {
	tr, ev, in := replayTurn(t, &Codex{}, agent.DefaultPolicy())
	s := &codexStream{t: tr}
	if err := s.Begin(); err != nil || in.String() != "hi" || !in.closed {
		t.Fatalf("Begin wrote %q (closed %v), %v; want the prompt, then EOF", in.String(), in.closed, err)
	}
	replay(t, s, "codex-turn.jsonl")
	text, _, started, done := ev.snapshot()
	if text != "All done." || len(started) != 1 || started[0].Name != "shell" || len(done) != 1 || done[0].result.Err != nil {
		t.Errorf("text %q, started %+v, done %+v", text, started, done)
	}
	if tr.out == nil || tr.out.Text != "All done." || tr.out.Tokens != 220 || tr.session == "" {
		t.Errorf("outcome %+v, session %q", tr.out, tr.session)
	}
}

// TestCodexSandboxMapping documents what each policy maps to.
func TestCodexSandboxMapping(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     map[string]agent.Permission
		sandbox string
		network bool
	}{
		{"default", nil, SandboxReadOnly, false},
		{"bash allowed only", map[string]agent.Permission{agent.ToolBash: agent.Allow}, SandboxReadOnly, false},
		{"bash and edits allowed", map[string]agent.Permission{agent.ToolBash: agent.Allow, agent.ToolWrite: agent.Allow, agent.ToolEdit: agent.Allow}, SandboxWorkspaceWrite, false},
		{"and fetch", map[string]agent.Permission{agent.ToolBash: agent.Allow, agent.ToolWrite: agent.Allow, agent.ToolEdit: agent.Allow, agent.ToolFetch: agent.Allow}, SandboxWorkspaceWrite, true},
		{"fetch without edits", map[string]agent.Permission{agent.ToolFetch: agent.Allow}, SandboxReadOnly, false},
	} {
		p := agent.DefaultPolicy()
		for k, v := range tc.set {
			p[k] = v
		}
		sandbox, network := CodexSandbox(p)
		if sandbox != tc.sandbox || network != tc.network {
			t.Errorf("%s: sandbox %s, network %v; want %s, %v", tc.name, sandbox, network, tc.sandbox, tc.network)
		}
		_, args := (&Codex{Policy: p}).Command("", "")
		if joined := strings.Join(args, " "); !strings.Contains(joined, "--sandbox "+tc.sandbox) ||
			!strings.Contains(joined, `approval_policy="never"`) || strings.Contains(joined, "danger") {
			t.Errorf("%s: command line %q", tc.name, joined)
		}
	}
}

// TestClaudeCommandLine: the policy maps onto --allowedTools and
// --disallowedTools, the prompt never is on the command line, and the
// session is resumed.
func TestClaudeCommandLine(t *testing.T) {
	p := agent.DefaultPolicy()
	p[agent.ToolFetch] = agent.Deny
	_, args := (&ClaudeCode{Policy: p, ExtraArgs: []string{"--max-turns", "5"}}).Command("sess-1", "secret prompt")
	joined := strings.Join(args, " ")
	for _, want := range []string{"--resume sess-1", "--permission-prompt-tool stdio", "--disallowedTools WebFetch,WebSearch", "--max-turns 5"} {
		if !strings.Contains(joined, want) {
			t.Errorf("command line %q lacks %q", joined, want)
		}
	}
	i := strings.Index(joined, "--allowedTools ")
	allowed := strings.Fields(joined[i:])[1]
	for _, tool := range []string{"Read", "Glob", "Grep", "TodoWrite"} {
		if !strings.Contains(","+allowed+",", ","+tool+",") {
			t.Errorf("--allowedTools %s lacks %s", allowed, tool)
		}
	}
	for _, tool := range []string{"Bash", "Write", "Edit", "WebFetch"} {
		if strings.Contains(","+allowed+",", ","+tool+",") {
			t.Errorf("--allowedTools %s lets %s through, which the policy asks or denies", allowed, tool)
		}
	}
	if strings.Contains(joined, "secret prompt") {
		t.Error("the prompt is on the command line, where every process can read it")
	}
}

// TestReadLines: lines arrive whole whatever their size up to the limit;
// a longer one is skipped without being held, and what follows it still
// arrives.
func TestReadLines(t *testing.T) {
	huge := strings.Repeat("x", 300<<10)
	input := "first\n\n" + huge + "\nsecond\r\n" + strings.Repeat("y", 100<<10) + "\nlast"
	out := make(chan []byte)
	go readLines(strings.NewReader(input), 200<<10, out, make(chan struct{}), slog.New(slog.DiscardHandler))
	var got []string
	for l := range out {
		got = append(got, string(l))
	}
	want := []string{"first", "second", strings.Repeat("y", 100<<10), "last"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %.20q…, want %.20q…", i, got[i], want[i])
		}
	}
}
