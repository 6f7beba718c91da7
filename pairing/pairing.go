package pairing

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch/store"
)

// Defaults and bounds for code lifetimes.
const (
	DefaultTTL = 10 * time.Minute
	// MaxTTL is what a person needs to carry a code from the terminal to
	// a phone, with room to spare; a code is a way in while it lives.
	MaxTTL      = 30 * time.Minute
	MinTTL      = 30 * time.Second
	MaxAttempts = 5
)

// KeyLen is the size of the HMAC key kept in $LATCH_HOME/secret.
const KeyLen = 32

// Audit event kinds written by this package.
const (
	EventMinted   = "code_minted"
	EventPaired   = "paired"
	EventUnpaired = "unpaired"
	EventFailed   = "failed_attempt"
	EventBurned   = "code_burned"
	// Latch approvals (approval.go).
	EventRequested = "latch_requested"
	EventApproved  = "latch_approved"
	EventDenied    = "latch_denied"
	EventExpired   = "latch_expired"
)

// ErrBadTTL is returned by Mint for a lifetime outside [MinTTL, MaxTTL].
var ErrBadTTL = fmt.Errorf("ttl must be between %v and %v", MinTTL, MaxTTL)

// Pairer mints and redeems codes with one HMAC key.
type Pairer struct {
	key []byte
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// New returns a Pairer keyed by key (KeyLen random bytes).
func New(key []byte) (*Pairer, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("pairing key must be %d bytes, got %d", KeyLen, len(key))
	}
	return &Pairer{key: append([]byte(nil), key...), Now: time.Now}, nil
}

// hash binds the code to its gateway so a code minted for one gateway can
// never latch another.
func (p *Pairer) hash(gateway, code string) []byte {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("latch-pair-v1\x00"))
	m.Write([]byte(gateway))
	m.Write([]byte{0})
	m.Write([]byte(code))
	return m.Sum(nil)
}

// MintOptions qualify a mint.
type MintOptions struct {
	// Replace asks for a code that moves a latched gateway to the chat
	// that redeems it, once a latched chat approves. Without it a latched
	// gateway gets no code (ErrLatched).
	Replace bool
	// Origin says where the mint came from, as far as the caller could
	// tell; the approval request shows it.
	Origin string
}

// Minted is a fresh code and what its redemption will need.
type Minted struct {
	// Code is in canonical form (no hyphen).
	Code    string
	Expires time.Time
	// Approval: the code's latch waits for the owner's approval in a
	// latched chat (see Redeem). Replace: it moves the gateway's latch.
	Approval, Replace bool
}

// Mint creates a code for gateway valid for ttl with no options; see
// MintWith.
func (p *Pairer) Mint(tx *store.Tx, gateway string, ttl time.Duration) (code string, expires time.Time, err error) {
	m, err := p.MintWith(tx, gateway, ttl, MintOptions{})
	return m.Code, m.Expires, err
}

// MintWith creates a code for gateway valid for ttl, superseding any
// pending one. Only the hash is stored, with whether its redemption needs
// approval: it does while any gateway is latched (Redeem decides again
// then). A latched gateway gets a code only with opt.Replace, and no
// gateway gets one during the grace period after an unpair that left
// nothing latched (ErrCoolingOff): nobody could approve it.
func (p *Pairer) MintWith(tx *store.Tx, gateway string, ttl time.Duration, opt MintOptions) (Minted, error) {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return Minted{}, ErrBadTTL
	}
	now := p.Now().UTC()
	rule, err := p.rule(tx, gateway, now)
	if err != nil {
		return Minted{}, fmt.Errorf("mint code: %w", err)
	}
	switch {
	case rule.own != nil && !opt.Replace:
		return Minted{}, &LatchedError{Latch: *rule.own}
	case rule.own == nil:
		opt.Replace = false // nothing to replace: an ordinary code
	}
	if len(rule.approvers) == 0 && rule.coolingUntil.After(now) {
		return Minted{}, &CoolingOffError{Gateway: rule.unpaired.Gateway, Unpaired: rule.unpaired.At, Until: rule.coolingUntil}
	}
	code, err := NewCode()
	if err != nil {
		return Minted{}, fmt.Errorf("mint code: %w", err)
	}
	m := Minted{Code: code, Expires: now.Add(ttl), Approval: len(rule.approvers) > 0, Replace: opt.Replace}
	err = tx.PutPending(store.Pending{
		Gateway: gateway, Hash: p.hash(gateway, code), MintedAt: now, ExpiresAt: m.Expires,
		Approval: m.Approval, Replace: m.Replace, Origin: opt.Origin,
	})
	if err == nil {
		detail := "expires " + m.Expires.Format(time.RFC3339)
		if m.Replace {
			detail += ", replaces the latch"
		} else if m.Approval {
			detail += ", needs approval"
		}
		err = tx.Audit(store.Event{Time: now, Gateway: gateway, Kind: EventMinted, Detail: detail})
	}
	if err != nil {
		return Minted{}, fmt.Errorf("mint code: %w", err)
	}
	return m, nil
}

