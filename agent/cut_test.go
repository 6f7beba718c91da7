package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/agent/provider/openai"
	"github.com/latchd/latch/agent/provider/openai/openaitest"
	"github.com/latchd/latch/store"
	bolt "go.etcd.io/bbolt"
)

// storedResults is the newest tool_result of each call in key's stored
// history, read by a new process.
func storedResults(t *testing.T, cfg Config, key SessionKey) map[string]provider.Block {
	t.Helper()
	s, err := New(cfg).load(key)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]provider.Block{}
	for _, m := range s.Messages {
		for _, b := range m.Content {
			if b.Type == provider.BlockToolResult {
				out[b.ID] = b
			}
		}
	}
	return out
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *recorder) snapshot() (started []string, finished []ToolResult, approvals []Approval) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.started...), append([]ToolResult(nil), r.finished...), append([]Approval(nil), r.approvals...)
}

// TestCutToolCallIsNotRun: when the model's answer reaches the output limit
// while it writes a tool call, the adapter closes the call with what it has
// ({} from Anthropic's, the cut text as a string from OpenAI's): running
// it would run `bash -c ""` and report success, or ask the owner to approve
// an empty command. The cut call is answered with an error telling the
// model to send smaller pieces, never run and never asked for; the calls
// before it, complete, run.
func TestCutToolCallIsNotRun(t *testing.T) {
	const complete, cut = `{"path":"a.txt","content":"a"}`, `{"command":"cat > big.sh <<'EOF'\necho one\necho tw`
	tests := []struct {
		name   string
		bash   Permission
		stop   string // Anthropic's stop_reason, or OpenAI's finish_reason
		openai bool
	}{
		{"anthropic max_tokens, bash asks", Ask, "max_tokens", false},
		{"anthropic max_tokens, bash allowed", Allow, "max_tokens", false},
		{"anthropic context window exceeded", Allow, "model_context_window_exceeded", false},
		{"openai length", Allow, "length", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Policy = Policy{ToolWrite: Allow, ToolBash: tt.bash} })
			if tt.openai {
				fake := openaitest.New(apiKey)
				t.Cleanup(fake.Close)
				fake.Script(
					openaitest.ToolUse("toolu_1", ToolWrite, complete).AndToolUse("toolu_2", ToolBash, cut).FinishReason(tt.stop),
					openaitest.Text("I will send it in parts."))
				p, err := openai.New(openai.Config{APIKey: apiKey, BaseURL: fake.URL(), Model: "gpt-test"})
				if err != nil {
					t.Fatal(err)
				}
				f.cfg.Provider = p
				f.agent = New(f.cfg)
			} else {
				f.fake.Script(
					anthropictest.ToolUse("toolu_1", ToolWrite, complete).AndToolUse("toolu_2", ToolBash, cut).StopReason(tt.stop),
					anthropictest.Text("I will send it in parts."))
			}
			ev := &recorder{}
			ev.onAsk = func(a Approval) { f.agent.Decide(chat, a.ID, DenyIt) }
			if err := f.turn(t, "write a long script", ev); err != nil {
				t.Fatal(err)
			}
			if want := []string{ToolWrite + ": a.txt (1 bytes, 1 lines)"}; strings.Join(ev.started, "|") != strings.Join(want, "|") {
				t.Errorf("started %q, want only %q", ev.started, want)
			}
			if len(ev.approvals) != 0 {
				t.Errorf("the owner was asked to approve a cut call: %+v", ev.approvals)
			}
			if len(ev.finished) != 2 || ev.finished[1].Err == nil || !errors.Is(ev.finished[1].Err, errCutOff) {
				t.Errorf("finished = %+v, want the complete call, then the cut one as not run", ev.finished)
			}
			if _, err := os.Stat(filepath.Join(f.ws, "a.txt")); err != nil {
				t.Errorf("the complete call before the cut did not run: %v", err)
			}
			res := storedResults(t, f.cfg, chat)
			if r := res["toolu_2"]; !r.IsError || r.Text != noteCutOff {
				t.Errorf("the model was told %+v about the cut call, want the error %q", r, noteCutOff)
			}
			if r := res["toolu_1"]; r.IsError {
				t.Errorf("the complete call's result = %+v", r)
			}
		})
	}
}

