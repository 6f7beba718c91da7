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
	// Answered: done, and the answer the chat is owed is stored with the
	// entry (Entry.Answer), in the outbox, committed before anything of it
	// is sent. Delivery deletes the entry. After a crash the answer is
	// sent, never reported as interrupted, and the work is never run
	// again (see ReturnAnswers).
	Answered State = "answered"
	// Cut: a command latch itself stopped while it ran (a shutdown whose
	// grace ran out), so it is known not to have finished. A command
	// found Running after a crash may have finished instead.
	Cut State = "cut"
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
	// Answer is the answer owed to the chat, in state Answered.
	Answer *Answer `json:"answer,omitempty"`
	// Again: latch may have sent this (a notice, an answer) before a
	// restart, so what is sent now may be a second copy and says so.
	Again bool `json:"again,omitempty"`
	// Job is the scheduled job whose run this entry is (store.Job.ID);
	// 0 for what the chat sent.
	Job uint64 `json:"job,omitempty"`
}

// Answer is the finished work's answer, kept until the platform has
// taken it: a command's output tail and exit line, or a turn's final text.
type Answer struct {
	Text string `json:"text"`
	// Pre: shown as a preformatted block (a command's output).
	Pre bool `json:"pre,omitempty"`
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
	return tx.changeInbox(seq, func(e *Entry) { e.State = s })
}

// changeInbox applies change to the existing entry seq.
func (tx *Tx) changeInbox(seq uint64, change func(*Entry)) error {
	e, err := tx.InboxEntry(seq)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("inbox entry %d missing", seq)
	}
	change(e)
	return tx.putJSON(bucketInbox, u64(seq), e)
}

// AnswerInbox ends the work of the existing entry seq: the entry moves to
// the outbox, in state Answered with its answer a, until DeleteInbox says
// it was delivered.
func (tx *Tx) AnswerInbox(seq uint64, a Answer) error {
	e, err := tx.InboxEntry(seq)
	if err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("inbox entry %d missing", seq)
	}
	e.State, e.Answer = Answered, &a
	if err := tx.putJSON(bucketOutbox, u64(seq), e); err != nil {
		return err
	}
	return tx.delete(bucketInbox, u64(seq))
}

// ReturnAnswers puts every answer of the outbox back in the inbox under
// its own number, marked Again (the last process may have sent it), so
// that it is sent in its place in the chat's order, before what came
// after it. It returns how many there were.
func (tx *Tx) ReturnAnswers() (int, error) {
	b, err := tx.bucket(bucketOutbox)
	if err != nil {
		return 0, err
	}
	var seqs []uint64
	err = b.ForEach(func(k, v []byte) error {
		var e Entry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("decode outbox entry %d: %w", fromU64(k), err)
		}
		e.Again = true
		seqs = append(seqs, fromU64(k))
		return tx.putJSON(bucketInbox, k, e)
	})
	if err != nil {
		return 0, err
	}
	for _, seq := range seqs {
		if err := b.Delete(u64(seq)); err != nil {
			return 0, err
		}
	}
	return len(seqs), nil
}

// MarkAgain flags the existing entry seq as possibly sent before (see
// Entry.Again), keeping its state.
func (tx *Tx) MarkAgain(seq uint64) error {
	return tx.changeInbox(seq, func(e *Entry) { e.Again = true })
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

// DeleteInbox removes an entry, from the inbox or the outbox: its work is
// done and nothing more of it is owed to the chat.
func (tx *Tx) DeleteInbox(seq uint64) error {
	if err := tx.delete(bucketOutbox, u64(seq)); err != nil {
		return err
	}
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

// OutboxLen counts the answers owed to chats (AnswerInbox) whose delivery
// is not confirmed yet. It counts by cursor: Stats misses what the
// transaction itself changed.
func (tx *Tx) OutboxLen() (int, error) {
	b, err := tx.bucket(bucketOutbox)
	if err != nil {
		return 0, err
	}
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n, nil
}
