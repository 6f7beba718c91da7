package pairing

import (
	"errors"
	"testing"
	"time"

	"github.com/latchd/latch/store"
)

// The failure paths an attacker can reach with a live pending code — a
// wrong code, and the right code after it expired — must not be told apart,
// by the reply (TestFailuresAreUniform, daemon's TestE2EFailuresAreUniform)
// or by the time Redeem takes. Timing is not asserted here (the CI machines
// are shared and noisy); instead the test holds the cause of a timing
// difference: both paths must do the same work — one HMAC, one constant-time
// compare, and the same store writes (the attempt counted, one audit event).
// BenchmarkRedeemFailure measures the times; SECURITY.md gives the figures.
//
// Shown to fail by returning early on expiry (before the hash) and skipping
// the attempt count for an expired code: the writes differ.
func TestWrongAndExpiredDoTheSameWork(t *testing.T) {
	type outcome struct {
		attempts int
		burned   bool
		kinds    []string
	}
	run := func(expired bool) outcome {
		f := newFixture(t)
		code := f.mint(t, "telegram")
		input := "ABCD-2345"
		if expired {
			f.now = f.now.Add(DefaultTTL + time.Second)
			input = code
		}
		if err := f.redeem(t, "telegram", input, "100"); err != ErrInvalidCode {
			t.Fatalf("expired=%v: err = %v", expired, err)
		}
		var o outcome
		err := f.db.View(func(tx *store.Tx) error {
			p, err := tx.Pending("telegram")
			if err != nil || p == nil {
				t.Fatalf("pending after a failure: %+v, %v", p, err)
			}
			o.attempts, o.burned = p.Attempts, p.Burned
			evs, err := tx.AuditEvents(100)
			for _, ev := range evs {
				o.kinds = append(o.kinds, ev.Kind)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	wrong, expired := run(false), run(true)
	if wrong.attempts != 1 || wrong.burned {
		t.Errorf("wrong code: attempts=%d burned=%v, want 1 attempt", wrong.attempts, wrong.burned)
	}
	if expired.attempts != wrong.attempts || expired.burned != wrong.burned {
		t.Errorf("expired code: attempts=%d burned=%v; wrong code: attempts=%d burned=%v",
			expired.attempts, expired.burned, wrong.attempts, wrong.burned)
	}
	if len(expired.kinds) != len(wrong.kinds) {
		t.Fatalf("audit events: expired %v, wrong %v", expired.kinds, wrong.kinds)
	}
	for i := range wrong.kinds {
		if wrong.kinds[i] != expired.kinds[i] {
			t.Errorf("audit events: expired %v, wrong %v", expired.kinds, wrong.kinds)
		}
	}
}

// BenchmarkRedeemFailure times Redeem's failure paths inside a transaction
// that is rolled back, so every iteration starts from the same state: a live
// code (wrong input), an expired code (right input), and a malformed input.
//
//	go test -run '^$' -bench RedeemFailure -count 10 ./pairing | benchstat -
func BenchmarkRedeemFailure(b *testing.B) {
	cases := []struct {
		name    string
		expired bool
		input   func(code string) string
	}{
		{"wrong", false, func(string) string { return "ABCD-2345" }},
		{"expired", true, func(code string) string { return code }},
		{"malformed", false, func(string) string { return "hello" }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b)
			code := f.mint(b, "telegram")
			if c.expired {
				f.now = f.now.Add(DefaultTTL + time.Second)
			}
			input := c.input(code)
			b.ResetTimer()
			for b.Loop() {
				f.db.Update(func(tx *store.Tx) error {
					if _, err := f.p.Redeem(tx, "telegram", input, Chat{ID: "100", UserID: "100"}); err != ErrInvalidCode {
						b.Fatalf("err = %v", err)
					}
					return errRollback
				})
			}
		})
	}
}

// errRollback makes the benchmark's transactions roll back.
var errRollback = errors.New("roll back")
