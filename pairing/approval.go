package pairing

import (
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch/store"
)

// The approval rule. A code is a secret a process on the machine can read
// as easily as the owner: any process of the owner's uid can mint one
// (tmux, systemd-run, at, cron and ssh all reach the control socket, and
// the store is the owner's file). So while any gateway is latched a new
// latch takes effect only once the owner approves it with a button in a
// latched chat, which no process on the machine can press.
const (
	// ApprovalTTL is how long a request waits for the owner's answer;
	// past it the request is dropped and the code stays spent.
	ApprovalTTL = 10 * time.Minute
	// GraceAfterUnpair is how long after an unpair a new latch still needs
	// the approval of a chat latched now: an unpair must not be a way to
	// make the next latch free. With no chat latched nobody can approve, so
	// no code is minted until it is over.
	GraceAfterUnpair = 10 * time.Minute
)

// ErrNoApprover: a right code whose latch needs approval, while no chat is
// latched to give it. The code is spent.
var ErrNoApprover = errors.New("this code needs the owner's approval, and no chat is latched to give it")

// ErrNoRequest: no waiting request has that id (unknown, decided, expired,
// or the gateway was latched or unpaired since).
var ErrNoRequest = errors.New("no such latch request waits")

// LatchedError refuses a plain mint for a latched gateway: a second chat
// cannot be latched beside the first, and a move must say so (Replace).
type LatchedError struct{ Latch store.Latch }

func (e *LatchedError) Error() string {
	return fmt.Sprintf("%s is paired with %s since %s", e.Latch.Gateway, ChatLabel(e.Latch), e.Latch.Since.Local().Format("2006-01-02 15:04"))
}

// CoolingOffError refuses a mint during the grace period after an unpair
// that left no chat latched.
type CoolingOffError struct {
	Gateway         string
	Unpaired, Until time.Time
}

func (e *CoolingOffError) Error() string {
	return fmt.Sprintf("%s was unpaired at %s and no chat is paired to approve a new latch; a code can be minted from %s",
		e.Gateway, e.Unpaired.Local().Format("15:04:05"), e.Until.Local().Format("15:04:05"))
}

// ChatLabel names a latch's chat and user for a person.
func ChatLabel(l store.Latch) string {
	name := l.ChatName
	if name == "" {
		name = "chat " + l.ChatID
	} else {
		name = fmt.Sprintf("%q", name)
	}
	switch {
	case l.UserName != "":
		return fmt.Sprintf("%s (user %s, id %s)", name, l.UserName, l.UserID)
	case l.UserID != "":
		return fmt.Sprintf("%s (user id %s)", name, l.UserID)
	}
	return name
}

// rule is what the store says about a new latch of gateway now.
type rule struct {
	own          *store.Latch  // the gateway's own latch, if any
	approvers    []store.Latch // every latched chat, of any gateway
	unpaired     *store.Unpaired
	coolingUntil time.Time // end of the grace period of the last unpair
}

func (p *Pairer) rule(tx *store.Tx, gateway string, now time.Time) (rule, error) {
	var r rule
	var err error
	if r.own, err = tx.Latch(gateway); err != nil {
		return r, err
	}
	if r.approvers, err = tx.Latches(); err != nil {
		return r, err
	}
	if r.unpaired, err = tx.LastUnpaired(); err != nil {
		return r, err
	}
	if r.unpaired != nil {
		r.coolingUntil = r.unpaired.At.Add(GraceAfterUnpair)
	}
	return r, nil
}

// request files a redemption for approval; a gateway has at most one
// waiting, the latest.
func (p *Pairer) request(tx *store.Tx, pending *store.Pending, l store.Latch, now time.Time) (*store.LatchRequest, error) {
	if err := p.dropRequests(tx, pending.Gateway); err != nil {
		return nil, err
	}
	id, err := NewCode()
	if err != nil {
		return nil, err
	}
	r := store.LatchRequest{ID: id, Gateway: pending.Gateway, Chat: l, Replace: pending.Replace,
		MintedAt: pending.MintedAt, Origin: pending.Origin, Requested: now, ExpiresAt: now.Add(ApprovalTTL)}
	if err := tx.PutLatchRequest(r); err != nil {
		return nil, err
	}
	ev := store.Event{Time: now, Gateway: r.Gateway, Kind: EventRequested, ChatID: l.ChatID, UserID: l.UserID, Detail: "request " + id}
	if err := tx.Audit(ev); err != nil {
		return nil, err
	}
	return &r, nil
}

