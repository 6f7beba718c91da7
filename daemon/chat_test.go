package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
)

// chatTurn runs a turn through the control socket and returns its events.
// decide, when not nil, answers each approval from inside the stream, as
// `latch chat` does.
func (e *env) chatTurn(ctx context.Context, text string, decide func(control.ChatEvent) string) []control.ChatEvent {
	e.t.Helper()
	c := e.client()
	var evs []control.ChatEvent
	err := c.ChatTurn(ctx, text, func(ev control.ChatEvent) error {
		evs = append(evs, ev)
		if ev.Type == control.EventApproval && decide != nil {
			return c.ChatDecide(ctx, ev.ID, decide(ev))
		}
		return nil
	})
	if err != nil {
		e.t.Fatalf("chat turn %q: %v\nevents: %+v\nlogs:\n%s", text, err, evs, e.logs.String())
	}
	return evs
}

// kinds lists the event types, with text deltas joined into one entry.
func kinds(evs []control.ChatEvent) string {
	var out []string
	for _, ev := range evs {
		if ev.Type == control.EventText && len(out) > 0 && out[len(out)-1] == control.EventText {
			continue
		}
		out = append(out, ev.Type)
	}
	return strings.Join(out, " ")
}

func TestChatThroughDaemonWithApproval(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	fake.Script(
		anthropictest.ToolUse("toolu_1", "write_file", `{"path":"note.txt","content":"from the terminal"}`),
		anthropictest.Text("Wrote note.txt."),
	)
	var asked control.ChatEvent
	evs := e.chatTurn(ctx, "write a note", func(ev control.ChatEvent) string { asked = ev; return control.DecisionApprove })
	if got, want := kinds(evs), "approval tool_started tool_finished text final"; got != want {
		t.Errorf("events %q, want %q: %+v", got, want, evs)
	}
	if asked.Tool != "write_file" || !strings.Contains(asked.Summary, "note.txt") || asked.ID == "" {
		t.Errorf("approval = %+v", asked)
	}
	if last := evs[len(evs)-1]; last.Text != "Wrote note.txt." {
		t.Errorf("final = %+v", last)
	}
	if b, err := os.ReadFile(filepath.Join(e.home, "workspace", "note.txt")); string(b) != "from the terminal" {
		t.Errorf("note.txt = %q, %v", b, err)
	}
	if body := string(fake.Requests()[0].Body); !strings.Contains(body, "write a note") {
		t.Errorf("the model did not get the text: %s", body)
	}

	info, err := e.client().ChatInfo(ctx)
	if err != nil || !info.Enabled || info.Provider != "anthropic" || info.Model != "claude-test" || info.Messages != 4 {
		t.Errorf("ChatInfo = %+v, %v; want anthropic claude-test with 4 messages", info, err)
	}
	if err := e.client().ChatReset(ctx); err != nil {
		t.Fatalf("ChatReset: %v", err)
	}
	if info, _ := e.client().ChatInfo(ctx); info.Messages != 0 {
		t.Errorf("after ChatReset the session has %d messages", info.Messages)
	}
}

