package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// secretSize is the length of the HMAC key for pairing codes.
const secretSize = 32

// LoadSecret reads the HMAC key home/secret. It must be exactly 32 bytes, be
// owned by the current user and have no permission bits for group or
// others; anything else is an error that says how to fix it. The key itself
// never appears in an error.
func LoadSecret(home string) ([]byte, error) {
	path := filepath.Join(home, SecretFile)
	data, fi, err := readFile(path, 1<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("secret %s: %w; run latch init", path, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read secret: %w", err)
	}
	if err := checkPrivate(path, fi, "secret"); err != nil {
		return nil, err
	}
	if len(data) != secretSize {
		return nil, fmt.Errorf("secret %s holds %d bytes, want %d; if it is damaged, delete it and run latch init "+
			"(codes minted with the old key stop working)", path, len(data), secretSize)
	}
	return data, nil
}
