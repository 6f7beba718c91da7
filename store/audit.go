package store

import (
	"encoding/json"
	"time"
)

// AuditMax bounds the audit ring: the oldest events are dropped past it, so
// no stranger can grow the file by making latch log.
const AuditMax = 256

// Event is one audit record.
type Event struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Gateway string    `json:"gateway"`
	Kind    string    `json:"kind"`
	ChatID  string    `json:"chat_id,omitempty"`
	UserID  string    `json:"user_id,omitempty"`
	Detail  string    `json:"detail,omitempty"`
}

// Audit appends ev to the bounded audit ring.
func (tx *Tx) Audit(ev Event) error {
	b, err := tx.bucket(bucketAudit)
	if err != nil {
		return err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	ev.Seq = seq
	raw, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := b.Put(u64(seq), raw); err != nil {
		return err
	}
	if seq <= AuditMax {
		return nil
	}
	// Keys are sequence numbers, so everything at or below seq-AuditMax is
	// older than the ring; normally that is exactly one key.
	c := b.Cursor()
	for k, _ := c.First(); k != nil && fromU64(k) <= seq-AuditMax; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// AuditEvents returns up to n of the newest events, oldest first.
func (tx *Tx) AuditEvents(n int) ([]Event, error) {
	b, err := tx.bucket(bucketAudit)
	if err != nil {
		return nil, err
	}
	var out []Event
	c := b.Cursor()
	for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
		var ev Event
		if err := json.Unmarshal(v, &ev); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
