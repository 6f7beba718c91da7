package store

// Session returns the stored conversation of key (opaque to the store), or
// nil when there is none.
func (tx *Tx) Session(key string) ([]byte, error) {
	b, err := tx.bucket(bucketSessions)
	if err != nil {
		return nil, err
	}
	v := b.Get([]byte(key))
	if v == nil {
		return nil, nil
	}
	return append([]byte(nil), v...), nil
}

// PutSession stores the conversation of key.
func (tx *Tx) PutSession(key string, data []byte) error {
	b, err := tx.bucket(bucketSessions)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), data)
}

// DeleteSession forgets the conversation of key.
func (tx *Tx) DeleteSession(key string) error {
	return tx.delete(bucketSessions, []byte(key))
}
