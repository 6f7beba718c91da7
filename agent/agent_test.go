package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/store"
)

const apiKey = "sk-ant-test-KEYvalue"

var chat = SessionKey{"telegram", "100"}

// recorder is an Events that records what a turn did and answers approvals
// with a scripted decision.
type recorder struct {
	mu        sync.Mutex
	text      strings.Builder
	final     string
	started   []string
	finished  []ToolResult
	approvals []Approval
	files     []File
	onAsk     func(Approval)
}

func (r *recorder) Text(d string) { r.mu.Lock(); r.text.WriteString(d); r.mu.Unlock() }
func (r *recorder) ToolStarted(c ToolCall) {
	r.mu.Lock()
	r.started = append(r.started, c.Name+": "+c.Summary)
	r.mu.Unlock()
}
func (r *recorder) ToolFinished(_ ToolCall, res ToolResult) {
	r.mu.Lock()
	r.finished = append(r.finished, res)
	r.mu.Unlock()
}
func (r *recorder) Approval(a Approval) {
	r.mu.Lock()
	r.approvals = append(r.approvals, a)
	r.mu.Unlock()
	if r.onAsk != nil {
		go r.onAsk(a)
	}
}
func (r *recorder) File(f File) error {
	r.mu.Lock()
	r.files = append(r.files, f)
	r.mu.Unlock()
	return nil
}
func (r *recorder) Final(t string) { r.mu.Lock(); r.final = t; r.mu.Unlock() }

type fixture struct {
	fake  *anthropictest.Server
	db    *store.DB
	ws    string
	agent *Agent
	cfg   Config
}

func newFixture(t testing.TB, tweak func(*Config)) *fixture {
	t.Helper()
	fake := anthropictest.New(apiKey)
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "latch.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	wsDir := filepath.Join(dir, "ws")
	os.Mkdir(wsDir, 0o700)
	ws, err := tools.OpenWorkspace(wsDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	p, err := anthropic.New(anthropic.Config{APIKey: apiKey, BaseURL: fake.URL(), Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Provider: p, Model: "claude-test", Store: db, MaxSteps: 5,
		Tools: &Toolbox{Workspace: ws, Fetcher: tools.NewFetcher(tools.FetchOptions{}), BashTimeout: 10 * time.Second},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	f := &fixture{fake: fake, db: db, ws: wsDir, cfg: cfg}
	f.agent = New(cfg)
	return f
}

func (f *fixture) turn(t *testing.T, text string, ev *recorder) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.agent.Turn(ctx, chat, text, ev)
}

func TestTextTurn(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Script(anthropictest.Text("Hello **owner**").Chunk(3))
	ev := &recorder{}
	if err := f.turn(t, "hi", ev); err != nil {
		t.Fatal(err)
	}
	if ev.text.String() != "Hello **owner**" || ev.final != "Hello **owner**" {
		t.Errorf("streamed %q, final %q", ev.text.String(), ev.final)
	}
	req := f.fake.Requests()[0].Params
	if !strings.Contains(req.SystemText(), f.ws) || len(req.Tools) != 8 {
		t.Errorf("system %q, %d tools", req.SystemText(), len(req.Tools))
	}
}

func TestAllowedToolRunsWithoutAsking(t *testing.T) {
	f := newFixture(t, nil)
	os.WriteFile(filepath.Join(f.ws, "notes.txt"), []byte("buy milk\n"), 0o600)
	f.fake.Script(
		anthropictest.ToolUse("toolu_1", ToolRead, `{"path":"notes.txt"}`),
		anthropictest.Text("You need milk."),
	)
	ev := &recorder{}
	if err := f.turn(t, "what do I need?", ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.approvals) != 0 || ev.final != "You need milk." {
		t.Fatalf("approvals %v, final %q", ev.approvals, ev.final)
	}
	reqs := f.fake.Requests()
	last := reqs[len(reqs)-1].Params.Messages
	res := last[len(last)-1].Content[0]
	if res.Type != "tool_result" || !strings.Contains(res.ResultText(), "buy milk") {
		t.Errorf("tool result sent = %+v", res)
	}
}

func TestApprovalDecisions(t *testing.T) {
	tests := []struct {
		name     string
		decision Decision
		wantRan  bool
	}{
		{"approve", Approve, true},
		{"deny", DenyIt, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.fake.Script(
				anthropictest.ToolUse("toolu_1", ToolWrite, `{"path":"out.txt","content":"x"}`),
				anthropictest.Text("done"),
			)
			ev := &recorder{}
			ev.onAsk = func(a Approval) {
				if err := f.agent.Decide(SessionKey{"telegram", "999"}, a.ID, Approve); !errors.Is(err, ErrNoApproval) {
					t.Errorf("another chat decided: %v", err)
				}
				f.agent.Decide(chat, strings.ToUpper(a.ID), tt.decision)
			}
			if err := f.turn(t, "write it", ev); err != nil {
				t.Fatal(err)
			}
			_, err := os.Stat(filepath.Join(f.ws, "out.txt"))
			if ran := err == nil; ran != tt.wantRan {
				t.Errorf("file written = %v, want %v", ran, tt.wantRan)
			}
			if len(ev.approvals) != 1 || ev.approvals[0].Summary != "out.txt (1 bytes, 1 lines)" {
				t.Errorf("approvals = %+v", ev.approvals)
			}
			if err := f.agent.Decide(chat, ev.approvals[0].ID, Approve); !errors.Is(err, ErrNoApproval) {
				t.Errorf("decided twice: %v", err)
			}
		})
	}
}

func TestApprovalTimeoutDenies(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ApprovalTimeout = 50 * time.Millisecond })
	f.fake.Script(anthropictest.ToolUse("toolu_1", ToolBash, `{"command":"touch ran"}`), anthropictest.Text("ok"))
	ev := &recorder{}
	if err := f.turn(t, "go", ev); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "ran")); err == nil {
		t.Fatal("command ran without approval")
	}
	msgs := f.fake.Requests()[1].Params.Messages
	if r := msgs[len(msgs)-1].Content[0]; !r.IsError || !strings.Contains(r.ResultText(), "did not answer") {
		t.Errorf("model told %+v", r)
	}
}