// TestChatApprovalsStayInTheirSession: the terminal cannot answer the
// Telegram chat's approvals and the Telegram chat cannot answer the
// terminal's, even with the id; a second terminal turn meanwhile is
// refused.
func TestChatApprovalsStayInTheirSession(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	e.pair()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := e.client()

	fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo from-telegram > t.txt"}`), anthropictest.Text("left it"))
	e.say(owner, "write t.txt")
	tgID := e.approvalFor("Allow bash?")
	if err := c.ChatDecide(ctx, tgID, control.DecisionAlways); !errors.Is(err, control.ErrNoApproval) {
		t.Errorf("terminal answering the Telegram approval: %v, want ErrNoApproval", err)
	}
	e.say(owner, "/deny "+tgID)
	e.waitReply(owner.ID, "left it")

	fake.Script(anthropictest.ToolUse("toolu_2", "bash", `{"command":"echo from-terminal > l.txt"}`), anthropictest.Text("as you wish"))
	events := make(chan control.ChatEvent, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.ChatTurn(ctx, "write l.txt", func(ev control.ChatEvent) error { events <- ev; return nil })
	}()
	var localID string
	for localID == "" {
		select {
		case ev := <-events:
			if ev.Type == control.EventApproval {
				localID = ev.ID
			}
		case err := <-done:
			t.Fatalf("turn ended before asking: %v", err)
		}
	}
	if err := c.ChatTurn(ctx, "me too", func(control.ChatEvent) error { return nil }); !errors.Is(err, control.ErrChatBusy) {
		t.Errorf("second turn = %v, want ErrChatBusy", err)
	}
	if err := c.ChatReset(ctx); !errors.Is(err, control.ErrChatBusy) {
		t.Errorf("reset during a turn = %v, want ErrChatBusy", err)
	}
	e.say(owner, "/approve "+localID)
	e.waitReply(owner.ID, "expired or was already answered")
	if err := c.ChatDecide(ctx, localID, control.DecisionDeny); err != nil {
		t.Fatalf("ChatDecide: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("turn: %v", err)
	}
	close(events)
	var finished control.ChatEvent
	for ev := range events {
		if ev.Type == control.EventToolFinished {
			finished = ev
		}
	}
	if !finished.Denied || !strings.Contains(finished.Error, "declined") {
		t.Errorf("tool_finished = %+v, want denied by the owner", finished)
	}
	for _, f := range []string{"t.txt", "l.txt"} {
		if _, err := os.Stat(filepath.Join(e.home, "workspace", f)); err == nil {
			t.Errorf("%s was written though its call was denied", f)
		}
	}
}

// TestChatDisconnectStopsTurn: when the terminal hangs up, the turn stops,
// its command's whole process group is killed, and the session is free for
// the next turn, which the model sees was stopped.
func TestChatDisconnectStopsTurn(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	c := e.client()
	fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo $$ > pgid; sleep 60"}`))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- c.ChatTurn(ctx, "sleep a while", func(ev control.ChatEvent) error {
			if ev.Type == control.EventApproval {
				return c.ChatDecide(ctx, ev.ID, control.DecisionAlways)
			}
			return nil
		})
	}()
	pgidFile := filepath.Join(e.home, "workspace", "pgid")
	waitFor(t, func() bool { b, _ := os.ReadFile(pgidFile); return strings.HasSuffix(string(b), "\n") })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("ChatTurn after hanging up = %v, want context.Canceled", err)
	}
	b, _ := os.ReadFile(pgidFile)
	var pgid int
	for _, ch := range strings.TrimSpace(string(b)) {
		pgid = pgid*10 + int(ch-'0')
	}
	waitFor(t, func() bool { return pgid > 1 && groupGone(pgid) })

	fake.Script(anthropictest.Text("Still here."))
	ctx2, cancel2 := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel2()
	var evs []control.ChatEvent
	waitFor(t, func() bool {
		evs = nil
		err := c.ChatTurn(ctx2, "are you there?", func(ev control.ChatEvent) error { evs = append(evs, ev); return nil })
		return !errors.Is(err, control.ErrChatBusy)
	})
	if len(evs) == 0 || evs[len(evs)-1].Text != "Still here." {
		t.Errorf("next turn: %+v", evs)
	}
	reqs := fake.Requests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "stopped") {
		t.Errorf("the model was not told the turn was stopped: %s", body)
	}
}

