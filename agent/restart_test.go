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
)

// TestFinishedCallsSurviveARestart: a step whose first call finished and
// whose second was running when latch stopped (a shutdown) or died (a
// crash) resumes with the first call's real result; only the second is
// reported as interrupted, and neither runs again. Told that a finished
// call "was not run", the model would repeat its side effect.
func TestFinishedCallsSurviveARestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "shutdown", true: "crash"}[crash], func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Policy = Policy{ToolBash: Allow} })
			f.fake.Script(anthropictest.ToolUse("toolu_1", ToolBash, `{"command":"echo deployed >> log; echo first done"}`).
				AndToolUse("toolu_2", ToolBash, `{"command":"sleep 60"}`))
			cfg := cutWhileSecondCallRuns(t, f, "deploy", crash)

			f.fake.Script(anthropictest.Text("Deployed; the wait was cut."))
			resumed := &recorder{}
			if err := New(cfg).Resume(context.Background(), chat, resumed); err != nil {
				t.Fatal(err)
			}
			if len(resumed.started) != 0 {
				t.Errorf("the resumed step ran %q again", resumed.started)
			}
			if b, _ := os.ReadFile(filepath.Join(f.ws, "log")); string(b) != "deployed\n" {
				t.Errorf("log = %q, want one deploy", b)
			}
			reqs := f.fake.Requests()
			msgs := reqs[len(reqs)-1].Params.Messages
			got := map[string]string{}
			for _, c := range msgs[len(msgs)-1].Content {
				got[c.ToolUseID] = c.ResultText()
			}
			if !strings.Contains(got["toolu_1"], "first done") {
				t.Errorf("the finished call's result sent after the restart = %q, want its output", got["toolu_1"])
			}
			if got["toolu_2"] != noteInterrupted {
				t.Errorf("the cut call's result = %q, want %q", got["toolu_2"], noteInterrupted)
			}
			if s, _ := New(cfg).load(chat); len(s.Results) != 0 || len(s.Running) != 0 {
				t.Errorf("leftover step state: results %+v, running %v", s.Results, s.Running)
			}
		})
	}
}

// TestNewTurnForgetsTheCutStep: a turn cut and never resumed (its resume
// was cut too, or /stop came first) leaves its step's records behind. The
// new turn closes the old step with what is known — a saved result, else
// "interrupted" — and must not read the records as its own: servers that
// send no call ids get call_0, call_1 … from latch, so the new call_0
// would pass for the old one (its saved result, or "interrupted", and
// never run) and the new call_1 would take the old step's approval — here
// one the owner gave while latch was down.
func TestNewTurnForgetsTheCutStep(t *testing.T) {
	f := newFixture(t, nil)
	s, _ := f.agent.load(chat)
	s.Messages = append(s.Messages, userMsg("first"), provider.Message{Role: provider.RoleAssistant, Content: []provider.Block{
		{Type: provider.BlockToolUse, ID: "call_0", Name: ToolBash, Input: []byte(`{"command":"make"}`)},
		{Type: provider.BlockToolUse, ID: "call_1", Name: ToolWrite, Input: []byte(`{"path":"old.txt","content":"x"}`)},
		{Type: provider.BlockToolUse, ID: "call_2", Name: ToolBash, Input: []byte(`{"command":"make test"}`)},
	}})
	s.Running = []string{"call_0", "call_2"}
	s.Results = []provider.Block{{Type: provider.BlockToolResult, ID: "call_0", Text: "built"}}
	s.Waiting = map[string]waitingApproval{"call_1": {ID: "abcde", Expires: time.Now().Add(time.Hour), Decision: Approve}}
	if err := f.agent.save(chat, s); err != nil {
		t.Fatal(err)
	}

	f.fake.Script(
		anthropictest.ToolUse("call_0", ToolList, `{}`).AndToolUse("call_1", ToolWrite, `{"path":"new.txt","content":"y"}`),
		anthropictest.Text("ok"))
	ev := &recorder{}
	ev.onAsk = func(a Approval) { f.agent.Decide(chat, a.ID, DenyIt) }
	if err := f.turn(t, "second", ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.started) == 0 || !strings.HasPrefix(ev.started[0], ToolList) {
		t.Errorf("the new call_0 did not run: started %q", ev.started)
	}
	if len(ev.approvals) != 1 || ev.approvals[0].ID == "abcde" {
		t.Errorf("the new call_1 was not asked for afresh: approvals %+v", ev.approvals)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "new.txt")); err == nil {
		t.Error("the new call_1 ran on the old step's approval")
	}
	msgs := f.fake.Requests()[0].Params.Messages
	closed := map[string]string{}
	for _, c := range msgs[len(msgs)-3].Content { // the old step's results, a note, the new message
		closed[c.ToolUseID] = c.ResultText()
	}
	if closed["call_0"] != "built" || closed["call_1"] != noteInterrupted || closed["call_2"] != noteInterrupted {
		t.Errorf("the old step was closed with %q", closed)
	}
}

