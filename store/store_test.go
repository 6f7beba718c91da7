package store

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func openTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "latch.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestOpenIsPrivateAndExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latch.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("db mode = %o, want 600", got)
	}
	start := time.Now()
	_, err = Open(path, Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: err = %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("second open took %v; it must fail at once", d)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	db := openTest(t)
	path := db.Path()
	if err := db.bolt.Update(func(tx *boltTx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, u64(SchemaVersion+1))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(path, Options{}); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("err = %v, want ErrNewerSchema", err)
	}
}

// TestReopenWritesNothing: opening a file already at the current schema
// commits nothing (a commit syncs the disk twice, on every start); one
// that lacks a bucket gets it.
func TestReopenWritesNothing(t *testing.T) {
	db := openTest(t)
	path := db.Path()
	txid := func(db *DB) (id int) {
		db.bolt.View(func(tx *boltTx) error { id = tx.ID(); return nil })
		return id
	}
	before := txid(db)
	db.Close()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if after := txid(db); after != before {
		t.Errorf("reopening committed %d transactions", after-before)
	}
	if err := db.bolt.Update(func(tx *boltTx) error { return tx.DeleteBucket(bucketJobs) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *Tx) error { _, err := tx.bucket(bucketJobs); return err }); err != nil {
		t.Errorf("a missing bucket was not made: %v", err)
	}
}

func TestLatchAndPendingRoundTrip(t *testing.T) {
	db := openTest(t)
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	err := db.Update(func(tx *Tx) error {
		if l, err := tx.Latch("telegram"); err != nil || l != nil {
			t.Fatalf("empty latch = %v, %v", l, err)
		}
		if err := tx.PutLatch(Latch{Gateway: "telegram", ChatID: "42", Since: since}); err != nil {
			return err
		}
		return tx.PutPending(Pending{Gateway: "telegram", Hash: []byte{1, 2}, Attempts: 3})
	})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *Tx) error {
		l, err := tx.Latch("telegram")
		if err != nil || l == nil || l.ChatID != "42" || !l.Since.Equal(since) {
			t.Errorf("latch = %+v, %v", l, err)
		}
		p, err := tx.Pending("telegram")
		if err != nil || p == nil || p.Attempts != 3 || len(p.Hash) != 2 {
			t.Errorf("pending = %+v, %v", p, err)
		}
		return nil
	})
}

func TestDamagedLatchIsAnErrorNotAbsent(t *testing.T) {
	db := openTest(t)
	db.bolt.Update(func(tx *boltTx) error {
		return tx.Bucket(bucketLatches).Put([]byte("telegram"), []byte("{not json"))
	})
	err := db.View(func(tx *Tx) error {
		l, err := tx.Latch("telegram")
		if l != nil {
			t.Errorf("damaged latch decoded as %+v", l)
		}
		return err
	})
	if err == nil {
		t.Fatal("damaged latch record read without error; the guard would treat it as unlatched")
	}
}

func TestInboxOrderAndStates(t *testing.T) {
	db := openTest(t)
	var seqs []uint64
	db.Update(func(tx *Tx) error {
		for _, text := range []string{"a", "b", "c"} {
			seq, err := tx.AppendInbox(Entry{Kind: KindMessage, Gateway: "telegram", Text: text})
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		return tx.SetInboxState(seqs[1], Running)
	})
	db.Update(func(tx *Tx) error { return tx.DeleteInbox(seqs[0]) })
	var got []string
	db.View(func(tx *Tx) error {
		return tx.ScanInbox(0, func(e Entry) bool {
			got = append(got, e.Text+":"+string(e.State))
			return true
		})
	})
	want := []string{"b:running", "c:received"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("inbox = %v, want %v", got, want)
	}
	// A replacement keeps the entry's place and starts it afresh.
	if err := db.Update(func(tx *Tx) error {
		return tx.ReplaceInbox(Entry{Seq: seqs[1], Kind: KindResume, Gateway: "telegram", Text: "b2", State: Running})
	}); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	db.View(func(tx *Tx) error {
		return tx.ScanInbox(0, func(e Entry) bool {
			got = append(got, e.Kind+":"+e.Text+":"+string(e.State))
			return true
		})
	})
	if want := []string{"resume:b2:received", "message:c:received"}; !slices.Equal(got, want) {
		t.Errorf("after ReplaceInbox: inbox = %v, want %v", got, want)
	}
	if err := db.Update(func(tx *Tx) error { return tx.ReplaceInbox(Entry{Seq: seqs[0], Text: "gone"}) }); err == nil {
		t.Error("ReplaceInbox stored an entry that no longer exists")
	}
}

func TestAuditRingIsBounded(t *testing.T) {
	db := openTest(t)
	for i := 0; i < AuditMax*3; i++ {
		if err := db.Update(func(tx *Tx) error {
			return tx.Audit(Event{Gateway: "telegram", Kind: "stranger"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	db.View(func(tx *Tx) error {
		n := tx.tx.Bucket(bucketAudit).Stats().KeyN
		if n != AuditMax {
			t.Errorf("audit holds %d events, want %d", n, AuditMax)
		}
		evs, _ := tx.AuditEvents(5)
		if len(evs) != 5 || evs[4].Seq != AuditMax*3 || evs[0].Seq != AuditMax*3-4 {
			t.Errorf("newest events = %+v", evs)
		}
		return nil
	})
}

func TestCounters(t *testing.T) {
	db := openTest(t)
	for i := 0; i < 3; i++ {
		db.Update(func(tx *Tx) error { return tx.Incr("telegram", "handled", 2) })
	}
	db.View(func(tx *Tx) error {
		if n, _ := tx.Counter("telegram", "handled"); n != 6 {
			t.Errorf("counter = %d, want 6", n)
		}
		return nil
	})
}