// dropRequests removes the gateway's waiting requests.
func (p *Pairer) dropRequests(tx *store.Tx, gateway string) error {
	reqs, err := tx.LatchRequests()
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if r.Gateway == gateway {
			if err := tx.DeleteLatchRequest(r.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// Decision is what answering a request did.
type Decision struct {
	Request store.LatchRequest
	// Latch is the latch approval made (nil on a denial); Replaced the
	// one it took the gateway from (nil if none).
	Latch, Replaced *store.Latch
}

// Approve latches the chat of request id, on behalf of the chat by latched
// to its gateway now (checked here, in tx). A replacing request moves the
// gateway's latch; any other finds the gateway unlatched or is dropped.
func (p *Pairer) Approve(tx *store.Tx, id string, by store.Latch) (Decision, error) {
	r, now, err := p.answerable(tx, id, by)
	if err != nil {
		return Decision{}, err
	}
	cur, err := tx.Latch(r.Gateway)
	if err != nil {
		return Decision{}, fmt.Errorf("approve latch: %w", err)
	}
	if err := tx.DeleteLatchRequest(id); err != nil {
		return Decision{}, fmt.Errorf("approve latch: %w", err)
	}
	if cur != nil && !r.Replace {
		return Decision{}, ErrNoRequest // latched by another code since
	}
	l := r.Chat
	l.Since = now
	if err := p.putLatch(tx, l, now, "approved in "+by.Gateway+" chat "+by.ChatID+", request "+id); err != nil {
		return Decision{}, fmt.Errorf("approve latch: %w", err)
	}
	return Decision{Request: *r, Latch: &l, Replaced: cur}, nil
}

// Deny drops request id on behalf of the latched chat by; its code stays
// spent.
func (p *Pairer) Deny(tx *store.Tx, id string, by store.Latch) (Decision, error) {
	r, now, err := p.answerable(tx, id, by)
	if err != nil {
		return Decision{}, err
	}
	if err := tx.DeleteLatchRequest(id); err != nil {
		return Decision{}, fmt.Errorf("deny latch: %w", err)
	}
	ev := store.Event{Time: now, Gateway: r.Gateway, Kind: EventDenied, ChatID: r.Chat.ChatID, UserID: r.Chat.UserID,
		Detail: "denied in " + by.Gateway + " chat " + by.ChatID + ", request " + id}
	if err := tx.Audit(ev); err != nil {
		return Decision{}, fmt.Errorf("deny latch: %w", err)
	}
	return Decision{Request: *r}, nil
}

// answerable returns request id if it waits and by is a latch that holds
// in tx (the chat and user latched to by.Gateway now).
func (p *Pairer) answerable(tx *store.Tx, id string, by store.Latch) (*store.LatchRequest, time.Time, error) {
	now := p.Now().UTC()
	cur, err := tx.Latch(by.Gateway)
	if err != nil {
		return nil, now, fmt.Errorf("answer latch request: %w", err)
	}
	if cur == nil || cur.ChatID != by.ChatID || (cur.UserID != "" && cur.UserID != by.UserID) {
		return nil, now, ErrNoRequest
	}
	r, err := tx.LatchRequest(id)
	if err != nil {
		return nil, now, fmt.Errorf("answer latch request: %w", err)
	}
	if r == nil || !now.Before(r.ExpiresAt) {
		return nil, now, ErrNoRequest
	}
	return r, now, nil
}

// Expire drops the requests whose time is up and returns them.
func (p *Pairer) Expire(tx *store.Tx) ([]store.LatchRequest, error) {
	now := p.Now().UTC()
	reqs, err := tx.LatchRequests()
	if err != nil {
		return nil, fmt.Errorf("expire latch requests: %w", err)
	}
	var gone []store.LatchRequest
	for _, r := range reqs {
		if now.Before(r.ExpiresAt) {
			continue
		}
		if err := tx.DeleteLatchRequest(r.ID); err != nil {
			return nil, fmt.Errorf("expire latch requests: %w", err)
		}
		ev := store.Event{Time: now, Gateway: r.Gateway, Kind: EventExpired, ChatID: r.Chat.ChatID, UserID: r.Chat.UserID, Detail: "request " + r.ID}
		if err := tx.Audit(ev); err != nil {
			return nil, fmt.Errorf("expire latch requests: %w", err)
		}
		gone = append(gone, r)
	}
	return gone, nil
}
