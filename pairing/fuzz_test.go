package pairing

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/store"
)

// FuzzNormalize: whatever a chat sends, normalising never panics, an
// accepted code is exactly CodeLen symbols of the alphabet, and
// normalisation is idempotent.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"ABCD-2345", "abcd 2345", "", "-", "ÄBCD-2345", "\x00", strings.Repeat("A", 100), "ab\u00a0cd-23 45"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		code, ok := Normalize(in)
		if !ok {
			return
		}
		if len(code) != CodeLen || strings.Trim(code, Alphabet) != "" {
			t.Fatalf("Normalize(%q) accepted %q", in, code)
		}
		if again, ok2 := Normalize(code); !ok2 || again != code {
			t.Fatalf("not idempotent: %q → %q → %q", in, code, again)
		}
	})
}

// FuzzRedeem: no input redeems a code except the code itself.
func FuzzRedeem(f *testing.F) {
	f.Add("ABCD-2345")
	f.Add("/pair")
	f.Add("")
	db, err := store.Open(f.TempDir()+"/latch.db", store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	p, _ := New(bytes.Repeat([]byte{3}, KeyLen))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p.Now = func() time.Time { return now }
	f.Fuzz(func(t *testing.T, in string) {
		var code string
		err := db.Update(func(tx *store.Tx) (err error) {
			tx.DeleteLatch("telegram")
			code, _, err = p.Mint(tx, "telegram", 0)
			if err != nil {
				return err
			}
			_, err = p.Redeem(tx, "telegram", in, Chat{ID: "1"})
			if IsInvalid(err) {
				return nil
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var l *store.Latch
		db.View(func(tx *store.Tx) (err error) { l, err = tx.Latch("telegram"); return err })
		if n, _ := Normalize(in); l != nil && n != code {
			t.Fatalf("input %q latched against code %q", in, code)
		}
	})
}
