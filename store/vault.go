package store

import (
	"bytes"
	"errors"
)

// bucketVault holds what a gateway keeps of its own besides its cursor
// (the Matrix gateway's end-to-end encryption state): a bucket per
// gateway under it. It is made on the first write, so a database of a
// daemon that never ran such a gateway has none.
var bucketVault = []byte("vault")

// VaultLoad returns every value stored for gateway (none: an empty map).
func (tx *Tx) VaultLoad(gateway string) (map[string][]byte, error) {
	out := map[string][]byte{}
	v := tx.tx.Bucket(bucketVault)
	if v == nil {
		return out, nil
	}
	b := v.Bucket([]byte(gateway))
	if b == nil {
		return out, nil
	}
	err := b.ForEach(func(k, val []byte) error {
		if val == nil {
			return errors.New("vault: a nested bucket where a value belongs")
		}
		out[string(k)] = bytes.Clone(val)
		return nil
	})
	return out, err
}

// VaultSave stores put and deletes del for gateway.
func (tx *Tx) VaultSave(gateway string, put map[string][]byte, del []string) error {
	if gateway == "" {
		return errors.New("vault: no gateway")
	}
	v, err := tx.tx.CreateBucketIfNotExists(bucketVault)
	if err != nil {
		return err
	}
	b, err := v.CreateBucketIfNotExists([]byte(gateway))
	if err != nil {
		return err
	}
	for _, k := range del {
		if err := b.Delete([]byte(k)); err != nil {
			return err
		}
	}
	for k, val := range put {
		if k == "" {
			return errors.New("vault: an empty key")
		}
		if err := b.Put([]byte(k), val); err != nil {
			return err
		}
	}
	return nil
}
