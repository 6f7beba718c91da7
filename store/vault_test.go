package store

import (
	"path/filepath"
	"testing"
)

// TestVault: a gateway's values come back as saved, deleted ones do not,
// and another gateway's space is apart; a database without the bucket
// reads as empty.
func TestVault(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "latch.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	load := func(gw string) (m map[string][]byte) {
		t.Helper()
		if err := db.View(func(tx *Tx) (err error) { m, err = tx.VaultLoad(gw); return err }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := load("matrix"); len(m) != 0 {
		t.Fatalf("a new database's vault = %v", m)
	}
	err = db.Update(func(tx *Tx) error {
		if err := tx.VaultSave("matrix", map[string][]byte{"account": []byte("a"), "olm/x": []byte("b")}, nil); err != nil {
			return err
		}
		return tx.VaultSave("other", map[string][]byte{"account": []byte("c")}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error { return tx.VaultSave("matrix", nil, []string{"olm/x"}) }); err != nil {
		t.Fatal(err)
	}
	if m := load("matrix"); len(m) != 1 || string(m["account"]) != "a" {
		t.Errorf("matrix's vault = %q, want only account=a", m)
	}
	if m := load("other"); string(m["account"]) != "c" {
		t.Errorf("other's vault = %q", m)
	}
}
