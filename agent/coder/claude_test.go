package coder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/store"
)

// claudeFixture runs the real Claude Code CLI against anthropictest.
type claudeFixture struct {
	api    *anthropictest.Server
	ws     string
	dbPath string
	env    []string
	bin    string
}

func newClaude(t *testing.T) *claudeFixture {
	bin := cliPath(t, "claude")
	api := anthropictest.New("sk-ant-test")
	t.Cleanup(api.Close)
	f := &claudeFixture{api: api, ws: t.TempDir(), dbPath: filepath.Join(t.TempDir(), "latch.db"), bin: bin}
	f.env = minimalEnv(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL(), "ANTHROPIC_API_KEY": "sk-ant-test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"})
	return f
}

func (f *claudeFixture) backend(t *testing.T, db *store.DB, policy agent.Policy) *Backend {
	if policy == nil {
		policy = agent.DefaultPolicy()
	}
	return New(Config{CLI: &ClaudeCode{Path: f.bin, ModelName: "claude-sonnet-4-5", Policy: policy},
		Workspace: f.ws, Env: f.env, Policy: policy, Store: db, Timeout: 5 * time.Minute})
}

func bashUse(id, command string) anthropictest.Reply {
	return anthropictest.ToolUse(id, "Bash", `{"command":`+strconv.Quote(command)+`,"description":"run it"}`)
}

// TestClaudeCodeTurn: the answer streams, a tool the policy allows runs
// and shows as a tool line, and the session, its cost and turns are
// stored for /status.
func TestClaudeCodeTurn(t *testing.T) {
	f := newClaude(t)
	policy := agent.DefaultPolicy()
	policy[agent.ToolBash] = agent.Allow
	b := f.backend(t, openDB(t, f.dbPath), policy)
	f.api.Script(bashUse("toolu_1", "echo from-the-tool > out.txt"), anthropictest.Text("All done."))
	ev := newRecorder()
	if err := b.TurnWith(t.Context(), testKey, "make out.txt", ev, agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	text, final, started, done := ev.snapshot()
	if final != "All done." || !strings.Contains(text, "All done.") {
		t.Errorf("final %q, text %q; want the answer streamed and final", final, text)
	}
	if len(started) != 1 || started[0].Name != "Bash" || !strings.Contains(started[0].Summary, "echo from-the-tool") {
		t.Errorf("tool lines started %+v, want the Bash call", started)
	}
	if len(done) != 1 || done[0].result.Err != nil || done[0].result.Denied {
		t.Errorf("tool lines finished %+v, want the Bash call, succeeded", done)
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "out.txt")); string(got) != "from-the-tool\n" {
		t.Errorf("out.txt = %q: the tool did not run in the workspace", got)
	}
	st, err := b.Status(testKey)
	if err != nil || st.Session == "" || st.CostUSD <= 0 || st.Provider != "claude-code" || st.Messages == 0 {
		t.Errorf("status %+v, %v; want the session, its cost and turns", st, err)
	}
}

