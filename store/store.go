// Package store is latch's bbolt adapter: it owns the schema (buckets and
// their encodings) and offers typed accessors inside transactions. Callers
// compose several accessors in one transaction when an invariant needs it,
// e.g. writing inbox entries and advancing a platform cursor together, or
// checking a pairing code and latching a chat together.
package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout this code reads and writes. 2: conversations
// are append-only (see sessions.go); a schema 1 file is read as it is and
// its conversations are converted one by one as they are next saved, so
// opening marks the file 2 at once — a latch that knows only schema 1 would
// not see the converted ones.
const SchemaVersion = 2

// ErrLocked means another process (normally a running daemon) holds the
// database file.
var ErrLocked = errors.New("the database is in use by another latch process")

// ErrNewerSchema means the file was written by a newer latch.
var ErrNewerSchema = errors.New("the database was written by a newer latch")

var (
	bucketMeta     = []byte("meta")
	bucketLatches  = []byte("latches")
	bucketPending  = []byte("pending")
	bucketCursors  = []byte("cursors")
	bucketInbox    = []byte("inbox")
	bucketCounters = []byte("counters")
	bucketAudit    = []byte("audit")
	bucketBots     = []byte("bots")
	bucketSessions = []byte("sessions")
	// bucketOutbox holds answers owed to chats, keyed by the inbox
	// sequence number of the entry they answer (see AnswerInbox).
	bucketOutbox = []byte("outbox")
	bucketJobs   = []byte("jobs")
	// bucketApprovals holds LatchRequests, bucketUnpaired the last unpair
	// of each gateway (approvals.go).
	bucketApprovals = []byte("approvals")
	bucketUnpaired  = []byte("unpaired")

	allBuckets = [][]byte{bucketMeta, bucketLatches, bucketPending, bucketCursors,
		bucketInbox, bucketCounters, bucketAudit, bucketBots, bucketSessions,
		bucketOutbox, bucketJobs, bucketApprovals, bucketUnpaired}

	keySchema = []byte("schema")
)

// DB is an open latch database.
type DB struct {
	bolt *bolt.DB
	// commits counts the read-write transactions that committed through
	// Update: each is a durable write (bbolt syncs the file twice).
	commits atomic.Uint64
}

// Options tune Open.
type Options struct {
	// LockTimeout is how long Open waits for the file lock before
	// returning ErrLocked. Zero means 200ms: a second daemon must fail at
	// once, not hang.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading only (a shared lock), so status
	// can be read while no daemon runs without blocking a starting one.
	ReadOnly bool
}

// Open opens (creating if needed, mode 0600) the database at path and makes
// sure the schema is in place.
func Open(path string, opts Options) (*DB, error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = 200 * time.Millisecond
	}
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout, ReadOnly: opts.ReadOnly})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if !opts.ReadOnly {
		// bbolt applies the mode only when it creates the file.
		if err := os.Chmod(path, 0o600); err != nil {
			b.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
	}
	db := &DB{bolt: b}
	if opts.ReadOnly {
		err = db.View(func(tx *Tx) error { return checkSchema(tx.tx) })
	} else if err = b.View(func(tx *bolt.Tx) error { return current(tx) }); err != nil {
		// A commit syncs the file twice, even one that changes nothing:
		// a file already current (every start after the first) is not
		// written at all.
		err = b.Update(migrate)
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

func migrate(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if v := meta.Get(keySchema); v != nil {
		if err := checkSchema(tx); err != nil || fromU64(v) == SchemaVersion {
			return err
		}
	}
	return meta.Put(keySchema, u64(SchemaVersion))
}

// errMigrate says the file needs migrate.
var errMigrate = errors.New("the file is not at the current schema")

// current returns nil if migrate would change nothing in the file.
func current(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil {
			return errMigrate
		}
	}
	if v := tx.Bucket(bucketMeta).Get(keySchema); len(v) != 8 || fromU64(v) != SchemaVersion {
		return errMigrate
	}
	return nil
}

func checkSchema(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return errors.New("not a latch database (no meta bucket)")
	}
	v := meta.Get(keySchema)
	if len(v) != 8 {
		return errors.New("not a latch database (no schema version)")
	}
	if fromU64(v) > SchemaVersion {
		return fmt.Errorf("schema %d: %w", fromU64(v), ErrNewerSchema)
	}
	return nil
}

// Close closes the database.
func (db *DB) Close() error { return db.bolt.Close() }

// Bolt returns the underlying handle, for consistency checks and for tests
// that need to damage the file on purpose.
func (db *DB) Bolt() *bolt.DB { return db.bolt }

// Path is the file the database lives in.
func (db *DB) Path() string { return db.bolt.Path() }

// Update runs fn in a read-write transaction; fn's error rolls it back.
func (db *DB) Update(fn func(*Tx) error) error {
	return db.bolt.Update(func(btx *bolt.Tx) error {
		btx.OnCommit(func() { db.commits.Add(1) })
		return fn(&Tx{tx: btx})
	})
}

// Commits is how many transactions Update has committed since Open: what
// the answer path pays in disk syncs, for tests and the bench to count.
func (db *DB) Commits() uint64 { return db.commits.Load() }

// View runs fn in a read-only transaction.
func (db *DB) View(fn func(*Tx) error) error {
	return db.bolt.View(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx}) })
}

// Tx is a transaction with typed accessors.
type Tx struct {
	tx *bolt.Tx
}

func (tx *Tx) bucket(name []byte) (*bolt.Bucket, error) {
	b := tx.tx.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("bucket %s missing", name)
	}
	return b, nil
}

// getJSON decodes the value at key into v; found is false when absent.
// A value that does not decode is an error, never "absent": callers on the
// guard path must fail closed on damage.
func (tx *Tx) getJSON(bucket, key []byte, v any) (found bool, err error) {
	b, err := tx.bucket(bucket)
	if err != nil {
		return false, err
	}
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("decode %s/%s: %w", bucket, key, err)
	}
	return true, nil
}

func (tx *Tx) putJSON(bucket, key []byte, v any) error {
	b, err := tx.bucket(bucket)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

func (tx *Tx) delete(bucket, key []byte) error {
	b, err := tx.bucket(bucket)
	if err != nil {
		return err
	}
	return b.Delete(key)
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func fromU64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
