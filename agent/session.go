package agent

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/store"
)

// SessionKey names one conversation: a chat on a gateway.
type SessionKey struct{ Gateway, Chat string }

func (k SessionKey) String() string { return k.Gateway + "/" + k.Chat }

// session is what the store keeps of a conversation. It is written after
// every step, so a restart loses at most the step that was running.
type session struct {
	Messages []provider.Message `json:"messages"`
	Started  time.Time          `json:"started"`
	// Tokens counts tokens by UTC day ("2006-01-02").
	Tokens map[string]int `json:"tokens,omitempty"`
	// Running lists the tool calls of the current step that began to run.
	Running []string `json:"running,omitempty"`
	// Waiting holds the current step's approval requests by tool_use id.
	Waiting map[string]waitingApproval `json:"waiting,omitempty"`
}

// waitingApproval is an approval request that outlives a restart.
type waitingApproval struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
}

// Notes the agent writes into the history so the model knows what happened.
const (
	noteInterrupted = "interrupted by a restart of latch; it was not run again"
	noteRestart     = "(this turn was cut short by a restart of latch)"
)

func (a *Agent) load(key SessionKey) (*session, error) {
	var raw []byte
	err := a.cfg.Store.View(func(tx *store.Tx) (err error) {
		raw, err = tx.Session(key.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	s := &session{Started: a.now()}
	if raw != nil {
		if err := json.Unmarshal(raw, s); err != nil {
			return nil, fmt.Errorf("load session: %w", err)
		}
	}
	return s, nil
}

func (a *Agent) save(key SessionKey, s *session) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return a.cfg.Store.Update(func(tx *store.Tx) error { return tx.PutSession(key.String(), raw) })
}

// repair makes a history that a crash cut valid again: a tool call without
// a result gets "interrupted" as its result — it is never re-run; the model
// reads that and decides what to do next when the turn resumes.
func (s *session) repair() {
	n := len(s.Messages)
	if n == 0 || s.Messages[n-1].Role != provider.RoleAssistant {
		return
	}
	var results []provider.Block
	for _, b := range s.Messages[n-1].Content {
		if b.Type == provider.BlockToolUse {
			results = append(results, provider.Block{Type: provider.BlockToolResult, ID: b.ID, Text: noteInterrupted, IsError: true})
		}
	}
	if results != nil {
		s.Messages = append(s.Messages, provider.Message{Role: provider.RoleUser, Content: results})
	}
}

// danglingToolUses returns the tool calls of a last assistant message that
// have no results yet.
func (s *session) danglingToolUses() []provider.Block {
	n := len(s.Messages)
	if n == 0 || s.Messages[n-1].Role != provider.RoleAssistant {
		return nil
	}
	var uses []provider.Block
	for _, b := range s.Messages[n-1].Content {
		if b.Type == provider.BlockToolUse {
			uses = append(uses, b)
		}
	}
	return uses
}

// unfinished reports whether the history ends on the user's side: a turn
// that a crash or stop cut before the model answered.
func (s *session) unfinished() bool {
	n := len(s.Messages)
	return n > 0 && s.Messages[n-1].Role == provider.RoleUser
}

// closeTurn keeps the strict user/assistant alternation providers expect: a
// turn that ends on the user's side (an error, /stop, max_steps, a crash)
// gets a short assistant note.
func (s *session) closeTurn(note string) {
	if n := len(s.Messages); n > 0 && s.Messages[n-1].Role == provider.RoleUser {
		s.Messages = append(s.Messages, provider.Message{Role: provider.RoleAssistant,
			Content: []provider.Block{{Type: provider.BlockText, Text: note}}})
	}
}

// trimmed returns the newest part of the history that fits budget
// (approximate tokens). It drops whole turns from the front — a turn starts
// at a user message that carries no tool results — so a tool call is never
// separated from its result. The newest turn is always kept.
func trimmed(msgs []provider.Message, budget int) []provider.Message {
	total := 0
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		sizes[i] = approxTokens(m)
		total += sizes[i]
	}
	start := 0
	for total > budget {
		next := nextTurn(msgs, start+1)
		if next < 0 {
			break
		}
		for i := start; i < next; i++ {
			total -= sizes[i]
		}
		start = next
	}
	return msgs[start:]
}

func nextTurn(msgs []provider.Message, from int) int {
	for i := from; i < len(msgs); i++ {
		if isTurnStart(msgs[i]) {
			return i
		}
	}
	return -1
}

func isTurnStart(m provider.Message) bool {
	if m.Role != provider.RoleUser {
		return false
	}
	for _, b := range m.Content {
		if b.Type == provider.BlockToolResult {
			return false
		}
	}
	return true
}

// approxTokens estimates a message's size: about four bytes a token.
func approxTokens(m provider.Message) int {
	n := 4
	for _, b := range m.Content {
		n += (len(b.Text) + len(b.Input) + len(b.Name) + len(b.ID)) / 4
	}
	return n
}
