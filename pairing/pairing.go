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
	DefaultTTL  = 10 * time.Minute
	MaxTTL      = time.Hour
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

// Mint creates a code for gateway valid for ttl, superseding any pending
// one, and returns it in canonical form (no hyphen). Only the hash is stored.
func (p *Pairer) Mint(tx *store.Tx, gateway string, ttl time.Duration) (code string, expires time.Time, err error) {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return "", time.Time{}, ErrBadTTL
	}
	code, err = NewCode()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("mint code: %w", err)
	}
	now := p.Now().UTC()
	expires = now.Add(ttl)
	err = tx.PutPending(store.Pending{
		Gateway: gateway, Hash: p.hash(gateway, code), MintedAt: now, ExpiresAt: expires,
	})
	if err == nil {
		err = tx.Audit(store.Event{Time: now, Gateway: gateway, Kind: EventMinted, Detail: "expires " + expires.Format(time.RFC3339)})
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("mint code: %w", err)
	}
	return code, expires, nil
}

// Chat identifies who is trying to pair.
type Chat struct {
	ID, Type, Name string
	UserID         string
	UserName       string
}

// Redeem checks input against the gateway's pending code and, on a match,
// consumes the code and latches chat, all in tx. It returns the new latch,
// or ErrInvalidCode for every kind of failure. A failure still writes (the
// attempt count, and the burn at MaxAttempts), so the caller must commit tx
// on ErrInvalidCode; any other error is a store error and the caller must
// fail closed.
func (p *Pairer) Redeem(tx *store.Tx, gateway, input string, chat Chat) (*store.Latch, error) {
	now := p.Now().UTC()
	pending, err := tx.Pending(gateway)
	if err != nil {
		return nil, fmt.Errorf("redeem code: %w", err)
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
		return p.latch(tx, gateway, chat, now)
	}
	if pending == nil || pending.Burned {
		return nil, ErrInvalidCode
	}
	return nil, p.fail(tx, pending, chat, now)
}

func (p *Pairer) latch(tx *store.Tx, gateway string, chat Chat, now time.Time) (*store.Latch, error) {
	l := store.Latch{
		Gateway: gateway, ChatID: chat.ID, ChatType: chat.Type, ChatName: chat.Name,
		UserID: chat.UserID, UserName: chat.UserName, Since: now,
	}
	if err := tx.DeletePending(gateway); err != nil {
		return nil, fmt.Errorf("redeem code: %w", err)
	}
	if err := tx.PutLatch(l); err != nil {
		return nil, fmt.Errorf("redeem code: %w", err)
	}
	err := tx.Audit(store.Event{Time: now, Gateway: gateway, Kind: EventPaired, ChatID: chat.ID, UserID: chat.UserID})
	if err != nil {
		return nil, fmt.Errorf("redeem code: %w", err)
	}
	return &l, nil
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
	ev := store.Event{Time: p.Now().UTC(), Gateway: gateway, Kind: EventUnpaired, ChatID: l.ChatID}
	if pending != nil {
		if err := tx.DeletePending(gateway); err != nil {
			return nil, fmt.Errorf("unpair: %w", err)
		}
		ev.Detail = "pending code cancelled"
	}
	if err := tx.Audit(ev); err != nil {
		return nil, fmt.Errorf("unpair: %w", err)
	}
	return l, nil
}

// IsInvalid reports whether err is the uniform redemption failure.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalidCode) }
