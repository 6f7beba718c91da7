package turnrender

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/turn"
)

// TestTextCoalesces: deltas that arrive while a call is under way go out
// together in the next one.
func TestTextCoalesces(t *testing.T) {
	chat := newFakeChat(1000)
	chat.hold, chat.entered = make(chan struct{}), make(chan string, 10)
	tr := testTurn(t, adaptertest.Context(t), chat, Options{})
	tr.Text("a")
	if op := <-chat.entered; op != "send a" {
		t.Fatalf("first call %q, want the answer's first message", op)
	}
	full := "a"
	for _, d := range strings.Split("bcdefghijklmnopqrstuvwxyz", "") {
		tr.Text(d)
		full += d
	}
	chat.mu.Lock()
	chat.entered = nil
	chat.mu.Unlock()
	close(chat.hold)
	tr.Final(full)

	if got, want := chat.made(), []string{"send a", "edit 1 " + full}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q: 25 deltas made during the send go out in one edit", got, want)
	}
	noTurnGoroutine(t)
}

// TestFreezeOnToolEvents: any event but Text completes the answer that
// streams; text after it is a new answer, shown after the tool line.
func TestFreezeOnToolEvents(t *testing.T) {
	chat := newFakeChat(1000)
	tr := testTurn(t, adaptertest.Context(t), chat, Options{})
	call := turn.ToolCall{ID: "c1", Name: "bash"}
	tr.Text("Let me ")
	tr.Text("check.")
	tr.ToolStarted(call)
	tr.ToolFinished(call, turn.ToolResult{Duration: 1200 * time.Millisecond})
	tr.ToolFinished(turn.ToolCall{ID: "c2", Name: "rm"}, turn.ToolResult{Denied: true})
	tr.Approval(turn.Approval{ID: "a1"})
	tr.Text("Done")
	tr.Final("Done.")

	chat.mu.Lock()
	frozen := slices.Clone(chat.frozen)
	chat.mu.Unlock()
	if want := []string{"Let me check.", "Done."}; !slices.Equal(frozen, want) {
		t.Errorf("answers frozen as %q, want %q", frozen, want)
	}
	want := []string{"Let me check.", "✓ bash · 1.2s", "✗ rm · denied", "approve? a1", "Done."}
	if got := chat.shown(); !slices.Equal(got, want) {
		t.Errorf("the chat shows %q, want %q", got, want)
	}
	noTurnGoroutine(t)
}

// TestFinalTextIsChunks: the messages end as exactly the chunks of the
// final text, also when it is not the text that streamed (messages are
// edited, surplus ones deleted).
func TestFinalTextIsChunks(t *testing.T) {
	tests := []struct {
		name            string
		streamed, final string
	}{
		{"same text", strings.Repeat("0123456789", 5), strings.Repeat("0123456789", 5)},
		{"longer", "short", strings.Repeat("abcdefghij", 4) + "xyz"},
		{"shorter", strings.Repeat("0123456789", 5), "In short: no."},
		{"nothing streamed", "", "only final"},
		{"blank final keeps the streamed text", "streamed", "  "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chat := newFakeChat(16)
			tr := testTurn(t, adaptertest.Context(t), chat, Options{})
			for _, piece := range chunks(tt.streamed, 3) {
				tr.Text(piece)
			}
			if tt.streamed != "" {
				chat.wait(t, "the answer to stream", func() bool { return len(chat.shown()) > 0 })
			}
			tr.Final(tt.final)
			want := chunks(tt.final, 16)
			if strings.TrimSpace(tt.final) == "" {
				want = chunks(tt.streamed, 16)
			}
			if got := chat.shown(); !slices.Equal(got, want) {
				t.Errorf("the chat shows %q, want the final text's chunks %q", got, want)
			}
			if strings.Join(chat.shown(), "") != strings.Join(want, "") {
				t.Error("the messages do not join back to the answer")
			}
			noTurnGoroutine(t)
		})
	}
}

