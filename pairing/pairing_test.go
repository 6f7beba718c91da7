package pairing

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/store"
)

type fixture struct {
	db  *store.DB
	p   *Pairer
	now time.Time
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "latch.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := New(bytes.Repeat([]byte{7}, KeyLen))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, p: p, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	p.Now = func() time.Time { return f.now }
	return f
}

func (f *fixture) mint(t testing.TB, gw string) string {
	t.Helper()
	var code string
	err := f.db.Update(func(tx *store.Tx) error {
		var err error
		code, _, err = f.p.Mint(tx, gw, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func (f *fixture) mintWith(t testing.TB, gw string, opt MintOptions) string {
	t.Helper()
	var m Minted
	err := f.db.Update(func(tx *store.Tx) (err error) {
		m, err = f.p.MintWith(tx, gw, 0, opt)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m.Code
}

// redeem runs Redeem the way the Hub does: the transaction commits on
// ErrInvalidCode so attempts are counted.
func (f *fixture) redeem(t *testing.T, gw, input, chatID string) error {
	t.Helper()
	var result error
	err := f.db.Update(func(tx *store.Tx) error {
		_, err := f.p.Redeem(tx, gw, input, Chat{ID: chatID, Type: "private", UserID: chatID})
		if IsInvalid(err) {
			result = err
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return result
}

func (f *fixture) latched(t *testing.T, gw string) *store.Latch {
	t.Helper()
	var l *store.Latch
	f.db.View(func(tx *store.Tx) (err error) { l, err = tx.Latch(gw); return err })
	return l
}

func (f *fixture) pending(t *testing.T, gw string) *store.Pending {
	t.Helper()
	var p *store.Pending
	if err := f.db.View(func(tx *store.Tx) (err error) { p, err = tx.Pending(gw); return err }); err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) unpair(t *testing.T, gw string) *store.Latch {
	t.Helper()
	var old *store.Latch
	if err := f.db.Update(func(tx *store.Tx) (err error) { old, err = f.p.Unpair(tx, gw); return err }); err != nil {
		t.Fatal(err)
	}
	return old
}

func TestCodeShape(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 2000; i++ {
		c, err := NewCode()
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := Normalize(c); !ok || n != c || len(c) != CodeLen {
			t.Fatalf("code %q does not normalize to itself", c)
		}
		if strings.ContainsAny(c, "0O1IL") {
			t.Fatalf("code %q has a look-alike symbol", c)
		}
		seen[c] = true
	}
	if len(seen) < 1999 {
		t.Errorf("only %d distinct codes in 2000", len(seen))
	}
	if got := Format("ABCD2345"); got != "ABCD-2345" {
		t.Errorf("Format = %q", got)
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"ABCD-2345", "ABCD2345", true},
		{"abcd 2345", "ABCD2345", true},
		{" ab-cd-23 45 ", "ABCD2345", true},
		{"ABCD-234", "ABCD234", false},
		{"ABCD-23456", "ABCD23456", false},
		{"ABCD-0345", "ABCD0345", false},
		{"ÄBCD-2345", "ÄBCD2345", false},
		{strings.Repeat("A", 1000), strings.Repeat("A", 64), false},
	}
	for _, tt := range tests {
		got, ok := Normalize(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Normalize(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRedeemLatchesOnce(t *testing.T) {
	f := newFixture(t)
	code := f.mint(t, "telegram")
	if err := f.redeem(t, "telegram", strings.ToLower(Format(code)), "100"); err != nil {
		t.Fatalf("redeem = %v", err)
	}
	if l := f.latched(t, "telegram"); l == nil || l.ChatID != "100" {
		t.Fatalf("latch = %+v", l)
	}
	// One-shot: the same code from another chat fails, latch unchanged.
	if err := f.redeem(t, "telegram", code, "200"); !errors.Is(err, ErrInvalidCode) {
		t.Errorf("reuse = %v, want ErrInvalidCode", err)
	}
	if l := f.latched(t, "telegram"); l.ChatID != "100" {
		t.Errorf("latch moved to %s", l.ChatID)
	}
}

func TestFailuresAreUniform(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fixture) string // returns the input to try
	}{
		{"none pending", func(t *testing.T, f *fixture) string { return "ABCD-2345" }},
		{"wrong", func(t *testing.T, f *fixture) string { f.mint(t, "telegram"); return "ABCD-2345" }},
		{"garbage", func(t *testing.T, f *fixture) string { f.mint(t, "telegram"); return "hello" }},
		{"expired", func(t *testing.T, f *fixture) string {
			c := f.mint(t, "telegram")
			f.now = f.now.Add(DefaultTTL + time.Second)
			return c
		}},
		{"superseded", func(t *testing.T, f *fixture) string {
			c := f.mint(t, "telegram")
			f.mint(t, "telegram")
			return c
		}},
		{"other gateway", func(t *testing.T, f *fixture) string { return f.mint(t, "discord") }},
		{"burned", func(t *testing.T, f *fixture) string {
			c := f.mint(t, "telegram")
			for i := 0; i < MaxAttempts; i++ {
				f.redeem(t, "telegram", "ABCD-2345", "666")
			}
			return c
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			input := tt.setup(t, f)
			err := f.redeem(t, "telegram", input, "100")
			if err != ErrInvalidCode {
				t.Fatalf("err = %v, want exactly ErrInvalidCode", err)
			}
			if l := f.latched(t, "telegram"); l != nil {
				t.Fatalf("latched to %+v", l)
			}
		})
	}
}

func TestBurnAfterMaxAttempts(t *testing.T) {
	f := newFixture(t)
	code := f.mint(t, "telegram")
	for i := 0; i < MaxAttempts-1; i++ {
		f.redeem(t, "telegram", "ABCD-2345", "666")
	}
	var p *store.Pending
	f.db.View(func(tx *store.Tx) (err error) { p, err = tx.Pending("telegram"); return err })
	if p.Burned || p.Attempts != MaxAttempts-1 {
		t.Fatalf("after %d failures: %+v", MaxAttempts-1, p)
	}
	f.redeem(t, "telegram", "ABCD-2345", "777")
	f.db.View(func(tx *store.Tx) (err error) { p, err = tx.Pending("telegram"); return err })
	if !p.Burned {
		t.Fatalf("not burned after %d failures", MaxAttempts)
	}
	if err := f.redeem(t, "telegram", code, "100"); err != ErrInvalidCode {
		t.Fatalf("burned code redeemed: %v", err)
	}
}

func TestOnlyHashAtRest(t *testing.T) {
	f := newFixture(t)
	code := f.mint(t, "telegram")
	path := f.db.Path()
	f.db.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(code)) || bytes.Contains(raw, []byte(Format(code))) {
		t.Fatal("the plain code is in the database file")
	}
}

// TestHashIsKeyed: the digest at rest is an HMAC under the key in
// $LATCH_HOME/secret, which is kept apart from the database. An unkeyed
// hash would pass TestOnlyHashAtRest, yet anyone with a copy of latch.db
// could try all 31^8 codes offline in minutes on one GPU, well within a
// code's lifetime, and redeem it. Shown to fail with sha256.New() in place
// of the HMAC, and with an HMAC under a fixed key instead of the pairer's.
func TestHashIsKeyed(t *testing.T) {
	f := newFixture(t)
	const gw = "telegram"
	code := f.mint(t, gw)
	stored := f.pending(t, gw).Hash
	if len(stored) != sha256.Size {
		t.Fatalf("stored digest is %d bytes, want %d (HMAC-SHA256)", len(stored), sha256.Size)
	}
	unkeyed := map[string]string{
		"sha256(code)":                               code,
		"sha256(formatted code)":                     Format(code),
		"sha256(gateway||code)":                      gw + code,
		"sha256(gateway||0||code)":                   gw + "\x00" + code,
		"sha256(code||gateway)":                      code + gw,
		"sha256(latch-pair-v1||0||gateway||0||code)": "latch-pair-v1\x00" + gw + "\x00" + code,
	}
	for name, in := range unkeyed {
		if sum := sha256.Sum256([]byte(in)); bytes.Equal(stored, sum[:]) {
			t.Errorf("stored digest = %s: no key is needed to test a guess", name)
		}
	}

	// A pairer under another key hashes the same code differently and
	// cannot redeem the stored one: the digest depends on the key.
	other, err := New(bytes.Repeat([]byte{9}, KeyLen))
	if err != nil {
		t.Fatal(err)
	}
	other.Now = f.p.Now
	if bytes.Equal(f.p.hash(gw, code), other.hash(gw, code)) {
		t.Error("two keys give the same digest for the same code")
	}
	var otherErr error
	err = f.db.Update(func(tx *store.Tx) error {
		_, otherErr = other.Redeem(tx, gw, code, Chat{ID: "666", Type: "private", UserID: "666"})
		if IsInvalid(otherErr) {
			return nil
		}
		return otherErr
	})
	if err != nil {
		t.Fatal(err)
	}
	if otherErr != ErrInvalidCode {
		t.Fatalf("a pairer under another key redeemed the code: err = %v", otherErr)
	}
	// The code itself is still good under the key it was minted with.
	if err := f.redeem(t, gw, code, "100"); err != nil {
		t.Fatalf("redeem under the minting key = %v", err)
	}
}

func TestMintTTLBounds(t *testing.T) {
	f := newFixture(t)
	for _, ttl := range []time.Duration{time.Second, 2 * time.Hour} {
		err := f.db.Update(func(tx *store.Tx) error {
			_, _, err := f.p.Mint(tx, "telegram", ttl)
			return err
		})
		if !errors.Is(err, ErrBadTTL) {
			t.Errorf("ttl %v: err = %v, want ErrBadTTL", ttl, err)
		}
	}
}

func TestUnpair(t *testing.T) {
	f := newFixture(t)
	f.redeem(t, "telegram", f.mint(t, "telegram"), "100")
	old := f.unpair(t, "telegram")
	if old == nil || old.ChatID != "100" {
		t.Fatalf("unpair returned %+v", old)
	}
	if l := f.latched(t, "telegram"); l != nil {
		t.Fatalf("still latched: %+v", l)
	}
}

// TestUnpairCancelsThePendingCode: every mint is announced in the latched
// chat with "if that was not you, run `latch unpair`". Following that
// advice must not leave the announced code alive, or it hands the gateway
// to whoever minted it. Shown to fail with Unpair keeping the pending code.
func TestUnpairCancelsThePendingCode(t *testing.T) {
	f := newFixture(t)
	if err := f.redeem(t, "telegram", f.mint(t, "telegram"), "100"); err != nil {
		t.Fatalf("owner's redeem = %v", err)
	}
	rogue := f.mintWith(t, "telegram", MintOptions{Replace: true})
	if old := f.unpair(t, "telegram"); old == nil || old.ChatID != "100" {
		t.Fatalf("unpair returned %+v, want the owner's latch", old)
	}
	if p := f.pending(t, "telegram"); p != nil {
		t.Errorf("pending code left after unpair: %+v", p)
	}
	if err := f.redeem(t, "telegram", rogue, "666"); err != ErrInvalidCode {
		t.Fatalf("code minted before the unpair redeemed after it: err = %v", err)
	}
	if l := f.latched(t, "telegram"); l != nil {
		t.Fatalf("the minter latched the gateway: %+v", l)
	}
	var events []store.Event
	f.db.View(func(tx *store.Tx) (err error) { events, err = tx.AuditEvents(1); return err })
	if len(events) != 1 || events[0].Kind != EventUnpaired || events[0].Detail != "pending code cancelled" {
		t.Errorf("last audit event = %+v, want %q saying the code was cancelled", events, EventUnpaired)
	}
}

// TestUnpairWithoutLatchChangesNothing: the caller reports "was not paired"
// when Unpair returns no latch, so it must not have changed anything either.
func TestUnpairWithoutLatchChangesNothing(t *testing.T) {
	f := newFixture(t)
	code := f.mint(t, "telegram")
	if old := f.unpair(t, "telegram"); old != nil {
		t.Fatalf("unpair of an unpaired gateway returned %+v", old)
	}
	if p := f.pending(t, "telegram"); p == nil {
		t.Fatal("unpair of an unpaired gateway removed its pending code")
	}
	if err := f.redeem(t, "telegram", code, "100"); err != nil {
		t.Fatalf("redeem after a no-op unpair = %v", err)
	}
}

// TestRandomGuessesNeverPair: 10,000 random well-formed codes never latch;
// the fifth failure burns the code and the count stays there.
func TestRandomGuessesNeverPair(t *testing.T) {
	f := newFixture(t)
	code := f.mint(t, "telegram")
	for i := 0; i < 10_000; i++ {
		guess, _ := NewCode()
		if guess == code {
			continue
		}
		if err := f.redeem(t, "telegram", guess, "666"); err != ErrInvalidCode {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if l := f.latched(t, "telegram"); l != nil {
		t.Fatalf("a guess latched: %+v", l)
	}
	var p *store.Pending
	f.db.View(func(tx *store.Tx) (err error) { p, err = tx.Pending("telegram"); return err })
	if !p.Burned || p.Attempts != MaxAttempts {
		t.Errorf("after 10,000 guesses: %+v; want burned at %d attempts", p, MaxAttempts)
	}
	if err := f.redeem(t, "telegram", code, "100"); err != ErrInvalidCode {
		t.Errorf("the burned code still works: %v", err)
	}
}
