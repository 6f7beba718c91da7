package agent

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/latchd/latch/store"
	"github.com/latchd/latch/turn"
)

// Decision is the owner's answer to an approval request.
type Decision string

// Decisions. Always approves and stops asking for that tool for the rest of
// the session.
const (
	Approve Decision = "approve"
	DenyIt  Decision = "deny"
	Always  Decision = "always"
)

// ErrNoApproval is returned by Decide for an id that is unknown, expired,
// already decided or belongs to another chat.
var ErrNoApproval = errors.New("no such pending approval (it may have expired)")

// Approval is a tool call waiting for the owner.
type Approval = turn.Approval

type pending struct {
	key SessionKey
	ch  chan Decision
}

// approvals holds the calls waiting for a decision.
type approvals struct {
	mu      sync.Mutex
	waiting map[string]pending
}

// newFreeID returns an id no waiting request uses.
func (p *approvals) newFreeID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := newID()
	for p.waiting[id].ch != nil {
		id = newID()
	}
	return id
}

// register makes id answerable for key and returns the channel that
// receives the decision. A restart registers the same id again.
func (p *approvals) register(key SessionKey, id string) chan Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = make(map[string]pending)
	}
	ch := make(chan Decision, 1)
	p.waiting[id] = pending{key: key, ch: ch}
	return ch
}

func (p *approvals) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.waiting, id)
}

// decide delivers d to the request id of key, once. An id no turn of key
// waits for goes to stored instead, still under the lock: a turn registers
// an id before it looks for a stored decision, so d reaches it one way or
// the other.
func (p *approvals) decide(key SessionKey, id string, d Decision, stored func(id string) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	id = strings.ToLower(strings.TrimSpace(id))
	w, ok := p.waiting[id]
	if !ok || w.key != key {
		return stored(id)
	}
	delete(p.waiting, id)
	w.ch <- d
	return nil
}

// decideStored records d with the request id that key's session stores as
// waiting, unexpired and undecided, for the turn that resumes it; in one
// transaction, so that a press the chat was told was taken survives a
// crash too. It returns ErrNoApproval when there is no such request.
func (a *Agent) decideStored(key SessionKey, id string, d Decision) error {
	err := a.cfg.Store.Update(func(tx *store.Tx) error {
		info, found, err := tx.Session(key.String())
		if err != nil {
			return err
		}
		if !found {
			return ErrNoApproval
		}
		var m sessionMeta
		if err := json.Unmarshal(info.Meta, &m); err != nil {
			return fmt.Errorf("meta: %w", err)
		}
		for use, w := range m.Waiting {
			if w.ID != id || w.Decision != "" || !a.now().Before(w.Expires) {
				continue
			}
			w.Decision = d
			m.Waiting[use] = w
			raw, err := json.Marshal(m)
			if err != nil {
				return err
			}
			_, err = tx.AppendSession(key.String(), raw)
			return err
		}
		return ErrNoApproval
	})
	if err != nil && !errors.Is(err, ErrNoApproval) {
		return fmt.Errorf("decide %s in session %s: %w", id, key, err)
	}
	return err
}

// decided applies the owner's decision on a call of tool.
func (a *Agent) decided(key SessionKey, tool string, d Decision) (reason string, ok bool) {
	switch d {
	case Always:
		a.mu.Lock()
		if a.always[key] == nil {
			a.always[key] = make(map[string]bool)
		}
		a.always[key][tool] = true
		a.mu.Unlock()
		return "", true
	case Approve:
		return "", true
	}
	return "denied: the owner declined this call", false
}

// newID is a short opaque id (5 symbols of base32, lower case) that fits
// Telegram's callback data and is easy to type.
// NewApprovalID returns a fresh approval id, as the chat's /approve takes
// it; a backend other than the embedded agent makes its ids with it.
func NewApprovalID() string { return newID() }

func newID() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, 5)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
