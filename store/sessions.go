package store

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// A conversation is kept append-only, so that a step writes what it adds
// and not the whole history: bucket sessions holds one nested bucket per
// conversation key, and in it
//
//	meta → the caller's small record about the conversation (opaque here)
//	log  → nested bucket: message sequence number (big-endian uint64,
//	       from 1, never reused) → one message (opaque here)
//
//	results → nested bucket, only while a step has results: number
//	       (big-endian uint64, from 1) → nested bucket: r → one result
//	       of the step running (opaque here)
//
// Messages are appended at the end and dropped only from the front, so the
// kept ones are always a contiguous run of sequence numbers.
//
// A step's results are kept apart from the meta record so that saving one
// writes it alone, not every result before it: a step of many large
// results (bash keeps 64 KiB, fetch 100 KiB) would otherwise write the
// square of its output. Each has a bucket of its own because bbolt rewrites
// a leaf with every value on it, and a leaf holds at least two values
// however large: in one bucket, each append would write the last few
// results again. They go when the step ends (ClearSessionResults), and with
// the conversation.
//
// Schema 1 kept a conversation as one JSON value under its key in bucket
// sessions. Such a value is still read (LegacySession) and is replaced by
// the layout above on the conversation's first save (ReplaceSession).
var (
	keySessionMeta    = []byte("meta")
	keySessionLog     = []byte("log")
	keySessionResults = []byte("results")
	keySessionResult  = []byte("r")
)

// SessionInfo describes a stored conversation.
type SessionInfo struct {
	// Meta is the caller's record, as last written.
	Meta []byte
	// First is the sequence number of the oldest kept message; it equals
	// Next when no message is kept.
	First uint64
	// Next is the number the next appended message gets; Next-1 messages
	// were appended since the conversation began (some may be dropped).
	Next uint64
}

// Kept is how many messages are stored.
func (s SessionInfo) Kept() int { return int(s.Next - s.First) }

// Session returns what is stored about the conversation key; found is false
// when there is none in the current layout (see LegacySession).
func (tx *Tx) Session(key string) (info SessionInfo, found bool, err error) {
	b, log, err := tx.sessionBuckets(key)
	if err != nil || b == nil {
		return SessionInfo{}, false, err
	}
	info.Meta = append([]byte(nil), b.Get(keySessionMeta)...)
	info.Next = log.Sequence() + 1
	info.First = info.Next
	if k, _ := log.Cursor().First(); k != nil {
		info.First = fromU64(k)
	}
	return info, true, nil
}

// LegacySession returns the conversation key as schema 1 stored it (one
// value), or nil when it is not stored that way.
func (tx *Tx) LegacySession(key string) ([]byte, error) {
	root, err := tx.bucket(bucketSessions)
	if err != nil {
		return nil, err
	}
	v := root.Get([]byte(key))
	if v == nil {
		return nil, nil
	}
	return append([]byte(nil), v...), nil
}

// SessionTail calls fn with the kept messages of key from the newest
// backwards until fn returns false. msg is valid only during the call.
func (tx *Tx) SessionTail(key string, fn func(seq uint64, msg []byte) bool) error {
	_, log, err := tx.sessionBuckets(key)
	if err != nil || log == nil {
		return err
	}
	c := log.Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		if !fn(fromU64(k), v) {
			return nil
		}
	}
	return nil
}

// SessionRange calls fn with the kept messages of key from seq from on, in
// order, until fn returns false. msg is valid only during the call.
func (tx *Tx) SessionRange(key string, from uint64, fn func(seq uint64, msg []byte) bool) error {
	_, log, err := tx.sessionBuckets(key)
	if err != nil || log == nil {
		return err
	}
	c := log.Cursor()
	for k, v := c.Seek(u64(from)); k != nil; k, v = c.Next() {
		if !fn(fromU64(k), v) {
			return nil
		}
	}
	return nil
}

// AppendSession adds msgs after the kept messages of key and replaces its
// meta record, creating the conversation if needed, and returns the
// sequence number of the first message appended. A conversation still in
// the schema 1 layout must be converted with ReplaceSession first.
func (tx *Tx) AppendSession(key string, meta []byte, msgs ...[]byte) (uint64, error) {
	if meta == nil {
		return 0, errors.New("append session: no meta record")
	}
	b, log, err := tx.createSession(key)
	if err != nil {
		return 0, err
	}
	if err := b.Put(keySessionMeta, meta); err != nil {
		return 0, err
	}
	// Keys only ever grow: full pages waste nothing.
	log.FillPercent = 1
	first := log.Sequence() + 1
	for _, m := range msgs {
		seq, err := log.NextSequence()
		if err != nil {
			return 0, err
		}
		if err := log.Put(u64(seq), m); err != nil {
			return 0, err
		}
	}
	return first, nil
}

