package daemon

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/slack/slacktest"
)

// TestE2ESlackStrangerFlood: 10,000 events (and the few hundred more
// that make the collections its heap is read at) that are not the owner's —
// strangers' DMs (pairing guesses, commands, text), the owner's user id
// from another workspace in the owner's own DM, a stranger mentioning the
// bot in a channel (groups are off), another bot posting in the owner's
// DM — get no reply and no Web API call at all, are each acknowledged,
// and leave the daemon's memory and store bounded: no bucket of the store
// grows by more than the owner's own few records, the file by less than
// a record per event would take.
func TestE2ESlackStrangerFlood(t *testing.T) {
	const n = 10_000
	e := newEnv(t)
	fake := slackChild(e)
	child := e.startChild()
	dm := pairSlack(e, fake)
	stopChild(t, child)
	dbPath := config.DBPath(e.home)
	keysBefore := storeKeys(t, dbPath)
	sizeBefore := fileSize(t, dbPath)

	child = e.startChild()
	// The owner's message after the restart: the catch-up has run and the
	// socket is up before the flood's calls are counted.
	fake.SendDM(sAlice, "!echo before-flood")
	waitSlack(t, fake, dm, "before-flood")
	waitFor(t, func() bool { return fake.Unacked() == 0 })
	calls := fake.Count("")
	flood := func(from, to int) {
		for i := from; i < to; i++ {
			u := slacktest.User{ID: fmt.Sprintf("U1S%04d", i%1000)}
			switch i % 5 {
			case 0, 1:
				fake.SendDM(u, []string{"/pair ABCD-2345", "!cat ~/.ssh/id_rsa"}[i%2])
			case 2:
				fake.SendDM(sFar, "!echo far")
			case 3:
				fake.Post(u, "C0GENERAL", "<@"+slacktest.BotUserID+"> !echo mention", true)
			case 4:
				fake.Event(map[string]any{"type": "message", "channel": dm, "user": "U0OTHERBOT", "bot_id": "B0OTHER",
					"text": "!echo bot", "ts": fmt.Sprintf("1700000001.%06d", i), "channel_type": "im"})
			}
		}
		// Generous: the race detector on a shared 2-core machine.
		deadline := time.Now().Add(5 * time.Minute)
		for fake.Unacked() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d envelopes not acknowledged", fake.Unacked())
			}
			select {
			case <-fake.Changed():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// The first tenth warms up (every stranger seen once, buffers grown);
	// the other nine tenths must not grow the anonymous memory by more
	// than a record per event would.
	// RssAnon moves with the collector's pacing (under the race detector
	// by up to some 4 MB either way), so the live heap is the finer
	// measure: a record of 100 bytes per event would add 0.9 MB to it.
	// One collection's figure still holds whatever was in flight when it
	// ran (an envelope being decoded, a socket's buffers: 0.8 MB once, in
	// CI), so each side reads the least of three collections, made by
	// more of the flood.
	sent := 0 // events flooded so far
	floodTo := func(to int) { flood(sent, to); sent = to }
	settled := func() uint64 {
		least, last, got := uint64(0), memory(e).GCs, 0
		for step := 0; got < 3; step++ {
			if step == 200 {
				t.Fatalf("the daemon collected %d times over %d more events", got, step*100)
			}
			floodTo(sent + 100)
			m := memory(e)
			if m.GCs == last {
				continue
			}
			last, got = m.GCs, got+1
			if least == 0 || m.HeapLive < least {
				least = m.HeapLive
			}
		}
		return least
	}
	floodTo(n / 10)
	warm, warmHeap := rssAnon(t, child.Process.Pid), settled()
	warmSent := sent
	floodTo(n)
	end, endHeap := rssAnon(t, child.Process.Pid), settled()
	t.Logf("daemon RssAnon: %d KiB after %d events, %d KiB after %d; live heap %d KiB after %d, %d KiB after %d (least of 3 collections)",
		warm>>10, n/10, end>>10, n, warmHeap>>10, warmSent, endHeap>>10, sent)
	if grown := end - warm; grown > 8<<20 {
		t.Errorf("the daemon's anonymous memory grew by %d KiB over %d stranger events", grown>>10, n-n/10)
	}
	if grown := int64(endHeap) - int64(warmHeap); grown > 640<<10 {
		t.Errorf("the daemon's live heap grew by %d KiB over %d stranger events", grown>>10, sent-warmSent)
	}
	if got := fake.Count(""); got != calls {
		t.Errorf("the flood made %d Web API calls, want none", got-calls)
	}
	fake.SendDM(sAlice, "!echo still mine")
	waitSlack(t, fake, dm, "still mine")
	for _, ch := range []string{"C0GENERAL", slacktest.DM(slacktest.User{ID: "U1S0000"})} {
		if got := fake.Sent(ch); len(got) != 0 {
			t.Errorf("%d replies in %s", len(got), ch)
		}
	}
	for _, m := range fake.Sent(dm) {
		if strings.Contains(m.Shown(), "far") || strings.Contains(m.Shown(), "mention") || strings.Contains(m.Shown(), "$ echo bot") {
			t.Errorf("a stranger's command ran: %q", m.Shown())
		}
	}
	stopChild(t, child)
	keysAfter := storeKeys(t, dbPath)
	for bucket, after := range keysAfter {
		if grown := after - keysBefore[bucket]; grown > 20 {
			t.Errorf("bucket %s grew by %d keys under the flood", bucket, grown)
		}
	}
	growth := fileSize(t, dbPath) - sizeBefore
	t.Logf("%d stranger events grew the store by %d bytes; keys per bucket %v → %v", n, growth, keysBefore, keysAfter)
	if growth > 1<<20 {
		t.Errorf("the store grew by %d bytes under the flood", growth)
	}
}

// memory is e's daemon's Go memory as its last collection found it.
func memory(e *env) control.MemoryInfo {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.client().Status(ctx)
	if err != nil || st.Memory == nil {
		e.t.Fatalf("status: %+v, %v", st, err)
	}
	return *st.Memory
}

// stopChild stops a child daemon as the service manager would (SIGTERM)
// and waits for it.
func stopChild(t *testing.T, child *exec.Cmd) {
	t.Helper()
	if err := child.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	child.Wait()
}

// storeKeys counts the keys of each bucket of the store at path (nested
// buckets by their path), read while no daemon runs.
func storeKeys(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int{}
	var walk func(name string, b *bolt.Bucket)
	walk = func(name string, b *bolt.Bucket) {
		out[name] += 0
		_ = b.ForEach(func(k, v []byte) error {
			if v == nil {
				walk(name+"/"+string(k), b.Bucket(k))
			} else {
				out[name]++
			}
			return nil
		})
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			walk(string(name), b)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return maps.Clone(out)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
