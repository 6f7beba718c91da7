package agent

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/store"
)

// quick is a fixture whose first model calls always count as quick: the
// start waits for the step's save however long the model takes.
func quick(c *Config) { c.StartDelay = time.Hour }

// TestQuickAnswerCommitsOnce: an answer that is in before the start was
// stored on its own is stored with the start, in one commit that carries
// the Started and Done hooks, and its text is shown after that commit.
func TestQuickAnswerCommitsOnce(t *testing.T) {
	f := newFixture(t, quick)
	f.fake.Script(anthropictest.Text("hello there").Chunk(2))
	ev := &recorder{}
	hooks := Hooks{
		Started: func(tx *store.Tx) error { return tx.Incr("test", "started", 1) },
		Done:    func(tx *store.Tx) error { return tx.Incr("test", "done", 1) },
	}
	before := f.db.Commits()
	if err := f.agent.TurnWith(context.Background(), chat, "hi", ev, hooks); err != nil {
		t.Fatal(err)
	}
	if n := f.db.Commits() - before; n != 1 {
		t.Errorf("the turn committed %d times, want 1 (start and answer together)", n)
	}
	f.db.View(func(tx *store.Tx) error {
		started, _ := tx.Counter("test", "started")
		done, _ := tx.Counter("test", "done")
		if started != 1 || done != 1 {
			t.Errorf("hooks stored: started %d, done %d; want 1 each", started, done)
		}
		return nil
	})
	if ev.text.String() != "hello there" || ev.final != "hello there" {
		t.Errorf("streamed %q, final %q", ev.text.String(), ev.final)
	}
	if st, _ := f.agent.Status(chat); st.Messages != 2 {
		t.Errorf("stored %d messages, want the question and the answer", st.Messages)
	}
}

// TestQuickToolStepStoresTheStartFirst: when the first step's answer is a
// tool call, the start is stored with the step, before the tool runs; if
// it cannot be, the tool never runs and nothing is stored or shown.
func TestQuickToolStepStoresTheStartFirst(t *testing.T) {
	f := newFixture(t, quick)
	f.fake.Script(anthropictest.ToolUse("toolu_1", ToolList, `{"path":"."}`), anthropictest.Text("listed"))
	ev := &recorder{}
	var toolsBefore []int // tools started when Started ran
	hooks := Hooks{Started: func(tx *store.Tx) error {
		ev.mu.Lock()
		toolsBefore = append(toolsBefore, len(ev.started))
		ev.mu.Unlock()
		return nil
	}}
	if err := f.agent.TurnWith(context.Background(), chat, "list", ev, hooks); err != nil {
		t.Fatal(err)
	}
	if len(ev.started) != 1 {
		t.Fatalf("tools started: %v", ev.started)
	}
	if !slices.Equal(toolsBefore, []int{0}) {
		t.Errorf("Started ran %d times, after %v tools started; want once, before any", len(toolsBefore), toolsBefore)
	}

	g := newFixture(t, quick)
	boom := errors.New("disk full")
	g.fake.Script(anthropictest.ToolUse("toolu_1", ToolList, `{"path":"."}`), anthropictest.Text("never"))
	ev = &recorder{}
	err := g.agent.TurnWith(context.Background(), chat, "list", ev, Hooks{Started: func(*store.Tx) error { return boom }})
	if !errors.Is(err, ErrNotStarted) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want ErrNotStarted wrapping the hook's error", err)
	}
	if len(ev.started) != 0 || ev.text.Len() != 0 || ev.final != "" {
		t.Errorf("a turn whose start failed ran %v, showed %q, final %q", ev.started, ev.text.String(), ev.final)
	}
	if st, _ := g.agent.Status(chat); st.Messages != 0 {
		t.Errorf("stored %d messages of a turn that never started", st.Messages)
	}
	if n := len(g.fake.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
}

// TestHeldTextShownDuringAPause: text that arrived before the start was
// stored on its own is shown once it is, while the stream is still
// paused, not only when the next piece comes.
func TestHeldTextShownDuringAPause(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.StartDelay = time.Millisecond })
	f.fake.Script(anthropictest.Text("first then more").Chunk(6).PauseAfter(1, time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	ev := &recorder{}
	done := make(chan error, 1)
	go func() {
		done <- f.agent.TurnWith(ctx, chat, "hi", ev, Hooks{Started: func(*store.Tx) error { return nil }})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev.mu.Lock()
		shown := ev.text.String()
		ev.mu.Unlock()
		if shown != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first piece was not shown while the stream paused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}