func TestAlwaysStopsAsking(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Script(
		anthropictest.ToolUse("t1", ToolBash, `{"command":"echo 1"}`),
		anthropictest.ToolUse("t2", ToolBash, `{"command":"echo 2"}`),
		anthropictest.Text("done"),
	)
	ev := &recorder{}
	ev.onAsk = func(a Approval) { f.agent.Decide(chat, a.ID, Always) }
	if err := f.turn(t, "go", ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.approvals) != 1 || len(ev.started) != 2 {
		t.Errorf("approvals %d, started %v", len(ev.approvals), ev.started)
	}
}

func TestDenyPolicyHidesTool(t *testing.T) {
	p := DefaultPolicy()
	p[ToolBash] = Deny
	f := newFixture(t, func(c *Config) { c.Policy = p })
	f.fake.Script(anthropictest.ToolUse("t1", ToolBash, `{"command":"touch ran"}`), anthropictest.Text("ok"))
	if err := f.turn(t, "go", &recorder{}); err != nil {
		t.Fatal(err)
	}
	for _, tool := range f.fake.Requests()[0].Params.Tools {
		if tool.Name == ToolBash {
			t.Error("a denied tool was offered to the model")
		}
	}
	if _, err := os.Stat(filepath.Join(f.ws, "ran")); err == nil {
		t.Fatal("denied tool ran")
	}
}

func TestMaxSteps(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxSteps = 2 })
	f.fake.Script(
		anthropictest.ToolUse("t1", ToolList, `{}`),
		anthropictest.ToolUse("t2", ToolList, `{}`),
		anthropictest.Text("never"),
	)
	if err := f.turn(t, "loop", &recorder{}); !errors.Is(err, ErrMaxSteps) {
		t.Fatalf("err = %v, want ErrMaxSteps", err)
	}
	// The next turn still forms a valid conversation (the fake validates
	// tool_use/tool_result pairing and alternation).
	f.fake.Script(anthropictest.Text("fine"))
	if err := f.turn(t, "again", &recorder{}); err != nil {
		t.Fatalf("turn after max steps: %v", err)
	}
}

