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
	"github.com/latchd/latch/agent/provider/openai/openaitest"
	"github.com/latchd/latch/store"
)

// codexFixture runs the real Codex CLI against openaitest's Responses
// fake.
type codexFixture struct {
	api    *openaitest.Responses
	ws     string
	dbPath string
	env    []string
	bin    string
}

func newCodex(t *testing.T) *codexFixture {
	bin := cliPath(t, "codex")
	api := openaitest.NewResponses("sk-codex-test")
	t.Cleanup(api.Close)
	f := &codexFixture{api: api, ws: t.TempDir(), dbPath: filepath.Join(t.TempDir(), "latch.db"), bin: bin}
	f.env = minimalEnv(t, map[string]string{EnvCodexAPIKey: "sk-codex-test"})
	return f
}

func (f *codexFixture) backend(t *testing.T, db *store.DB, policy agent.Policy) *Backend {
	if policy == nil {
		policy = agent.DefaultPolicy()
	}
	return New(Config{CLI: &Codex{Path: f.bin, ModelName: "gpt-5", BaseURL: f.api.URL(), Policy: policy},
		Workspace: f.ws, Env: f.env, Policy: policy, Store: db, Timeout: 5 * time.Minute})
}

func execCall(id, cmd string) openaitest.ResponsesReply {
	return openaitest.ResponsesCall(id, "exec_command", `{"cmd":`+strconv.Quote(cmd)+`}`)
}

func allowAll() agent.Policy {
	p := agent.DefaultPolicy()
	for _, tool := range []string{agent.ToolBash, agent.ToolWrite, agent.ToolEdit} {
		p[tool] = agent.Allow
	}
	return p
}

// TestCodexTurn: a command Codex runs shows as a tool line, the answer
// arrives, and the session continues with resume in the next turn, also
// from a new Backend (a restart).
func TestCodexTurn(t *testing.T) {
	f := newCodex(t)
	db := openDB(t, f.dbPath)
	b := f.backend(t, db, allowAll())
	f.api.Script(execCall("call_1", "env > env.txt; echo from-codex > out.txt"), openaitest.ResponsesText("All done."))
	ev := newRecorder()
	if err := b.TurnWith(t.Context(), testKey, "remember the word kumquat and make out.txt", ev, agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	text, final, started, done := ev.snapshot()
	if final != "All done." || !strings.Contains(text, "All done.") {
		t.Errorf("final %q, text %q", final, text)
	}
	if len(started) != 1 || !strings.Contains(started[0].Summary, "echo from-codex") || len(done) != 1 || done[0].result.Err != nil {
		t.Errorf("tool lines %+v / %+v, want the command, succeeded", started, done)
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "out.txt")); string(got) != "from-codex\n" {
		t.Errorf("out.txt = %q", got)
	}
	if env, _ := os.ReadFile(filepath.Join(f.ws, "env.txt")); strings.Contains(string(env), "sk-codex-test") {
		t.Errorf("the API key reached the command's environment:\n%s", env)
	}
	st, err := b.Status(testKey)
	if err != nil || st.Session == "" || st.Provider != "codex" {
		t.Fatalf("status %+v, %v", st, err)
	}
	f.api.Script(openaitest.ResponsesText("It was kumquat."))
	if err := f.backend(t, db, allowAll()).TurnWith(t.Context(), testKey, "what was the word?", newRecorder(), agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	reqs := f.api.Requests()
	if last := string(reqs[len(reqs)-1]); !strings.Contains(last, "kumquat") || !strings.Contains(last, "what was the word?") {
		t.Errorf("the next turn did not resume the session: %.300s", last)
	}
}

// TestCodexReadOnlyByDefault: with the default policy (bash asks) Codex
// runs in its read-only sandbox: a command that writes fails.
func TestCodexReadOnlyByDefault(t *testing.T) {
	f := newCodex(t)
	b := f.backend(t, openDB(t, f.dbPath), nil)
	f.api.Script(execCall("call_1", "touch made.txt"), openaitest.ResponsesText("Tried."))
	if err := b.TurnWith(t.Context(), testKey, "touch made.txt", newRecorder(), agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "made.txt")); err == nil {
		t.Error("a command wrote to the workspace in the read-only sandbox")
	}
}

// TestCodexStopKillsTool: /stop mid-command kills Codex with the command.
func TestCodexStopKillsTool(t *testing.T) {
	f := newCodex(t)
	b := f.backend(t, openDB(t, f.dbPath), allowAll())
	// Codex runs commands in a PID namespace of its own: the command is
	// found by a marker in its arguments, not by its $$.
	marker := "latch-codex-stop-" + strconv.Itoa(os.Getpid())
	f.api.Script(execCall("call_1", "sleep 600; : "+marker), openaitest.ResponsesText("never"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	turn := turnAsync(ctx, b, "sleep", newRecorder())
	pid := waitProcess(t, marker)
	cancel()
	if err := <-turn; !errors.Is(err, context.Canceled) {
		t.Errorf("stopped turn = %v, want canceled", err)
	}
	waitGone(t, pid)
}
