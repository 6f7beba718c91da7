package gateways

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/store"
)

// buttonGateway is a memGateway with buttons and downloads.
type buttonGateway struct {
	*memGateway
	answers chan [3]string // callback id, notice, resolved
	files   map[string]string
}

func (g *buttonGateway) AnswerCallback(_ context.Context, _ string, cb Callback, notice, resolved string) error {
	g.answers <- [3]string{cb.ID, notice, resolved}
	return nil
}

func (g *buttonGateway) Download(_ context.Context, a Attachment, w io.Writer, max int64) error {
	_, err := io.WriteString(w, g.files[a.ID])
	return err
}

// decidingAgent records decisions; only the id "live1" is pending. Its
// turns answer "ok" and run the hooks in transactions of their own, as the
// real agent runs them in its saves.
type decidingAgent struct {
	db        *store.DB
	mu        sync.Mutex
	decisions []string
	turns     []string
	// pressStored: whether the inbox still held the press when each
	// decision was taken.
	pressStored []bool
}

func (a *decidingAgent) Enabled() bool { return true }
func (a *decidingAgent) TurnWith(_ context.Context, _ agent.SessionKey, text string, ev agent.Events, h agent.Hooks) error {
	if h.Started != nil {
		if err := a.db.Update(h.Started); err != nil {
			return fmt.Errorf("%w: %w", agent.ErrNotStarted, err)
		}
	}
	a.mu.Lock()
	a.turns = append(a.turns, text)
	a.mu.Unlock()
	ev.Final("ok")
	if h.Done != nil {
		return a.db.Update(h.Done)
	}
	return nil
}
func (a *decidingAgent) Decide(key agent.SessionKey, id string, d agent.Decision) error {
	var stored int
	a.db.View(func(tx *store.Tx) (err error) { stored, err = tx.InboxLen(); return err })
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pressStored = append(a.pressStored, stored > 0)
	if id != "live1" || key.Chat != "100" {
		return agent.ErrNoApproval
	}
	a.decisions = append(a.decisions, string(d)+":"+id)
	return nil
}
func (a *decidingAgent) Reset(agent.SessionKey) error { return nil }
func (a *decidingAgent) Status(agent.SessionKey) (agent.Status, error) {
	return agent.Status{}, nil
}

func newButtonFixture(t *testing.T) (*hubFixture, *buttonGateway, *decidingAgent) {
	f := newHubFixture(t, true)
	bg := &buttonGateway{memGateway: f.gw, answers: make(chan [3]string, 10), files: map[string]string{}}
	ag := &decidingAgent{db: f.db}
	f.hub.gateways["telegram"] = bg
	f.hub.cfg.Agent = ag
	return f, bg, ag
}

func press(chatID, userID, data string) Message {
	return Message{ChatID: chatID, ChatType: ChatGroup, UserID: userID, Callback: &Callback{ID: "cb-" + userID + data, Data: data, MessageID: "7"}}
}

func TestButtonsOnlyCountFromTheLatchedUser(t *testing.T) {
	f, bg, ag := newButtonFixture(t)
	f.run(t)
	// A group latch: only user 100 counts.
	f.ingest(t, "1", Message{ID: "1", ChatID: "100", ChatType: ChatGroup, UserID: "100", Text: "/pair " + f.mint(t)})
	f.gw.next(t)
	f.ingest(t, "2", press("100", "666", "approve:live1"), press("555", "555", "approve:live1"))
	f.ingest(t, "3", press("100", "100", "deny:stale"))
	if got := <-bg.answers; got[1] != "This request has expired." || got[2] != "" {
		t.Errorf("stale press answered %v", got)
	}
	f.ingest(t, "4", press("100", "100", "approve:live1"))
	if got := <-bg.answers; got[1] != "Approved" || got[2] != "✓ approved" {
		t.Errorf("press answered %v", got)
	}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if len(ag.decisions) != 1 || ag.decisions[0] != "approve:live1" {
		t.Errorf("decisions = %v: a press from another user or chat counted", ag.decisions)
	}
	// The press is deleted only once decided: a crash in between must
	// bring it back, not lose it.
	if len(ag.pressStored) == 0 || slices.Contains(ag.pressStored, false) {
		t.Errorf("press still stored when decided: %v", ag.pressStored)
	}
	select {
	case got := <-bg.answers:
		t.Errorf("extra answer %v", got)
	default:
	}
}

func TestFilesLandInTheWorkspaceInbox(t *testing.T) {
	f, bg, ag := newButtonFixture(t)
	dir := t.TempDir()
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	f.hub.cfg.Files = ws
	bg.files["F1"] = "%PDF-1.7 body"
	f.run(t)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.gw.next(t)
	m := private("100", "please summarise")
	m.Files = []Attachment{{ID: "F1", Name: "../../evil report.pdf", Size: 13, Kind: "document"}}
	f.ingest(t, "2", m)
	if r := f.gw.next(t); r.Text != "ok" {
		t.Fatalf("reply %+v", r)
	}
	ag.mu.Lock()
	text := ag.turns[0]
	ag.mu.Unlock()
	_, rel, ok := strings.Cut(text, "saved in the workspace as ")
	rel = strings.TrimSuffix(rel, "]")
	if !ok || !strings.HasPrefix(rel, "inbox/") || !strings.HasSuffix(rel, "evil_report.pdf") || !strings.HasPrefix(text, "please summarise") {
		t.Fatalf("agent was told %q", text)
	}
	if b, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(b) != "%PDF-1.7 body" {
		t.Errorf("saved file = %q, %v", b, err)
	}
}

func (a *decidingAgent) ResumeWith(context.Context, agent.SessionKey, agent.Events, agent.Hooks) error {
	return nil
}