// ReplaceSession stores key afresh, in either layout before: msgs are
// numbered from 1, meta replaces the meta record, and stored step results
// are gone.
func (tx *Tx) ReplaceSession(key string, meta []byte, msgs ...[]byte) (uint64, error) {
	if err := tx.DeleteSession(key); err != nil {
		return 0, err
	}
	return tx.AppendSession(key, meta, msgs...)
}

// DropSessionBefore deletes the kept messages of key numbered below seq.
// Numbers are never reused: the next append continues after the newest.
func (tx *Tx) DropSessionBefore(key string, seq uint64) error {
	_, log, err := tx.sessionBuckets(key)
	if err != nil || log == nil {
		return err
	}
	var doomed [][]byte
	c := log.Cursor()
	for k, _ := c.First(); k != nil && fromU64(k) < seq; k, _ = c.Next() {
		doomed = append(doomed, append([]byte(nil), k...))
	}
	for _, k := range doomed {
		if err := log.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// AppendSessionResults adds results after the stored results of key's
// current step. The conversation must be stored in the current layout
// (AppendSession or ReplaceSession first, in the same transaction).
func (tx *Tx) AppendSessionResults(key string, results ...[]byte) error {
	if len(results) == 0 {
		return nil
	}
	b, _, err := tx.sessionBuckets(key)
	if err != nil {
		return err
	}
	if b == nil {
		return fmt.Errorf("session %s: append results: no such conversation", key)
	}
	rb, err := b.CreateBucketIfNotExists(keySessionResults)
	if err != nil {
		return fmt.Errorf("session %s: %w", key, err)
	}
	// Keys only ever grow: full pages waste nothing.
	rb.FillPercent = 1
	for _, r := range results {
		seq, err := rb.NextSequence()
		if err != nil {
			return err
		}
		one, err := rb.CreateBucket(u64(seq))
		if err != nil {
			return fmt.Errorf("session %s: %w", key, err)
		}
		if err := one.Put(keySessionResult, r); err != nil {
			return err
		}
	}
	return nil
}

// SessionResults calls fn with the stored results of key's current step,
// in the order they were appended, until fn returns false. result is
// valid only during the call.
func (tx *Tx) SessionResults(key string, fn func(result []byte) bool) error {
	b, _, err := tx.sessionBuckets(key)
	if err != nil || b == nil {
		return err
	}
	rb := b.Bucket(keySessionResults)
	if rb == nil {
		return nil
	}
	c := rb.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		one := rb.Bucket(k)
		if one == nil {
			return fmt.Errorf("session %s: result %d is not a bucket", key, fromU64(k))
		}
		if !fn(one.Get(keySessionResult)) {
			return nil
		}
	}
	return nil
}

// ClearSessionResults deletes the stored results of key's step; there may
// be none.
func (tx *Tx) ClearSessionResults(key string) error {
	b, _, err := tx.sessionBuckets(key)
	if err != nil || b == nil {
		return err
	}
	err = b.DeleteBucket(keySessionResults)
	if errors.Is(err, berrors.ErrBucketNotFound) {
		return nil
	}
	return err
}

// DeleteSession forgets the conversation of key, in either layout, its
// step's results with it.
func (tx *Tx) DeleteSession(key string) error {
	root, err := tx.bucket(bucketSessions)
	if err != nil {
		return err
	}
	k := []byte(key)
	if root.Get(k) != nil {
		return root.Delete(k)
	}
	err = root.DeleteBucket(k)
	if errors.Is(err, berrors.ErrBucketNotFound) {
		return nil
	}
	return err
}

// sessionBuckets returns the conversation's bucket and its log, or nils
// when key has none in the current layout.
func (tx *Tx) sessionBuckets(key string) (b, log *bolt.Bucket, err error) {
	root, err := tx.bucket(bucketSessions)
	if err != nil {
		return nil, nil, err
	}
	b = root.Bucket([]byte(key))
	if b == nil {
		return nil, nil, nil
	}
	log = b.Bucket(keySessionLog)
	if log == nil {
		return nil, nil, fmt.Errorf("session %s: no message log", key)
	}
	return b, log, nil
}

func (tx *Tx) createSession(key string) (b, log *bolt.Bucket, err error) {
	root, err := tx.bucket(bucketSessions)
	if err != nil {
		return nil, nil, err
	}
	k := []byte(key)
	if root.Get(k) != nil {
		return nil, nil, fmt.Errorf("session %s is in the schema 1 layout; replace it first", key)
	}
	if b = root.Bucket(k); b == nil {
		if b, err = root.CreateBucket(k); err != nil {
			return nil, nil, fmt.Errorf("session %s: %w", key, err)
		}
	}
	if log = b.Bucket(keySessionLog); log == nil {
		if log, err = b.CreateBucket(keySessionLog); err != nil {
			return nil, nil, fmt.Errorf("session %s: %w", key, err)
		}
	}
	return b, log, nil
}
