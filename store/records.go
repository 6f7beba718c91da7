package store

import (
	"time"
)

// Latch binds a gateway to the one chat it answers.
type Latch struct {
	Gateway  string    `json:"gateway"`
	ChatID   string    `json:"chat_id"`
	ChatType string    `json:"chat_type"`
	ChatName string    `json:"chat_name,omitempty"`
	UserID   string    `json:"user_id"`
	UserName string    `json:"user_name,omitempty"`
	Since    time.Time `json:"since"`
}

// Pending is a gateway's outstanding pairing code. Only a keyed hash of the
// code is kept.
type Pending struct {
	Gateway   string    `json:"gateway"`
	Hash      []byte    `json:"hash"`
	MintedAt  time.Time `json:"minted_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Attempts  int       `json:"attempts"`
	Burned    bool      `json:"burned"`
	// Approval: minted while a gateway was latched, so its latch waits for
	// the owner's approval in a latched chat (pairing decides again at
	// redemption). Replace: minted with --replace, to move the gateway's
	// latch to the chat that redeems it. Origin says where the mint came
	// from, as far as latch could tell.
	Approval bool   `json:"approval,omitempty"`
	Replace  bool   `json:"replace,omitempty"`
	Origin   string `json:"origin,omitempty"`
}

// Latch returns the gateway's latch, or nil when it has none.
func (tx *Tx) Latch(gateway string) (*Latch, error) {
	var l Latch
	found, err := tx.getJSON(bucketLatches, []byte(gateway), &l)
	if err != nil || !found {
		return nil, err
	}
	return &l, nil
}

// PutLatch stores l as its gateway's latch, replacing any other.
func (tx *Tx) PutLatch(l Latch) error {
	return tx.putJSON(bucketLatches, []byte(l.Gateway), l)
}

// DeleteLatch removes the gateway's latch, if any.
func (tx *Tx) DeleteLatch(gateway string) error {
	return tx.delete(bucketLatches, []byte(gateway))
}

// Pending returns the gateway's pending code record, or nil.
func (tx *Tx) Pending(gateway string) (*Pending, error) {
	var p Pending
	found, err := tx.getJSON(bucketPending, []byte(gateway), &p)
	if err != nil || !found {
		return nil, err
	}
	return &p, nil
}

// PutPending stores p, superseding any earlier code of its gateway.
func (tx *Tx) PutPending(p Pending) error {
	return tx.putJSON(bucketPending, []byte(p.Gateway), p)
}

// DeletePending removes the gateway's pending code, if any.
func (tx *Tx) DeletePending(gateway string) error {
	return tx.delete(bucketPending, []byte(gateway))
}

// Cursor returns the gateway's platform cursor (e.g. Telegram's next
// getUpdates offset), or "".
func (tx *Tx) Cursor(gateway string) (string, error) {
	b, err := tx.bucket(bucketCursors)
	if err != nil {
		return "", err
	}
	return string(b.Get([]byte(gateway))), nil
}

// SetCursor stores the gateway's platform cursor.
func (tx *Tx) SetCursor(gateway, cursor string) error {
	b, err := tx.bucket(bucketCursors)
	if err != nil {
		return err
	}
	return b.Put([]byte(gateway), []byte(cursor))
}

// Incr adds n to the named counter of a gateway.
func (tx *Tx) Incr(gateway, name string, n uint64) error {
	b, err := tx.bucket(bucketCounters)
	if err != nil {
		return err
	}
	key := []byte(gateway + "/" + name)
	var cur uint64
	if v := b.Get(key); len(v) == 8 {
		cur = fromU64(v)
	}
	return b.Put(key, u64(cur+n))
}

// Counter reads the named counter of a gateway.
func (tx *Tx) Counter(gateway, name string) (uint64, error) {
	b, err := tx.bucket(bucketCounters)
	if err != nil {
		return 0, err
	}
	if v := b.Get([]byte(gateway + "/" + name)); len(v) == 8 {
		return fromU64(v), nil
	}
	return 0, nil
}

// BotName returns the bot user name a gateway last reported, so a pairing
// link can be printed while no daemon runs.
func (tx *Tx) BotName(gateway string) (string, error) {
	b, err := tx.bucket(bucketBots)
	if err != nil {
		return "", err
	}
	return string(b.Get([]byte(gateway))), nil
}

// SetBotName records the gateway's bot user name.
func (tx *Tx) SetBotName(gateway, name string) error {
	b, err := tx.bucket(bucketBots)
	if err != nil {
		return err
	}
	return b.Put([]byte(gateway), []byte(name))
}