// TestClaudeCodeKeyFileStaysOutOfTools: with the key in a file, Claude
// Code reads it through apiKeyHelper and its tools' environment has no
// key.
func TestClaudeCodeKeyFileStaysOutOfTools(t *testing.T) {
	f := newClaude(t)
	var env []string
	for _, kv := range f.env {
		if !strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") {
			env = append(env, kv)
		}
	}
	keyFile := filepath.Join(t.TempDir(), "it's a key")
	if err := os.WriteFile(keyFile, []byte("sk-ant-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := agent.DefaultPolicy()
	policy[agent.ToolBash] = agent.Allow
	b := New(Config{CLI: &ClaudeCode{Path: f.bin, ModelName: "claude-sonnet-4-5", Policy: policy, APIKeyFile: keyFile},
		Workspace: f.ws, Env: env, Policy: policy, Store: openDB(t, f.dbPath)})
	f.api.Script(bashUse("toolu_1", "env > env.txt"), anthropictest.Text("ok"))
	if err := b.TurnWith(t.Context(), testKey, "env", newRecorder(), agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(f.ws, "env.txt"))
	if err != nil || strings.Contains(string(out), "sk-ant-test") {
		t.Errorf("the tool's environment (%v):\n%s\nwant no API key", err, out)
	}
}

// TestClaudeCodeAsksByButton: with bash = "ask", a command runs only
// after the owner's press, and not at all when denied — also a command
// Claude Code would run without asking by its own rules (echo).
func TestClaudeCodeAsksByButton(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision agent.Decision
		ran      bool
	}{{"approve", agent.Approve, true}, {"deny", agent.DenyIt, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newClaude(t)
			b := f.backend(t, openDB(t, f.dbPath), nil)
			f.api.Script(bashUse("toolu_1", "echo asked > asked.txt"), anthropictest.Text("Finished."))
			ev := newRecorder()
			turn := turnAsync(t.Context(), b, "write asked.txt", ev)
			a := waitApproval(t, ev)
			if a.Tool != "Bash" || !strings.Contains(a.Detail, "echo asked > asked.txt") {
				t.Errorf("approval %+v, want the whole command", a)
			}
			if _, err := os.Stat(filepath.Join(f.ws, "asked.txt")); err == nil {
				t.Fatal("the command ran before the owner answered")
			}
			if err := b.Decide(testKey, a.ID, tc.decision); err != nil {
				t.Fatal(err)
			}
			if err := <-turn; err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(filepath.Join(f.ws, "asked.txt"))
			if ran := err == nil; ran != tc.ran {
				t.Errorf("command ran = %v, want %v", ran, tc.ran)
			}
			_, _, _, done := ev.snapshot()
			if len(done) != 1 || done[0].result.Denied == tc.ran {
				t.Errorf("tool lines %+v, want one, denied = %v", done, !tc.ran)
			}
		})
	}
}

// TestClaudeCodeAskEvenWhereClaudeWouldNot: a read-only command such as
// echo, which Claude Code itself runs without asking, is still put to
// the owner when the policy says ask.
func TestClaudeCodeAskEvenWhereClaudeWouldNot(t *testing.T) {
	f := newClaude(t)
	b := f.backend(t, openDB(t, f.dbPath), nil)
	f.api.Script(bashUse("toolu_1", "echo hello"), anthropictest.Text("Finished."))
	ev := newRecorder()
	turn := turnAsync(t.Context(), b, "say hello", ev)
	a := waitApproval(t, ev)
	if err := b.Decide(testKey, a.ID, agent.DenyIt); err != nil {
		t.Fatal(err)
	}
	if err := <-turn; err != nil {
		t.Fatal(err)
	}
}

// TestClaudeCodePolicyDeny: a tool the policy denies is refused before it
// runs and never reaches the owner.
func TestClaudeCodePolicyDeny(t *testing.T) {
	f := newClaude(t)
	policy := agent.DefaultPolicy()
	policy[agent.ToolBash] = agent.Deny
	b := f.backend(t, openDB(t, f.dbPath), policy)
	f.api.Script(bashUse("toolu_1", "touch denied.txt"), anthropictest.Text("Could not."))
	ev := newRecorder()
	if err := b.TurnWith(t.Context(), testKey, "touch it", ev, agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "denied.txt")); err == nil {
		t.Error("a denied command ran")
	}
	select {
	case a := <-ev.approvals:
		t.Errorf("a denied tool was put to the owner: %+v", a)
	default:
	}
}