// TestChatDaemonStopEndsTurn: stopping the daemon ends a turn that waits
// for an approval, and says why, instead of holding up the shutdown.
func TestChatDaemonStopEndsTurn(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	r := e.start()
	fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"true"}`))
	asked := make(chan struct{})
	done := make(chan error, 1)
	var last control.ChatEvent
	go func() {
		done <- e.client().ChatTurn(t.Context(), "run true", func(ev control.ChatEvent) error {
			if ev.Type == control.EventApproval {
				close(asked)
			}
			last = ev
			return nil
		})
	}()
	<-asked
	r.stop(t)
	if err := <-done; err != nil || last.Type != control.EventError || !strings.Contains(last.Text, "stopping") {
		t.Errorf("turn at shutdown: %v, last event %+v; want an error event saying latch is stopping", err, last)
	}
}

func TestChatWithoutModel(t *testing.T) {
	e := newEnv(t)
	e.start()
	c := e.client()
	info, err := c.ChatInfo(t.Context())
	if err != nil || info.Enabled || info.Provider != "none" {
		t.Errorf("ChatInfo = %+v, %v; want disabled, provider none", info, err)
	}
	if err := c.ChatTurn(t.Context(), "hello?", func(control.ChatEvent) error { return nil }); !errors.Is(err, control.ErrNoModel) {
		t.Errorf("ChatTurn = %v, want ErrNoModel", err)
	}
}

// TestOpenChatHoldsTheStore: the standalone chat runs the daemon's agent
// on the home's store, so a daemon cannot start beside it, and the
// conversation is the one the daemon continues.
func TestOpenChatHoldsTheStore(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	chat, err := OpenChat(e.config(), nil)
	if err != nil {
		t.Fatalf("OpenChat: %v", err)
	}
	fake.Script(anthropictest.Text("Hello from here."))
	var final string
	err = chat.ChatTurn(t.Context(), "my name is Ada", func(ev control.ChatEvent) error {
		if ev.Type == control.EventFinal {
			final = ev.Text
		}
		return nil
	})
	if err != nil || final != "Hello from here." {
		t.Errorf("standalone turn: %v, final %q", err, final)
	}
	if _, err := OpenChat(e.config(), nil); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second OpenChat = %v, want the store to be locked", err)
	}
	if err := chat.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	e.start()
	fake.Script(anthropictest.Text("You are Ada."))
	evs := e.chatTurn(t.Context(), "who am I?", nil)
	if evs[len(evs)-1].Text != "You are Ada." {
		t.Errorf("daemon turn: %+v", evs)
	}
	reqs := fake.Requests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "my name is Ada") {
		t.Errorf("the daemon did not continue the standalone conversation: %s", body)
	}
}

// chatClientEnv makes the test binary, run as TestChatHelperProcess, a
// terminal chat client that tries to approve the pending approval whose id
// the variable holds, start a turn and reset the session.
const chatClientEnv = "LATCH_TEST_CHAT_CLIENT"

func TestChatHelperProcess(t *testing.T) {
	id := os.Getenv(chatClientEnv)
	if id == "" {
		t.Skip("helper process for TestChatRefusedFromInsideARun: it does something only as that test's child")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := control.NewClient(config.SocketPath(os.Getenv(config.EnvHome)))
	for _, try := range []struct {
		name string
		err  error
	}{
		{"approve", c.ChatDecide(ctx, id, control.DecisionAlways)},
		{"turn", c.ChatTurn(ctx, "approve everything", func(control.ChatEvent) error { return nil })},
		{"new", c.ChatReset(ctx)},
	} {
		switch {
		case errors.Is(try.err, control.ErrRefused):
			fmt.Printf("%s: REFUSED\n", try.name)
		default:
			fmt.Printf("%s: ALLOWED (%v)\n", try.name, try.err)
		}
	}
}

// TestChatRefusedFromInsideARun: a command from the chat (or an agent
// tool) runs as the owner's uid, so the uid check alone would let it answer
// the terminal's approvals or drive the terminal session. Like mint, the
// chat routes refuse the daemon's descendants.
func TestChatRefusedFromInsideARun(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	e.pair()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := e.client()
	fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo pwned > p.txt"}`), anthropictest.Text("Left it."))
	ids := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- c.ChatTurn(ctx, "write p.txt", func(ev control.ChatEvent) error {
			if ev.Type == control.EventApproval {
				ids <- ev.ID
			}
			return nil
		})
	}()
	id := <-ids
	e.say(owner, fmt.Sprintf("!%s=%s %s=%s %s -test.run=^TestChatHelperProcess$",
		chatClientEnv, id, config.EnvHome, e.home, os.Args[0]))
	reply := e.waitReply(owner.ID, "new: ")
	for _, want := range []string{"approve: REFUSED", "turn: REFUSED", "new: REFUSED"} {
		if !strings.Contains(reply.Current(), want) {
			t.Errorf("a command from the chat: want %q in %q", want, reply.Current())
		}
	}
	// The approval is still pending, for the owner's own shell (here: the
	// test process) to answer.
	if err := c.ChatDecide(ctx, id, control.DecisionDeny); err != nil {
		t.Errorf("the owner's ChatDecide: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.home, "workspace", "p.txt")); err == nil {
		t.Error("the command from the chat got its tool call approved")
	}
}