// Chat identifies who is trying to pair.
type Chat struct {
	ID, Type, Name string
	UserID         string
	UserName       string
}

// Redemption is what a redeemed code did: latched a chat, or (while a
// gateway is latched) filed a request for the owner's approval.
type Redemption struct {
	Latch   *store.Latch
	Request *store.LatchRequest
}

// Redeem checks input against the gateway's pending code and, on a match,
// consumes the code and, in tx, either latches chat or — while any gateway
// is latched, or the code was minted while one was — files a LatchRequest
// that a latched chat approves (Approve) or denies. It returns
// ErrInvalidCode for every kind of failure, and ErrNoApprover for a right
// code that needs an approval nobody can give any more (the chats latched
// when it was minted have been unpaired), which spends it. A failure still
// writes (the attempt count, the burn at MaxAttempts, the spent code), so
// the caller must commit tx on either error; any other error is a store
// error and the caller must fail closed.
func (p *Pairer) Redeem(tx *store.Tx, gateway, input string, chat Chat) (Redemption, error) {
	now := p.Now().UTC()
	pending, err := tx.Pending(gateway)
	if err != nil {
		return Redemption{}, fmt.Errorf("redeem code: %w", err)
	}
	code, wellFormed := Normalize(input)
	// Hash and compare before looking at expiry or burn, so every failure
	// costs the same work.
	got := p.hash(gateway, code)
	var want []byte
	if pending != nil {
		want = pending.Hash
	} else {
		want = make([]byte, len(got))
	}
	match := hmac.Equal(got, want) && wellFormed && pending != nil
	usable := pending != nil && !pending.Burned && now.Before(pending.ExpiresAt)
	if match && usable {
		return p.redeemed(tx, pending, chat, now)
	}
	if pending == nil || pending.Burned {
		return Redemption{}, ErrInvalidCode
	}
	return Redemption{}, p.fail(tx, pending, chat, now)
}

// redeemed spends a matching code: it latches chat, or files the request
// for approval the rule asks for.
func (p *Pairer) redeemed(tx *store.Tx, pending *store.Pending, chat Chat, now time.Time) (Redemption, error) {
	if err := tx.DeletePending(pending.Gateway); err != nil {
		return Redemption{}, fmt.Errorf("redeem code: %w", err)
	}
	rule, err := p.rule(tx, pending.Gateway, now)
	if err != nil {
		return Redemption{}, fmt.Errorf("redeem code: %w", err)
	}
	need := pending.Approval || pending.Replace || len(rule.approvers) > 0 || rule.coolingUntil.After(now)
	l := latchOf(pending.Gateway, chat, now)
	if !need {
		if err := p.putLatch(tx, l, now, ""); err != nil {
			return Redemption{}, fmt.Errorf("redeem code: %w", err)
		}
		return Redemption{Latch: &l}, nil
	}
	if len(rule.approvers) == 0 {
		ev := store.Event{Time: now, Gateway: pending.Gateway, Kind: EventBurned, ChatID: chat.ID, UserID: chat.UserID,
			Detail: "needed approval, and no chat is latched to give it"}
		if err := tx.Audit(ev); err != nil {
			return Redemption{}, fmt.Errorf("redeem code: %w", err)
		}
		return Redemption{}, ErrNoApprover
	}
	req, err := p.request(tx, pending, l, now)
	if err != nil {
		return Redemption{}, fmt.Errorf("redeem code: %w", err)
	}
	return Redemption{Request: req}, nil
}