func TestStopKillsRunningTool(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policy = Policy{ToolBash: Allow} })
	f.fake.Script(anthropictest.ToolUse("t1", ToolBash, `{"command":"echo $$ > pgid; sleep 60"}`))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.agent.Turn(ctx, chat, "sleep", &recorder{}) }()
	pgidFile := filepath.Join(f.ws, "pgid")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, _ := os.ReadFile(pgidFile); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("turn err = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("turn did not stop")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("stop took %v", d)
	}
}

func TestSessionResumesAndRepairs(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Script(anthropictest.Text("Nice to meet you, Ada."))
	if err := f.turn(t, "my name is Ada", &recorder{}); err != nil {
		t.Fatal(err)
	}
	// A crash left a tool call without a result.
	s, _ := f.agent.load(chat)
	s.Messages = append(s.Messages,
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: "run it"}}},
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockToolUse, ID: "toolu_x", Name: ToolBash, Input: []byte(`{"command":"make"}`)}}})
	f.agent.save(chat, s)

	again := New(f.cfg) // a new process
	f.fake.Script(anthropictest.Text("Your name is Ada."))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := again.Turn(ctx, chat, "what is my name?", &recorder{}); err != nil {
		t.Fatal(err)
	}
	reqs := f.fake.Requests()
	body := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(body, "my name is Ada") || !strings.Contains(body, noteInterrupted) {
		t.Errorf("resumed request lacks history or the interrupted result: %s", body)
	}
	if err := again.Reset(chat); err != nil {
		t.Fatal(err)
	}
	if st, _ := again.Status(chat); st.Messages != 0 {
		t.Errorf("after reset: %+v", st)
	}
}

func TestTrimKeepsToolPairs(t *testing.T) {
	big := strings.Repeat("x", 4000)
	user := func(s string) provider.Message {
		return provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: s}}}
	}
	msgs := []provider.Message{
		user(big),
		{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockToolUse, ID: "a", Input: []byte("{}")}}},
		{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockToolResult, ID: "a", Text: big}}},
		{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockText, Text: "ok"}}},
		user("second"),
		{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockText, Text: "ok"}}},
		user("third"),
	}
	got := trimmed(msgs, 100)
	if len(got) != 3 || got[0].Content[0].Text != "second" {
		t.Errorf("trimmed to %d messages starting %+v", len(got), got[0])
	}
	if got := trimmed(msgs, 1); len(got) != 1 {
		t.Errorf("the newest turn must stay: %d", len(got))
	}
}

func TestProviderErrorIsOneSentence(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Script(anthropictest.APIError(401, "authentication_error", "invalid x-api-key"))
	err := f.turn(t, "hi", &recorder{})
	if !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("err = %v", err)
	}
	if d := provider.Describe(err); strings.Contains(d, apiKey) || strings.Count(d, ".") > 3 {
		t.Errorf("describe = %q", d)
	}
}

// cutWhileBuilding stores a turn that a crash cut while a tool ran: the
// call ("make", toolu_x) has no result.
func (f *fixture) cutWhileBuilding() {
	s, _ := f.agent.load(chat)
	s.Messages = append(s.Messages,
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: "build it"}}},
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockToolUse, ID: "toolu_x", Name: ToolBash, Input: []byte(`{"command":"make"}`)}}})
	s.Running = []string{"toolu_x"}
	f.agent.save(chat, s)
}

