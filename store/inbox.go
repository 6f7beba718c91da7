package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// State is where an inbox entry is in its life.
type State string

// Inbox states. An entry is deleted once done, so the inbox only holds work
// that is waiting, running, or was cut by a crash.
const (
	// Received: stored, not started. Safe to run after a restart.
	Received State = "received"
	// Running: started. After a crash it must not run again (a shell
	// command is not idempotent); the chat is told instead.
	Running State = "running"
)

// Entry kinds.
const (
	// KindMessage is a chat message to handle.
	KindMessage = "message"
	// KindNotice is a reply latch owes a chat (e.g. the answer to a pairing
	// attempt decided at ingest); it is sent, then deleted.
	KindNotice = "notice"
	// KindResume continues an agent turn a restart cut, from its last
	// completed step. It is resumed once: if it is cut again, the chat is
	// told instead.
	KindResume = "resume"
)

// Entry is one unit of inbound work.
type Entry struct {
	Seq       uint64    `json:"seq"`
	Kind      string    `json:"kind"`
	Gateway   string    `json:"gateway"`
	ChatID    string    `json:"chat_id"`
	UserID    string    `json:"user_id,omitempty"`
	MessageID string    `json:"message_id,omitempty"`
	Text      string    `json:"text"`
	State     State     `json:"state"`
	Received  time.Time `json:"received"`
	// Extra holds what a gateway message carries beyond text (a button
	// press, attachments), encoded by the caller.
	Extra json.RawMessage `json:"extra,omitempty"`
	// Job is the scheduled job whose run this entry is (store.Job.ID);
	// 0 for what the chat sent.
	Job uint64 `json:"job,omitempty"`
}

// AppendInbox stores e under the next sequence number, in state Received,
// and returns that number.
func (tx *Tx) AppendInbox(e Entry) (uint64, error) {
	b, err := tx.bucket(bucketInbox)
	if err != nil {
		return 0, err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return 0, err
	}
	e.Seq = seq
	e.State = Received
	raw, err := json.Marshal(e)
	if err != nil {
		return 0, err
	}
	return seq, b.Put(u64(seq), raw)
}

// InboxEntry returns the entry with sequence seq, or nil.
func (tx *Tx) InboxEntry(seq uint64) (*Entry, error) {
	var e Entry
	found, err := tx.getJSON(bucketInbox, u64(seq), &e)
	if err != nil || !found {
		return nil, err
	}
	return &e, nil
}

// SetInboxState moves an existing entry to state s.
func (tx *Tx) SetInboxState(seq uint64, s State) error {
	e, err := tx.InboxEntry(seq)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("inbox entry %d missing", seq)
	}
	e.State = s
	return tx.putJSON(bucketInbox, u64(seq), e)
}

// ReplaceInbox stores e in place of the entry with the same sequence
// number, which must exist, in state Received: work that replaces other
// work keeps its place in the chat's order.
func (tx *Tx) ReplaceInbox(e Entry) error {
	old, err := tx.InboxEntry(e.Seq)
	if err != nil {
		return err
	}
	if old == nil {
		return fmt.Errorf("inbox entry %d missing", e.Seq)
	}
	e.State = Received
	return tx.putJSON(bucketInbox, u64(e.Seq), e)
}

// DeleteInbox removes an entry (its work is done).
func (tx *Tx) DeleteInbox(seq uint64) error {
	return tx.delete(bucketInbox, u64(seq))
}

// ScanInbox calls fn for entries with Seq >= from, in order, until fn
// returns false. An entry that does not decode stops the scan with an error.
func (tx *Tx) ScanInbox(from uint64, fn func(Entry) bool) error {
	b, err := tx.bucket(bucketInbox)
	if err != nil {
		return err
	}
	c := b.Cursor()
	for k, v := c.Seek(u64(from)); k != nil; k, v = c.Next() {
		var e Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("decode inbox entry %d: %w", fromU64(k), err)
		}
		if !fn(e) {
			return nil
		}
	}
	return nil
}

// InboxLen is the number of entries in the inbox.
func (tx *Tx) InboxLen() (int, error) {
	b, err := tx.bucket(bucketInbox)
	if err != nil {
		return 0, err
	}
	return b.Stats().KeyN, nil
}