func latchOf(gateway string, chat Chat, now time.Time) store.Latch {
	return store.Latch{
		Gateway: gateway, ChatID: chat.ID, ChatType: chat.Type, ChatName: chat.Name,
		UserID: chat.UserID, UserName: chat.UserName, Since: now,
	}
}

// putLatch latches l's chat and audits it; detail says who approved it.
func (p *Pairer) putLatch(tx *store.Tx, l store.Latch, now time.Time, detail string) error {
	if err := tx.PutLatch(l); err != nil {
		return err
	}
	return tx.Audit(store.Event{Time: now, Gateway: l.Gateway, Kind: EventPaired, ChatID: l.ChatID, UserID: l.UserID, Detail: detail})
}

// fail records a failed attempt against a live pending code and burns it at
// MaxAttempts. It returns ErrInvalidCode, or a store error.
func (p *Pairer) fail(tx *store.Tx, pending *store.Pending, chat Chat, now time.Time) error {
	pending.Attempts++
	kind := EventFailed
	if pending.Attempts >= MaxAttempts {
		pending.Burned = true
		kind = EventBurned
	}
	if err := tx.PutPending(*pending); err != nil {
		return fmt.Errorf("redeem code: %w", err)
	}
	ev := store.Event{Time: now, Gateway: pending.Gateway, Kind: kind, ChatID: chat.ID, UserID: chat.UserID}
	if err := tx.Audit(ev); err != nil {
		return fmt.Errorf("redeem code: %w", err)
	}
	return ErrInvalidCode
}

// Unpair removes the gateway's latch and, in the same transaction, its
// pending code. It returns the latch it removed, or nil when there was
// none, and then it changes nothing, so a caller that reports "not paired"
// reports all that happened.
//
// The code goes with the latch because every mint is announced in the
// latched chat with the advice to unpair if the owner did not mint it: a
// code that outlived the latch would make following that advice free the
// gateway for whoever minted the code.
//
// Waiting requests to latch the gateway go too, for the same reason, and
// the unpair is recorded: for GraceAfterUnpair no new latch can be made
// without the approval of a chat still latched (see MintWith).
func (p *Pairer) Unpair(tx *store.Tx, gateway string) (*store.Latch, error) {
	l, err := tx.Latch(gateway)
	if err != nil {
		return nil, fmt.Errorf("unpair: %w", err)
	}
	if l == nil {
		return nil, nil
	}
	pending, err := tx.Pending(gateway)
	if err != nil {
		return nil, fmt.Errorf("unpair: %w", err)
	}
	if err := tx.DeleteLatch(gateway); err != nil {
		return nil, fmt.Errorf("unpair: %w", err)
	}
	now := p.Now().UTC()
	if err := tx.PutUnpaired(store.Unpaired{Gateway: gateway, ChatID: l.ChatID, At: now}); err != nil {
		return nil, fmt.Errorf("unpair: %w", err)
	}
	ev := store.Event{Time: now, Gateway: gateway, Kind: EventUnpaired, ChatID: l.ChatID}
	if pending != nil {
		if err := tx.DeletePending(gateway); err != nil {
			return nil, fmt.Errorf("unpair: %w", err)
		}
		ev.Detail = "pending code cancelled"
	}
	if err := p.dropRequests(tx, gateway); err != nil {
		return nil, fmt.Errorf("unpair: %w", err)
	}
	if err := tx.Audit(ev); err != nil {
		return nil, fmt.Errorf("unpair: %w", err)
	}
	return l, nil
}

// IsInvalid reports whether err is the uniform redemption failure.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalidCode) }