func TestResumeContinuesFromLastStep(t *testing.T) {
	f := newFixture(t, nil)
	f.cutWhileBuilding()
	f.fake.Script(anthropictest.Text("The build was interrupted; run it again?"))
	ev := &recorder{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := New(f.cfg).Resume(ctx, chat, ev); err != nil {
		t.Fatal(err)
	}
	if ev.final != "The build was interrupted; run it again?" || len(ev.started) != 0 {
		t.Errorf("final %q, tools run %v", ev.final, ev.started)
	}
	body := string(f.fake.Requests()[0].Body)
	if !strings.Contains(body, noteInterrupted) || strings.Count(body, "build it") != 1 {
		t.Errorf("resumed request: %s", body)
	}
	if err := New(f.cfg).Resume(ctx, chat, &recorder{}); !errors.Is(err, ErrNothingToResume) {
		t.Errorf("second resume: %v", err)
	}
}

// TestResumeDoneHookCommitsWithTheAnswer: ResumeWith's Done runs in the
// transaction that stores the resumed turn's answer — after an error it
// does not run, and a failing hook fails the resume.
func TestResumeDoneHookCommitsWithTheAnswer(t *testing.T) {
	f := newFixture(t, nil)
	cut := f.cutWhileBuilding
	done := func() (n uint64) {
		f.db.View(func(tx *store.Tx) (err error) { n, err = tx.Counter("test", "done"); return err })
		return n
	}
	hooks := Hooks{Done: func(tx *store.Tx) error { return tx.Incr("test", "done", 1) }}
	ctx := context.Background()

	cut()
	f.fake.Script(anthropictest.APIError(400, "invalid_request_error", "bad"))
	if err := New(f.cfg).ResumeWith(ctx, chat, &recorder{}, hooks); err == nil {
		t.Fatal("the provider's error was lost")
	}
	if n := done(); n != 0 {
		t.Fatal("done ran after an error")
	}

	cut()
	f.fake.Script(anthropictest.Text("Built."))
	if err := New(f.cfg).ResumeWith(ctx, chat, &recorder{}, hooks); err != nil {
		t.Fatal(err)
	}
	if n := done(); n != 1 {
		t.Fatalf("done committed %d times with the answer, want 1", n)
	}

	cut()
	f.fake.Script(anthropictest.Text("Built again."))
	failing := Hooks{Done: func(*store.Tx) error { return errors.New("disk full") }}
	if err := New(f.cfg).ResumeWith(ctx, chat, &recorder{}, failing); err == nil {
		t.Error("a failed done hook was not reported")
	}
}

// TestApprovalSurvivesRestart: a request waiting for the owner when the
// process died is asked again with the same id after the restart, so the
// button already in the chat works; once decided it is gone, never applied
// twice.
func TestApprovalSurvivesRestart(t *testing.T) {
	f := newFixture(t, nil)
	s, _ := f.agent.load(chat)
	s.Messages = append(s.Messages,
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: "write it"}}},
		provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{{Type: provider.BlockToolUse, ID: "toolu_w", Name: ToolWrite, Input: []byte(`{"path":"w.txt","content":"ok"}`)}}})
	s.Waiting = map[string]waitingApproval{"toolu_w": {ID: "abcde", Expires: time.Now().Add(time.Minute)}}
	f.agent.save(chat, s)
	f.fake.Script(anthropictest.Text("Written."))

	restarted := New(f.cfg)
	ev := &recorder{}
	done := make(chan error, 1)
	go func() { done <- restarted.Resume(context.Background(), chat, ev) }()
	deadline := time.Now().Add(10 * time.Second)
	for restarted.Decide(chat, "abcde", Approve) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the old approval id never became answerable")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.ws, "w.txt")); err != nil || string(b) != "ok" {
		t.Fatalf("approved write: %q, %v", b, err)
	}
	if len(ev.approvals) != 0 {
		t.Errorf("asked again with a new request: %+v", ev.approvals)
	}
	if err := restarted.Decide(chat, "abcde", Approve); !errors.Is(err, ErrNoApproval) {
		t.Errorf("decided twice: %v", err)
	}
	if st, _ := restarted.load(chat); len(st.Waiting) != 0 || len(st.Running) != 0 {
		t.Errorf("leftover state: %+v %+v", st.Waiting, st.Running)
	}
}
