package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// LatchRequest is a redeemed code whose latch waits for the owner's
// approval in a chat latched already (pairing owns the rule). The code is
// spent: approving latches Chat, denying or expiry leaves nothing to use.
type LatchRequest struct {
	ID      string `json:"id"`
	Gateway string `json:"gateway"`
	// Chat is the latch approval makes (Since is set then).
	Chat Latch `json:"chat"`
	// Replace: the code was minted with --replace, so approval moves the
	// gateway's latch from the chat it has to Chat.
	Replace bool `json:"replace,omitempty"`
	// MintedAt and Origin are the code's (Pending).
	MintedAt  time.Time `json:"minted_at"`
	Origin    string    `json:"origin,omitempty"`
	Requested time.Time `json:"requested"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Unpaired records when a gateway was last unpaired and from which chat,
// for pairing's grace period after an unpair.
type Unpaired struct {
	Gateway string    `json:"gateway"`
	ChatID  string    `json:"chat_id"`
	At      time.Time `json:"at"`
}

// LatchRequest returns the request with id, or nil.
func (tx *Tx) LatchRequest(id string) (*LatchRequest, error) {
	var r LatchRequest
	found, err := tx.getJSON(bucketApprovals, []byte(id), &r)
	if err != nil || !found {
		return nil, err
	}
	return &r, nil
}

// PutLatchRequest stores r under its id.
func (tx *Tx) PutLatchRequest(r LatchRequest) error {
	return tx.putJSON(bucketApprovals, []byte(r.ID), r)
}

// DeleteLatchRequest removes the request with id, if any.
func (tx *Tx) DeleteLatchRequest(id string) error {
	return tx.delete(bucketApprovals, []byte(id))
}

// LatchRequests returns every waiting request, in id order. A record that
// does not decode is an error: the callers decide who may latch.
func (tx *Tx) LatchRequests() ([]LatchRequest, error) {
	return all[LatchRequest](tx, bucketApprovals)
}

// Latches returns every gateway's latch, in gateway order.
func (tx *Tx) Latches() ([]Latch, error) {
	return all[Latch](tx, bucketLatches)
}

// all decodes every value of bucket; one that does not decode is an error.
func all[T any](tx *Tx, bucket []byte) ([]T, error) {
	var out []T
	err := tx.each(bucket, func(k, v []byte) error {
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("decode %s/%s: %w", bucket, k, err)
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

// Unpaired returns when gateway was last unpaired, or nil.
func (tx *Tx) Unpaired(gateway string) (*Unpaired, error) {
	var u Unpaired
	found, err := tx.getJSON(bucketUnpaired, []byte(gateway), &u)
	if err != nil || !found {
		return nil, err
	}
	return &u, nil
}

// LastUnpaired returns the latest unpair of any gateway, or nil.
func (tx *Tx) LastUnpaired() (*Unpaired, error) {
	us, err := all[Unpaired](tx, bucketUnpaired)
	var last *Unpaired
	for i := range us {
		if last == nil || us[i].At.After(last.At) {
			last = &us[i]
		}
	}
	return last, err
}

// PutUnpaired records u as its gateway's last unpair.
func (tx *Tx) PutUnpaired(u Unpaired) error {
	return tx.putJSON(bucketUnpaired, []byte(u.Gateway), u)
}

// each calls fn for every key of bucket. A bucket a file written by an
// older latch lacks (only a read-only open leaves it so) is empty.
func (tx *Tx) each(bucket []byte, fn func(k, v []byte) error) error {
	b := tx.tx.Bucket(bucket)
	if b == nil {
		if tx.tx.Writable() {
			return fmt.Errorf("bucket %s missing", bucket)
		}
		return nil
	}
	return b.ForEach(fn)
}