// TestClaudeCodeSessionGone: a stored session Claude Code no longer has
// (its files deleted) starts a new one instead of failing every message.
func TestClaudeCodeSessionGone(t *testing.T) {
	f := newClaude(t)
	b := f.backend(t, openDB(t, f.dbPath), nil)
	if err := b.update(testKey, func(m *meta) { m.Session = "0b6c0b8e-1d5e-4f7e-9a55-9b8f5f0f0f0f" }, nil); err != nil {
		t.Fatal(err)
	}
	f.api.Script(anthropictest.Text("Fresh start."))
	ev := newRecorder()
	if err := b.TurnWith(t.Context(), testKey, "hello", ev, agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	if _, final, _, _ := ev.snapshot(); final != MsgSessionGone+"Fresh start." {
		t.Errorf("final %q", final)
	}
	if st, _ := b.Status(testKey); st.Session == "0b6c0b8e-1d5e-4f7e-9a55-9b8f5f0f0f0f" || st.Session == "" {
		t.Errorf("session %q, want the new one", st.Session)
	}
}

// TestClaudeCodeStopKillsTool: /stop mid-tool kills the CLI with the
// command it runs.
func TestClaudeCodeStopKillsTool(t *testing.T) {
	f := newClaude(t)
	policy := agent.DefaultPolicy()
	policy[agent.ToolBash] = agent.Allow
	b := f.backend(t, openDB(t, f.dbPath), policy)
	f.api.Script(bashUse("toolu_1", "echo $$ > pid.txt; exec sleep 600"), anthropictest.Text("never"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ev := newRecorder()
	turn := turnAsync(ctx, b, "sleep", ev)
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(f.ws, "pid.txt")))
	if !alive(pid) {
		t.Fatalf("the tool's process %d is not running", pid)
	}
	cancel()
	if err := <-turn; !errors.Is(err, context.Canceled) {
		t.Errorf("stopped turn = %v, want canceled", err)
	}
	waitGone(t, pid)
	st, _ := b.Status(testKey)
	var running bool
	b.cfg.Store.View(func(tx *store.Tx) error { m, _ := b.load(tx, testKey); running = m.Running; return nil })
	if running || st.Session == "" {
		t.Errorf("after /stop: running %v, session %q; want ended, session kept", running, st.Session)
	}
}

// TestClaudeCodeRestart: latch stops mid-turn; the next start reports
// the turn as interrupted without running it again, and the next message
// continues Claude Code's session (--resume) across the restart.
func TestClaudeCodeRestart(t *testing.T) {
	f := newClaude(t)
	policy := agent.DefaultPolicy()
	policy[agent.ToolBash] = agent.Allow
	db := openDB(t, f.dbPath)
	b := f.backend(t, db, policy)
	f.api.Script(bashUse("toolu_1", "echo $$ > pid.txt; exec sleep 600"), anthropictest.Text("never"))
	ctx, cancel := context.WithCancelCause(t.Context())
	ev := newRecorder()
	turn := turnAsync(ctx, b, "remember the word kumquat", ev)
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(f.ws, "pid.txt")))
	cancel(agent.ErrShutdown)
	<-turn
	waitGone(t, pid)
	requests := len(f.api.Requests())

	b2 := f.backend(t, db, policy) // the next start
	ev2 := newRecorder()
	if err := b2.ResumeWith(t.Context(), testKey, ev2, agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	if _, final, _, _ := ev2.snapshot(); final != MsgInterrupted {
		t.Errorf("resumed turn said %q, want %q", final, MsgInterrupted)
	}
	if got := len(f.api.Requests()); got != requests {
		t.Errorf("the cut turn was run again: %d model requests, want %d", got, requests)
	}
	if err := b2.ResumeWith(t.Context(), testKey, newRecorder(), agent.Hooks{}); !errors.Is(err, agent.ErrNothingToResume) {
		t.Errorf("second resume = %v, want nothing to resume", err)
	}
	f.api.Script(anthropictest.Text("The word was kumquat."))
	if err := b2.TurnWith(t.Context(), testKey, "what was the word?", newRecorder(), agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	reqs := f.api.Requests()
	last := reqs[len(reqs)-1].Params.Messages
	var history strings.Builder
	for _, m := range last {
		for _, c := range m.Content {
			history.WriteString(c.Text + " ")
		}
	}
	if !strings.Contains(history.String(), "kumquat") {
		t.Errorf("the next turn did not continue the session; it sent %d messages: %s", len(last), history.String())
	}
}
