// Package pairing owns how a gateway gets latched to one chat: minting
// one-shot codes, keeping only their keyed hashes, redeeming them inside
// the caller's store transaction, burning a code after too many failures,
// and unpairing.
package pairing

import (
	"crypto/rand"
	"errors"
	"math/big"
	"strings"
)

// Alphabet holds the symbols a code is made of: upper-case letters and
// digits without the look-alikes 0/O and 1/I/L, so a code read off a
// terminal is typed back right.
const Alphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// CodeLen is the number of symbols in a code: 31^8 ≈ 2^39.6 codes, of which
// an attacker gets MaxAttempts guesses within the code's TTL.
const CodeLen = 8

// ErrInvalidCode is the one answer to every failed redemption, whatever the
// reason: wrong, expired, used, superseded, burned or none pending.
var ErrInvalidCode = errors.New("invalid pairing code")

// NewCode returns a fresh code of CodeLen symbols from crypto/rand, without
// separators.
func NewCode() (string, error) {
	max := big.NewInt(int64(len(Alphabet)))
	b := make([]byte, CodeLen)
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", err
		}
		b[i] = Alphabet[n.Int64()]
	}
	return string(b), nil
}

// Format shows a code as XXXX-XXXX.
func Format(code string) string {
	if len(code) != CodeLen {
		return code
	}
	return code[:4] + "-" + code[4:]
}

// Normalize turns what a person typed into the canonical form: case, spaces
// and hyphens do not matter. ok is false when the result cannot be a code.
// The canonical string is returned either way, so a caller can hash it and
// spend the same time on garbage as on a real guess.
func Normalize(input string) (code string, ok bool) {
	var b strings.Builder
	ok = true
	for _, r := range input {
		switch {
		case r == '-' || r == ' ' || r == '\t' || r == '\u00a0':
			continue
		case r >= 'a' && r <= 'z':
			r -= 'a' - 'A'
		}
		if r > 127 || !strings.ContainsRune(Alphabet, r) {
			ok = false
		}
		if b.Len() < 64 {
			b.WriteRune(r)
		} else {
			ok = false
		}
	}
	code = b.String()
	if len(code) != CodeLen {
		ok = false
	}
	return code, ok
}
