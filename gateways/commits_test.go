package gateways

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/store"
)

// instantModel answers every call at once, noting how many transactions
// the store had committed when it was called.
type instantModel struct {
	db *store.DB
	mu sync.Mutex
	// atCall: the store's commits when each call came.
	atCall []uint64
}

func (m *instantModel) Name() string { return "instant" }

func (m *instantModel) Stream(_ context.Context, _ provider.Request, onText func(string)) (provider.Response, error) {
	m.mu.Lock()
	m.atCall = append(m.atCall, m.db.Commits())
	m.mu.Unlock()
	onText("pong")
	return provider.Response{Content: []provider.Block{{Type: provider.BlockText, Text: "pong"}}, StopReason: provider.StopEndTurn}, nil
}

// TestPlainTextCommits: the owner's plain text costs one durable commit
// before the model is called (the message, with the cursor) and one after
// it before the answer goes out (the turn's start, the user's message and
// the answer together); delivery then deletes the entry. Nothing is lost
// or run twice by that (the restart tests of the Hub and the agent, and
// daemon's kill -9 tests, prove it for each cut), and the answer's path
// pays two commits' disk syncs instead of three.
func TestPlainTextCommits(t *testing.T) {
	f := newHubFixture(t, false)
	model := &instantModel{db: f.db}
	ws, err := tools.OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	// StartDelay: the call counts as quick however slow the machine is.
	f.hub.cfg.Agent = agent.New(agent.Config{Provider: model, Store: f.db, Tools: &agent.Toolbox{Workspace: ws}, StartDelay: time.Hour})
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.run(t)
	f.gw.next(t)
	waitUntil(t, "the pairing reply is done", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })

	before := f.db.Commits()
	f.ingest(t, "2", private("100", "ping"))
	if r := f.gw.next(t); r.Text != "pong" {
		t.Fatalf("reply %+v, want the model's answer", r)
	}
	waitUntil(t, "the answer is done", func() bool { return f.inboxLen(t) == 0 && f.hub.idle() })
	model.mu.Lock()
	atCall := model.atCall
	model.mu.Unlock()
	if len(atCall) != 1 || atCall[0]-before != 1 {
		t.Errorf("commits before the model call: %v (from %d), want 1: the message", atCall, before)
	}
	if n := f.db.Commits() - before; n != 3 {
		t.Errorf("plain text took %d commits, want 3: the message; start and answer; delivered", n)
	}
}
