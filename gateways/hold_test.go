package gateways

import (
	"context"
	"testing"
	"time"

	"github.com/latchd/latch/store"
)

// stored reads the cursor and the strangers' counter as the store has them.
func (f *hubFixture) stored(t *testing.T) (cursor string, strangers uint64) {
	t.Helper()
	err := f.db.View(func(tx *store.Tx) (err error) {
		if cursor, err = tx.Cursor("telegram"); err != nil {
			return err
		}
		strangers, err = tx.Counter("telegram", CounterStrangers)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return cursor, strangers
}

// waitHolding waits until Run lets Ingest hold batches back.
func (f *hubFixture) waitHolding(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		f.hub.ingestMu.Lock()
		on := f.hub.holding
		f.hub.ingestMu.Unlock()
		if on {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not start holding")
		}
	}
}

func strangers(n int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = private(string(rune('a'+i%26))+"x", "hello")
	}
	return msgs
}

// A batch of nothing but strangers' messages is not committed while Run
// runs: its count and cursor wait in memory for the next commit, which
// takes them along. The owner's batch is committed at once, with them.
func TestStrangersBatchesAreHeldUntilTheNextCommit(t *testing.T) {
	f := newHubFixture(t, false)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.run(t)
	f.waitHolding(t)
	if r := f.gw.next(t); r.Text != MsgPaired {
		t.Fatalf("first reply = %+v, want the pairing's", r)
	}

	f.ingest(t, "2", strangers(3)...)
	f.ingest(t, "3", strangers(4)...)
	if c, n := f.stored(t); c != "1" || n != 0 {
		t.Errorf("after two strangers' batches the store has cursor %q, %d strangers; want them held (cursor 1, 0)", c, n)
	}
	if c, _ := f.hub.Cursor(context.Background(), "telegram"); c != "3" {
		t.Errorf("Cursor = %q, want the held 3: a gateway that starts again must not fetch from the stored one", c)
	}
	if n := f.hub.HeldStrangers("telegram"); n != 7 {
		t.Errorf("HeldStrangers = %d, want 7", n)
	}

	f.ingest(t, "4", append(strangers(2), private("100", "!true"))...)
	if c, n := f.stored(t); c != "4" || n != 9 {
		t.Errorf("after the owner's batch the store has cursor %q, %d strangers; want 4, 9", c, n)
	}
	if r := f.gw.next(t); r.Text != "ran true" {
		t.Errorf("reply to the owner = %+v, want the command run", r)
	}
	if n := f.hub.HeldStrangers("telegram"); n != 0 {
		t.Errorf("HeldStrangers = %d after a commit, want 0", n)
	}
}

// What is held is stored within holdFor even if nothing else comes, and
// when Run ends; after that every batch is committed again.
func TestHeldStrangersAreStoredSoonAndAtShutdown(t *testing.T) {
	f := newHubFixture(t, false)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.hub.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	f.waitHolding(t)

	f.ingest(t, "2", strangers(5)...)
	deadline := time.Now().Add(holdFor + 5*time.Second)
	for {
		if c, n := f.stored(t); c == "2" && n == 5 {
			break
		}
		if time.Now().After(deadline) {
			c, n := f.stored(t)
			t.Fatalf("held strangers not stored by Run: cursor %q, %d strangers", c, n)
		}
		time.Sleep(10 * time.Millisecond)
	}

	f.ingest(t, "3", strangers(2)...)
	cancel()
	<-done
	if c, n := f.stored(t); c != "3" || n != 7 {
		t.Errorf("after Run ended the store has cursor %q, %d strangers; want 3, 7", c, n)
	}
	f.ingest(t, "4", strangers(1)...)
	if c, n := f.stored(t); c != "4" || n != 8 {
		t.Errorf("a batch after Run ended left cursor %q, %d strangers; want it committed (4, 8)", c, n)
	}
}

// A pairing attempt is never held: a code sent in a flood is redeemed by
// the batch that brings it.
func TestPairingAttemptIsNotHeld(t *testing.T) {
	f := newHubFixture(t, false)
	f.run(t)
	f.waitHolding(t)
	code := f.mint(t)
	f.ingest(t, "1", append(strangers(3), private("100", "/pair "+code))...)
	var latched bool
	f.db.View(func(tx *store.Tx) error {
		l, err := tx.Latch("telegram")
		latched = l != nil && l.ChatID == "100"
		return err
	})
	if !latched {
		t.Fatal("the code in a batch with strangers' messages was not redeemed at once")
	}
	// The three without a code are dropped, and counted by the same commit.
	if c, n := f.stored(t); c != "1" || n != 3 {
		t.Errorf("store has cursor %q, %d strangers; want 1, 3", c, n)
	}
}

// Readers of what is held never wait for a commit: status reads it inside
// a read transaction, and a commit that grows the file waits for every
// read transaction to end, so waiting there for Ingest would deadlock.
func TestHeldIsReadWithoutWaitingForACommit(t *testing.T) {
	f := newHubFixture(t, false)
	f.hub.ingestMu.Lock() // as Ingest holds it across its commit
	defer f.hub.ingestMu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.db.View(func(tx *store.Tx) error {
			f.hub.HeldStrangers("telegram")
			return nil
		})
		f.hub.Cursor(context.Background(), "telegram")
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("HeldStrangers or Cursor waited for Ingest's lock")
	}
}