// TestEndMidStream: a turn stopped or failed mid-answer (End without
// Final) shows what streamed in its final form, and its goroutine is gone
// when End returns.
func TestEndMidStream(t *testing.T) {
	chat := newFakeChat(8)
	tr := testTurn(t, adaptertest.Context(t), chat, Options{})
	tr.Text("partial ")
	chat.wait(t, "the first message", func() bool { return len(chat.shown()) == 1 })
	if runningTurns() != 1 {
		t.Fatalf("%d turn goroutines before End, want 1: the leak check would prove nothing", runningTurns())
	}
	tr.Text("answer, cut")
	tr.End()
	if tr.Active() {
		t.Error("the goroutine is marked active after End")
	}
	noTurnGoroutine(t)
	if got, want := chat.shown(), chunks("partial answer, cut", 8); !slices.Equal(got, want) {
		t.Errorf("the chat shows %q, want %q", got, want)
	}
	chat.mu.Lock()
	frozen := slices.Clone(chat.frozen)
	chat.mu.Unlock()
	if !slices.Equal(frozen, []string{"partial answer, cut"}) {
		t.Errorf("frozen answers %q, want the partial one", frozen)
	}
	tr.End() // a second End is harmless
	tr.Text("after the end")
	tr.End()
	noTurnGoroutine(t)
}

// TestContextEndsMidCall: when the turn's context ends while a call hangs,
// the goroutine stops and End returns at once; later events start nothing.
func TestContextEndsMidCall(t *testing.T) {
	chat := newFakeChat(100)
	chat.hold, chat.entered = make(chan struct{}), make(chan string, 10)
	ctx, cancel := context.WithCancel(adaptertest.Context(t))
	tr := testTurn(t, ctx, chat, Options{})
	tr.Text("stuck")
	<-chat.entered
	cancel()
	tr.End()
	noTurnGoroutine(t)
	tr.Text("after the end")
	tr.Final("after the end")
	if tr.Active() {
		t.Error("an event after the context ended started the goroutine")
	}
	if got := chat.made(); len(got) != 0 {
		t.Errorf("calls %q completed, want none", got)
	}
	noTurnGoroutine(t)
}

// TestIdleStopAndRestart: without events and running tools the goroutine
// stops; the next event starts it again; a running tool keeps it.
func TestIdleStopAndRestart(t *testing.T) {
	chat := newFakeChat(100)
	tr := testTurn(t, adaptertest.Context(t), chat, Options{Idle: 20 * time.Millisecond})
	adaptertest.Eventually(t, "the idle goroutine to stop", func() bool { return !tr.Active() })
	noTurnGoroutine(t)
	tr.ToolStarted(turn.ToolCall{ID: "1", Name: "bash"})
	if !tr.Active() {
		t.Fatal("an event after the idle stop did not start the goroutine")
	}
	chat.wait(t, "the tool line", func() bool { return len(chat.shown()) == 1 })
	// Observed over a window of several idle periods: nothing is waited for.
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		if !tr.Active() {
			t.Fatal("the goroutine stopped while a tool was running")
		}
		time.Sleep(5 * time.Millisecond)
	}
	tr.End()
	noTurnGoroutine(t)
}

