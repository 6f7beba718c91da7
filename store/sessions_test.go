package store

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func appendMsgs(t *testing.T, db *DB, key, meta string, msgs ...string) uint64 {
	t.Helper()
	raw := make([][]byte, len(msgs))
	for i, m := range msgs {
		raw[i] = []byte(m)
	}
	var first uint64
	err := db.Update(func(tx *Tx) (err error) {
		first, err = tx.AppendSession(key, []byte(meta), raw...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return first
}

// sessionDump is everything stored about key, for comparisons.
func sessionDump(t *testing.T, db *DB, key string) string {
	t.Helper()
	var b bytes.Buffer
	err := db.View(func(tx *Tx) error {
		legacy, err := tx.LegacySession(key)
		if err != nil {
			return err
		}
		info, found, err := tx.Session(key)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "legacy=%q found=%v meta=%q first=%d next=%d:", legacy, found, info.Meta, info.First, info.Next)
		err = tx.SessionRange(key, 0, func(seq uint64, msg []byte) bool {
			fmt.Fprintf(&b, " %d=%s", seq, msg)
			return true
		})
		if err != nil {
			return err
		}
		var results []string
		err = tx.SessionResults(key, func(r []byte) bool {
			results = append(results, string(r))
			return true
		})
		if results != nil {
			fmt.Fprintf(&b, " results=%s", strings.Join(results, ","))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestSessionAppendReadDrop(t *testing.T) {
	db := openTest(t)
	if got := appendMsgs(t, db, "telegram/1", "m1", "a", "b", "c"); got != 1 {
		t.Errorf("first append starts at %d, want 1", got)
	}
	if got := appendMsgs(t, db, "telegram/1", "m2", "d"); got != 4 {
		t.Errorf("second append starts at %d, want 4", got)
	}
	appendMsgs(t, db, "telegram/2", "other", "x")
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=true meta="m2" first=1 next=5: 1=a 2=b 3=c 4=d`; got != want {
		t.Errorf("stored\n %s\nwant\n %s", got, want)
	}
	var tail []string
	db.View(func(tx *Tx) error {
		return tx.SessionTail("telegram/1", func(seq uint64, msg []byte) bool {
			tail = append(tail, fmt.Sprintf("%d=%s", seq, msg))
			return len(tail) < 2
		})
	})
	if fmt.Sprint(tail) != "[4=d 3=c]" {
		t.Errorf("tail = %v, want the newest first, stopping when told", tail)
	}
	if err := db.Update(func(tx *Tx) error { return tx.DropSessionBefore("telegram/1", 3) }); err != nil {
		t.Fatal(err)
	}
	appendMsgs(t, db, "telegram/1", "m3") // meta only
	appendMsgs(t, db, "telegram/1", "m4", "e")
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=true meta="m4" first=3 next=6: 3=c 4=d 5=e`; got != want {
		t.Errorf("after dropping 1-2\n %s\nwant\n %s", got, want)
	}
	db.View(func(tx *Tx) error {
		info, _, _ := tx.Session("telegram/1")
		if info.Kept() != 3 {
			t.Errorf("kept = %d, want 3", info.Kept())
		}
		return nil
	})
	if err := db.Update(func(tx *Tx) error { return tx.DeleteSession("telegram/1") }); err != nil {
		t.Fatal(err)
	}
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=false meta="" first=0 next=0:`; got != want {
		t.Errorf("after delete %s", got)
	}
	if got := appendMsgs(t, db, "telegram/1", "new", "f"); got != 1 {
		t.Errorf("a conversation after a reset starts at %d, want 1", got)
	}
	if got, want := sessionDump(t, db, "telegram/2"), `legacy="" found=true meta="other" first=1 next=2: 1=x`; got != want {
		t.Errorf("the other conversation changed: %s", got)
	}
	if err := db.Update(func(tx *Tx) error { return tx.DeleteSession("nobody") }); err != nil {
		t.Errorf("deleting a conversation that does not exist: %v", err)
	}
}

// TestSessionLegacyLayout: a conversation written by schema 1 (one value)
// reads as legacy until it is replaced; appending to it is refused rather
// than losing it.
func TestSessionLegacyLayout(t *testing.T) {
	db := openTest(t)
	putLegacy(t, db, "telegram/1", `{"messages":[]}`)
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="{\"messages\":[]}" found=false meta="" first=0 next=0:`; got != want {
		t.Errorf("legacy read\n %s\nwant\n %s", got, want)
	}
	err := db.Update(func(tx *Tx) error {
		_, err := tx.AppendSession("telegram/1", []byte("m"), []byte("a"))
		return err
	})
	if err == nil {
		t.Fatal("appending to a schema 1 conversation succeeded")
	}
	err = db.Update(func(tx *Tx) error {
		_, err := tx.ReplaceSession("telegram/1", []byte("m"), []byte("a"), []byte("b"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=true meta="m" first=1 next=3: 1=a 2=b`; got != want {
		t.Errorf("converted\n %s\nwant\n %s", got, want)
	}
	putLegacy(t, db, "telegram/2", `{}`)
	if err := db.Update(func(tx *Tx) error { return tx.DeleteSession("telegram/2") }); err != nil {
		t.Fatal(err)
	}
	if got := sessionDump(t, db, "telegram/2"); got != `legacy="" found=false meta="" first=0 next=0:` {
		t.Errorf("legacy conversation not deleted: %s", got)
	}
}

func putLegacy(t *testing.T, db *DB, key, value string) {
	t.Helper()
	err := db.bolt.Update(func(tx *boltTx) error {
		return tx.Bucket(bucketSessions).Put([]byte(key), []byte(value))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSessionTxErrorWritesNothing: a step's writes are one transaction; an
// error anywhere in it leaves the conversation exactly as it was, in
// either layout.
func TestSessionTxErrorWritesNothing(t *testing.T) {
	db := openTest(t)
	appendMsgs(t, db, "telegram/1", "m1", "a", "b", "c")
	appendResults(t, db, "telegram/1", "r1")
	putLegacy(t, db, "telegram/2", `{"messages":[1]}`)
	before1, before2 := sessionDump(t, db, "telegram/1"), sessionDump(t, db, "telegram/2")
	boom := errors.New("boom")
	steps := map[string]func(tx *Tx) error{
		"append and drop": func(tx *Tx) error {
			if _, err := tx.AppendSession("telegram/1", []byte("m2"), []byte("d"), []byte("e")); err != nil {
				return err
			}
			return tx.DropSessionBefore("telegram/1", 3)
		},
		"results": func(tx *Tx) error {
			if err := tx.AppendSessionResults("telegram/1", []byte("r2")); err != nil {
				return err
			}
			return tx.ClearSessionResults("telegram/1")
		},
		"replace": func(tx *Tx) error {
			_, err := tx.ReplaceSession("telegram/1", []byte("r"), []byte("z"))
			return err
		},
		"convert": func(tx *Tx) error {
			_, err := tx.ReplaceSession("telegram/2", []byte("r"), []byte("z"))
			return err
		},
		"delete": func(tx *Tx) error {
			if err := tx.DeleteSession("telegram/1"); err != nil {
				return err
			}
			return tx.DeleteSession("telegram/2")
		},
	}
	for name, step := range steps {
		err := db.Update(func(tx *Tx) error {
			if err := step(tx); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("%s: err = %v", name, err)
		}
		if got := sessionDump(t, db, "telegram/1"); got != before1 {
			t.Errorf("%s, rolled back: %s\nwant %s", name, got, before1)
		}
		if got := sessionDump(t, db, "telegram/2"); got != before2 {
			t.Errorf("%s, rolled back: %s\nwant %s", name, got, before2)
		}
	}
}

// TestSessionAppendCostIsFlat: appending a message writes about the same
// number of pages whatever the length of the conversation — the old
// layout rewrote the whole history on every step.
func TestSessionAppendCostIsFlat(t *testing.T) {
	db := openTest(t)
	msg := bytes.Repeat([]byte("m"), 300)
	fill := func(n int) {
		batch := make([][]byte, n)
		for i := range batch {
			batch[i] = msg
		}
		if err := db.Update(func(tx *Tx) error { _, err := tx.AppendSession("k", []byte("meta"), batch...); return err }); err != nil {
			t.Fatal(err)
		}
	}
	written := func() int64 { st := db.bolt.Stats(); return st.TxStats.GetPageAlloc() }
	step := func() int64 {
		before := written()
		if err := db.Update(func(tx *Tx) error { _, err := tx.AppendSession("k", []byte("meta"), msg, msg); return err }); err != nil {
			t.Fatal(err)
		}
		return written() - before
	}
	fill(200)
	short := step()
	fill(5000)
	long := step()
	page := int64(db.bolt.Info().PageSize)
	t.Logf("bytes written per step: %d at 200 messages, %d at 5200 (page %d)", short, long, page)
	if long > short+page {
		t.Errorf("a step wrote %d bytes at 5,200 messages but %d at 200: writes grow with the conversation", long, short)
	}
}

func TestOpenMarksSchema1FileCurrent(t *testing.T) {
	db := openTest(t)
	path := db.Path()
	if err := db.bolt.Update(func(tx *boltTx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, u64(1))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("a schema 1 file must open: %v", err)
	}
	defer db.Close()
	db.View(func(tx *Tx) error {
		if v := fromU64(tx.tx.Bucket(bucketMeta).Get(keySchema)); v != SchemaVersion {
			t.Errorf("schema = %d after open, want %d", v, SchemaVersion)
		}
		return nil
	})
}

func appendResults(t *testing.T, db *DB, key string, results ...string) {
	t.Helper()
	raw := make([][]byte, len(results))
	for i, r := range results {
		raw[i] = []byte(r)
	}
	if err := db.Update(func(tx *Tx) error { return tx.AppendSessionResults(key, raw...) }); err != nil {
		t.Fatal(err)
	}
}

// TestSessionResults: a step's results read back in the order appended,
// and go with the step (ClearSessionResults), a replaced conversation or a
// deleted one — none is left behind for a later step to read as its own.
func TestSessionResults(t *testing.T) {
	db := openTest(t)
	appendMsgs(t, db, "telegram/1", "m1", "a")
	appendResults(t, db, "telegram/1", "r1")
	appendResults(t, db, "telegram/1", "r2", "r3")
	appendMsgs(t, db, "telegram/2", "other", "x")
	appendResults(t, db, "telegram/2", "o1")
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=true meta="m1" first=1 next=2: 1=a results=r1,r2,r3`; got != want {
		t.Errorf("stored\n %s\nwant\n %s", got, want)
	}
	var first []string
	db.View(func(tx *Tx) error {
		return tx.SessionResults("telegram/1", func(r []byte) bool { first = append(first, string(r)); return false })
	})
	if fmt.Sprint(first) != "[r1]" {
		t.Errorf("read %v, want to stop after r1 when told", first)
	}

	appendMsgs(t, db, "telegram/1", "m2", "b") // the step goes on: results stay
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=true meta="m2" first=1 next=3: 1=a 2=b results=r1,r2,r3`; got != want {
		t.Errorf("after an append\n %s\nwant\n %s", got, want)
	}
	update := func(what string, fn func(tx *Tx) error) {
		t.Helper()
		if err := db.Update(fn); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	update("clear", func(tx *Tx) error { return tx.ClearSessionResults("telegram/1") })
	update("clear again", func(tx *Tx) error { return tx.ClearSessionResults("telegram/1") })
	update("clear nobody's", func(tx *Tx) error { return tx.ClearSessionResults("nobody") })
	appendResults(t, db, "telegram/1", "n1")
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=true meta="m2" first=1 next=3: 1=a 2=b results=n1`; got != want {
		t.Errorf("a new step after clearing\n %s\nwant\n %s", got, want)
	}

	update("replace", func(tx *Tx) error { _, err := tx.ReplaceSession("telegram/1", []byte("r"), []byte("z")); return err })
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=true meta="r" first=1 next=2: 1=z`; got != want {
		t.Errorf("replaced\n %s\nwant\n %s", got, want)
	}
	appendResults(t, db, "telegram/1", "n2")
	update("delete", func(tx *Tx) error { return tx.DeleteSession("telegram/1") })
	appendMsgs(t, db, "telegram/1", "fresh", "y")
	if got, want := sessionDump(t, db, "telegram/1"), `legacy="" found=true meta="fresh" first=1 next=2: 1=y`; got != want {
		t.Errorf("deleted and begun again\n %s\nwant\n %s", got, want)
	}
	if got, want := sessionDump(t, db, "telegram/2"), `legacy="" found=true meta="other" first=1 next=2: 1=x results=o1`; got != want {
		t.Errorf("the other conversation\n %s\nwant\n %s", got, want)
	}

	putLegacy(t, db, "telegram/3", `{}`)
	for _, key := range []string{"telegram/3", "nobody"} {
		if err := db.Update(func(tx *Tx) error { return tx.AppendSessionResults(key, []byte("r")) }); err == nil {
			t.Errorf("results appended to %s, which is not stored in the current layout", key)
		}
	}
}

// TestSessionResultCostIsFlat: appending a step's tenth large result
// writes about what appending its first did — the result itself, not the
// results before it.
func TestSessionResultCostIsFlat(t *testing.T) {
	db := openTest(t)
	appendMsgs(t, db, "k", "meta", "a")
	result := bytes.Repeat([]byte("r"), 30<<10)
	written := func() int64 { st := db.bolt.Stats(); return st.TxStats.GetPageAlloc() }
	var costs []int64
	for range 10 {
		before := written()
		if err := db.Update(func(tx *Tx) error { return tx.AppendSessionResults("k", result) }); err != nil {
			t.Fatal(err)
		}
		costs = append(costs, written()-before)
	}
	page := int64(db.bolt.Info().PageSize)
	t.Logf("bytes written per 30 KiB result: %v (page %d)", costs, page)
	if first, last := costs[0], costs[len(costs)-1]; last > first+page {
		t.Errorf("the tenth result wrote %d bytes, the first %d: each append writes earlier results again", last, first)
	}
}
