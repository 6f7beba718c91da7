package agent

import (
	"crypto/rand"
	"errors"
	"strings"
	"sync"
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
type Approval struct {
	ID      string
	Tool    string
	Summary string // one line, clipped: for a notice, not for the decision
	// Detail is exactly what the call would do (see [ApprovalDetail]):
	// every line of a command, invisible characters spelled out. An
	// approval request shows it whole, or says how much it could not show
	// ([ClipMiddle]); a summary clipped to one line could hide a second
	// command after a newline or past its cut.
	Detail string
}

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

// decide delivers d to the request id of key, once.
func (p *approvals) decide(key SessionKey, id string, d Decision) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	id = strings.ToLower(strings.TrimSpace(id))
	w, ok := p.waiting[id]
	if !ok || w.key != key {
		return ErrNoApproval
	}
	delete(p.waiting, id)
	w.ch <- d
	return nil
}

// newID is a short opaque id (5 symbols of base32, lower case) that fits
// Telegram's callback data and is easy to type.
func newID() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, 5)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