// TestFileWaitsForWhatCameBefore: a file goes out once the items before it
// are shown.
func TestFileWaitsForWhatCameBefore(t *testing.T) {
	chat := newFakeChat(100)
	chat.hold = make(chan struct{})
	tr := testTurn(t, adaptertest.Context(t), chat, Options{})
	call := turn.ToolCall{ID: "1", Name: "send_file"}
	tr.ToolStarted(call)
	errc := make(chan error, 1)
	go func() { errc <- tr.File(turn.File{Name: "out.txt"}) }()
	select {
	case err := <-errc:
		t.Fatalf("File returned (%v) before the tool line was shown", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(chat.hold)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	tr.ToolFinished(call, turn.ToolResult{})
	tr.Final("Sent.")
	want := []string{"send ⚙ send_file", "send file out.txt", "edit 1 ✓ send_file · 0.0s", "send Sent."}
	if got := chat.made(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	noTurnGoroutine(t)
}

// TestHideTools: hidden tool lines leave the answers and approvals.
func TestHideTools(t *testing.T) {
	chat := newFakeChat(100)
	tr := testTurn(t, adaptertest.Context(t), chat, Options{HideTools: true})
	call := turn.ToolCall{ID: "1", Name: "bash"}
	tr.Text("Let me check.")
	tr.ToolStarted(call)
	tr.ToolFinished(call, turn.ToolResult{})
	tr.ToolFinished(turn.ToolCall{ID: "2", Name: "rm"}, turn.ToolResult{Denied: true})
	tr.Approval(turn.Approval{ID: "a1"})
	tr.Final("Done.")
	if got, want := chat.shown(), []string{"Let me check.", "approve? a1", "Done."}; !slices.Equal(got, want) {
		t.Errorf("the chat shows %q, want %q", got, want)
	}
	noTurnGoroutine(t)
}

// TestHiddenToolEnds: a hidden tool that finished no longer counts as
// running, so the goroutine stops on idle as after a shown one.
func TestHiddenToolEnds(t *testing.T) {
	chat := newFakeChat(100)
	tr := testTurn(t, adaptertest.Context(t), chat, Options{HideTools: true, Idle: 20 * time.Millisecond})
	call := turn.ToolCall{ID: "1", Name: "bash"}
	tr.ToolStarted(call)
	tr.ToolFinished(call, turn.ToolResult{})
	adaptertest.Eventually(t, "the idle goroutine to stop after a hidden tool", func() bool { return !tr.Active() })
	noTurnGoroutine(t)
	tr.End()
}

// TestLineWait: a tool line's edit waits as long as LineWait says.
func TestLineWait(t *testing.T) {
	chat := newFakeChat(100)
	const pace = 60 * time.Millisecond
	var sentAt time.Time
	lineWait := func() time.Duration {
		chat.mu.Lock()
		defer chat.mu.Unlock()
		if sentAt.IsZero() && len(chat.order) > 0 {
			sentAt = time.Now()
		}
		return max(time.Until(sentAt.Add(pace)), 0)
	}
	tr := testTurn(t, adaptertest.Context(t), chat, Options{LineWait: lineWait})
	call := turn.ToolCall{ID: "1", Name: "bash"}
	tr.ToolStarted(call)
	chat.wait(t, "the tool line", func() bool { return len(chat.shown()) == 1 })
	tr.ToolFinished(call, turn.ToolResult{})
	chat.wait(t, "the edit", func() bool { return chat.count("edit") == 1 })
	chat.mu.Lock()
	waited := time.Since(sentAt)
	chat.mu.Unlock()
	if waited < pace {
		t.Errorf("the line was edited %v after LineWait first asked to wait, want at least %v", waited, pace)
	}
	tr.End()
	noTurnGoroutine(t)
}

// TestTypingPausesForApproval: "typing…" is renewed while the turn runs,
// not while an approval waits nor once the turn ends.
func TestTypingPausesForApproval(t *testing.T) {
	chat := newFakeChat(100)
	tr := testTurn(t, adaptertest.Context(t), chat, Options{Typing: 5 * time.Millisecond})
	typed := func() int {
		chat.mu.Lock()
		defer chat.mu.Unlock()
		n := 0
		for _, c := range chat.calls {
			if c == "typing" {
				n++
			}
		}
		return n
	}
	adaptertest.Eventually(t, "typing to be renewed", func() bool { return typed() >= 3 })
	tr.Approval(turn.Approval{ID: "a1"})
	chat.wait(t, "the approval", func() bool { return len(chat.shown()) == 1 })
	before := typed()
	time.Sleep(50 * time.Millisecond) // observing a window of ten renewals, not waiting for an event
	if n := typed(); n != before {
		t.Errorf("typing shown %d times while the approval waited", n-before)
	}
	tr.End()
	if n := typed(); n != before {
		t.Errorf("typing shown %d times after the approval", n-before)
	}
	noTurnGoroutine(t)
}

func TestDiscard(t *testing.T) {
	errInvalid := errors.New("invalid chat")
	ev := Discard(errInvalid)
	ev.Text("x")
	ev.ToolStarted(turn.ToolCall{ID: "1"})
	ev.ToolFinished(turn.ToolCall{ID: "1"}, turn.ToolResult{})
	ev.Approval(turn.Approval{ID: "a"})
	ev.Final("x")
	ev.End()
	if err := ev.File(turn.File{Name: "a"}); !errors.Is(err, errInvalid) {
		t.Errorf("File = %v, want %v", err, errInvalid)
	}
	noTurnGoroutine(t)
}
