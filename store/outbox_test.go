package store

import (
	"fmt"
	"slices"
	"testing"
)

// TestAnsweredEntriesWaitInTheOutbox: an answered entry leaves the inbox
// for the outbox with its answer; a restart's ReturnAnswers puts it back in
// its place in the inbox, marked Again; DeleteInbox ends it in either.
func TestAnsweredEntriesWaitInTheOutbox(t *testing.T) {
	db := openTest(t)
	var seqs []uint64
	inbox := func() (got []string) {
		db.View(func(tx *Tx) error {
			return tx.ScanInbox(0, func(e Entry) bool {
				s := fmt.Sprintf("%s:%s", e.Text, e.State)
				if e.Answer != nil {
					s += fmt.Sprintf(":%q again=%v", e.Answer.Text, e.Again)
				}
				got = append(got, s)
				return true
			})
		})
		return got
	}
	err := db.Update(func(tx *Tx) error {
		for _, text := range []string{"!a", "!b", "!c"} {
			seq, err := tx.AppendInbox(Entry{Kind: KindMessage, Text: text})
			if err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		if err := tx.AnswerInbox(seqs[0], Answer{Text: "out a", Pre: true}); err != nil {
			return err
		}
		return tx.AnswerInbox(seqs[1], Answer{Text: "out b"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := inbox(), []string{"!c:received"}; !slices.Equal(got, want) {
		t.Errorf("inbox after answering %q, want %q", got, want)
	}
	if err := db.View(func(tx *Tx) error {
		if n, err := tx.OutboxLen(); n != 2 || err != nil {
			t.Errorf("OutboxLen = %d, %v; want the 2 answers", n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		if err := tx.DeleteInbox(seqs[1]); err != nil { // delivered
			return err
		}
		if n, err := tx.OutboxLen(); n != 1 || err != nil {
			t.Errorf("OutboxLen after a delivery = %d, %v; want 1", n, err)
		}
		n, err := tx.ReturnAnswers()
		if n != 1 {
			t.Errorf("ReturnAnswers returned %d, want 1", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`!a:answered:"out a" again=true`, "!c:received"}
	if got := inbox(); !slices.Equal(got, want) {
		t.Errorf("inbox after a restart %q, want %q", got, want)
	}
	err = db.Update(func(tx *Tx) error {
		if n, err := tx.ReturnAnswers(); n != 0 || err != nil {
			t.Errorf("a second ReturnAnswers: %d, %v; want nothing left in the outbox", n, err)
		}
		return tx.DeleteInbox(seqs[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := inbox(); !slices.Equal(got, []string{"!c:received"}) {
		t.Errorf("inbox after delivery %q", got)
	}
}