// TestApprovalPressedWhileDown: latch stops while a call waits for the
// owner. The chat is not told the call was denied — it was not, the
// request is still open — and a press of its button that reaches latch
// before the resumed turn gets back to the request (the Hub handles it at
// start, or it came during the shutdown) is taken, not answered
// "expired". It is stored, so it holds across a crash before the resume
// too, and it applies once.
func TestApprovalPressedWhileDown(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Script(anthropictest.ToolUse("toolu_w", ToolWrite, `{"path":"w.txt","content":"ok"}`))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ev := &recorder{}
	ev.onAsk = func(Approval) { cancel(ErrShutdown) }
	if err := f.agent.Turn(ctx, chat, "write it", ev); !errors.Is(err, ErrShutdown) {
		t.Fatalf("turn = %v, want ErrShutdown", err)
	}
	if len(ev.approvals) != 1 {
		t.Fatalf("approvals = %+v", ev.approvals)
	}
	if len(ev.finished) != 0 {
		t.Errorf("the chat was told the waiting call ended: %+v", ev.finished)
	}
	id := ev.approvals[0].ID

	// The next process, before it resumes anything.
	if err := New(f.cfg).Decide(chat, strings.ToUpper(id), Approve); err != nil {
		t.Fatalf("a press while no turn waited: %v", err)
	}
	if err := New(f.cfg).Decide(chat, id, DenyIt); !errors.Is(err, ErrNoApproval) {
		t.Errorf("a second press: %v, want ErrNoApproval", err)
	}
	// It crashes; the one after it resumes the turn.
	f.fake.Script(anthropictest.Text("Written."))
	restarted := New(f.cfg)
	resumed := &recorder{}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if err := restarted.Resume(ctx2, chat, resumed); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(f.ws, "w.txt")); err != nil || string(b) != "ok" {
		t.Errorf("the approved write: %q, %v", b, err)
	}
	if len(resumed.approvals) != 0 || resumed.final != "Written." {
		t.Errorf("resumed: approvals %+v, final %q", resumed.approvals, resumed.final)
	}
	if s, _ := restarted.load(chat); len(s.Waiting) != 0 {
		t.Errorf("the decision is still stored: %+v", s.Waiting)
	}
}

// TestDecideStoredRequest: only a request the chat's own session stores as
// waiting, not expired and not yet answered, takes a decision while no
// turn waits for it.
func TestDecideStoredRequest(t *testing.T) {
	f := newFixture(t, nil)
	s := f.bashStep("a", "b")
	s.Waiting = map[string]waitingApproval{
		"toolu_1": {ID: "abcde", Expires: time.Now().Add(time.Hour)},
		"toolu_2": {ID: "fghjk", Expires: time.Now().Add(-time.Second)},
	}
	if err := f.agent.save(chat, s); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  SessionKey
		id   string
		ok   bool
	}{
		{"unknown id", chat, "zzzzz", false},
		{"another chat", SessionKey{"telegram", "999"}, "abcde", false},
		{"expired", chat, "fghjk", false},
		{"waiting", chat, " ABCDE ", true},
		{"answered already", chat, "abcde", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(f.cfg).Decide(tt.key, tt.id, Always)
			if ok := err == nil; ok != tt.ok || !ok && !errors.Is(err, ErrNoApproval) {
				t.Errorf("Decide = %v, want taken %v", err, tt.ok)
			}
		})
	}
	if s, _ := f.agent.load(chat); s.Waiting["toolu_1"].Decision != Always || s.Waiting["toolu_2"].Decision != "" {
		t.Errorf("stored requests: %+v", s.Waiting)
	}
}

// TestStoredDecisionSurvivesTheTurnsSave: a resumed turn that loaded its
// session before the owner's press was stored saves it again (a call
// before the waiting one ends, the request is recorded again): the press
// must not be lost to that save.
func TestStoredDecisionSurvivesTheTurnsSave(t *testing.T) {
	f := newFixture(t, nil)
	s := f.bashStep("a")
	s.Waiting = map[string]waitingApproval{"toolu_1": {ID: "abcde", Expires: time.Now().Add(time.Hour)}}
	if err := f.agent.save(chat, s); err != nil {
		t.Fatal(err)
	}
	restarted := New(f.cfg)
	loaded, err := restarted.load(chat)
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.Decide(chat, "abcde", Approve); err != nil {
		t.Fatal(err)
	}
	if err := restarted.save(chat, loaded); err != nil {
		t.Fatal(err)
	}
	if got := loaded.Waiting["toolu_1"].Decision; got != Approve {
		t.Errorf("the turn's session after its save: decision %q, want %q", got, Approve)
	}
	if s, _ := New(f.cfg).load(chat); s.Waiting["toolu_1"].Decision != Approve {
		t.Errorf("stored after the turn's save: %+v", s.Waiting)
	}
}
