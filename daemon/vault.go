package daemon

import (
	"context"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/store"
)

// vault is the gateways' Vault: a bucket of latch.db per gateway, so that
// what a gateway keeps of its own (Matrix's encryption keys) has the
// store's guarantees — one file, 0600, written durably when Save returns.
type vault struct{ db *store.DB }

var _ gateways.Vault = vault{}

func (v vault) Load(_ context.Context, gateway string) (out map[string][]byte, err error) {
	err = v.db.View(func(tx *store.Tx) error {
		out, err = tx.VaultLoad(gateway)
		return err
	})
	return out, err
}

func (v vault) Save(_ context.Context, gateway string, put map[string][]byte, del []string) error {
	return v.db.Update(func(tx *store.Tx) error { return tx.VaultSave(gateway, put, del) })
}