// TestCutToolCallIsNotRunAfterRestart: the verdict on a cut call is stored
// with the step, so a step that a crash cut while an earlier call ran does
// not run the cut call when it resumes either.
func TestCutToolCallIsNotRunAfterRestart(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policy = Policy{ToolBash: Allow} })
	f.fake.Script(anthropictest.ToolUse("toolu_1", ToolBash, `{"command":"sleep 60"}`).
		AndToolUse("toolu_2", ToolBash, `{"command":"touch ran`).StopReason("max_tokens"))
	crashed, _ := crashInFirstCall(t, f, "go")

	f.fake.Script(anthropictest.Text("ok"))
	resumed := &recorder{}
	if err := New(crashed).Resume(context.Background(), chat, resumed); err != nil {
		t.Fatal(err)
	}
	if len(resumed.started) != 0 || len(resumed.approvals) != 0 {
		t.Errorf("the resumed step ran %q, asked %+v", resumed.started, resumed.approvals)
	}
	res := storedResults(t, crashed, chat)
	if r := res["toolu_2"]; r.Text != noteCutOff {
		t.Errorf("the cut call's result after the restart = %+v", r)
	}
	if r := res["toolu_1"]; r.Text != noteInterrupted {
		t.Errorf("the call the crash cut got %+v", r)
	}
}

// crashImage is f's database as a SIGKILL would leave it now (every
// committed transaction, nothing else), opened as another process would:
// it returns f's config with the copy as its store.
func crashImage(t *testing.T, f *fixture) Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crashed.db")
	if err := f.db.Bolt().View(func(tx *bolt.Tx) error { return tx.CopyFile(path, 0o600) }); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := f.cfg
	cfg.Store = db
	return cfg
}

// crashInFirstCall runs a turn on text until its first tool call runs,
// takes the image a crash would leave then, and stops the turn for a
// shutdown. It returns the image and what the turn returned.
func crashInFirstCall(t *testing.T, f *fixture, text string) (crashed Config, turnErr error) {
	t.Helper()
	return cutWhileCallRuns(t, f, text, 1, true)
}

// cutWhileSecondCallRuns runs a turn of text until its second tool call
// has started, then stops latch (cause ErrShutdown), after taking the
// image of the store a crash would leave when crash is set. It returns
// the config a restarted latch would use.
func cutWhileSecondCallRuns(t *testing.T, f *fixture, text string, crash bool) Config {
	t.Helper()
	cfg, err := cutWhileCallRuns(t, f, text, 2, crash)
	if !errors.Is(err, ErrShutdown) {
		t.Fatalf("turn = %v, want ErrShutdown", err)
	}
	return cfg
}

// cutWhileCallRuns runs a turn of text until its nth tool call runs, then
// stops it for a shutdown, with the store image of a crash taken just
// before when crash is set (else f's own config).
func cutWhileCallRuns(t *testing.T, f *fixture, text string, n int, crash bool) (Config, error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ev := &recorder{}
	done := make(chan error, 1)
	go func() { done <- f.agent.Turn(ctx, chat, text, ev) }()
	waitFor(t, "the call to run", func() bool { s, _, _ := ev.snapshot(); return len(s) == n })
	cfg := f.cfg
	if crash {
		cfg = crashImage(t, f)
	}
	cancel(ErrShutdown)
	return cfg, <-done
}

// TestCutCalls: of an answer the output limit cut, the last call is never
// run, nor one whose input is not a JSON object (an OpenAI-compatible
// server's cut arguments, kept as a string); complete calls before it are.
func TestCutCalls(t *testing.T) {
	use := func(id, input string) provider.Block {
		return provider.Block{Type: provider.BlockToolUse, ID: id, Name: ToolBash, Input: []byte(input)}
	}
	tests := []struct {
		name string
		uses []provider.Block
		want string // ids of the calls answered as cut
	}{
		{"one call", []provider.Block{use("a", `{"command":"ls"}`)}, "a"},
		{"complete before the last", []provider.Block{use("a", `{"command":"ls"}`), use("b", `{}`)}, "b"},
		{"a string before the last", []provider.Block{use("a", `"{\"command\":\"rm -rf"`), use("b", `{"command":"ls"}`), use("c", `{}`)}, "a c"},
		{"null", []provider.Block{use("a", `null`), use("b", `{}`)}, "a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range cutCalls(tt.uses) {
				if r.Type != provider.BlockToolResult || !r.IsError || r.Text != noteCutOff {
					t.Errorf("result %+v", r)
				}
				got = append(got, r.ID)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("cut %q, want %q", got, tt.want)
			}
		})
	}
}
