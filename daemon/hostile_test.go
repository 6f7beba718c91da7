package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// TestE2EStrangerFlood: 100,000 messages from 1,000 stranger chats — pairing
// attempts with guessed codes, commands, plain text — get no reply, never
// reach the inbox, and grow the store by a bounded amount: counters and a
// bounded audit ring, not a record per message.
func TestE2EStrangerFlood(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	e := newEnv(t)
	// A daemon process of its own, so its memory is measured apart from
	// the fake platform's.
	child := e.startChild()
	e.pair()
	dbPath := config.DBPath(e.home)
	before, _ := os.Stat(dbPath)
	texts := []string{"/pair ABCD-2345", "!cat ~/.ssh/id_rsa", "hello", "/start ZZZZ2345", "/status"}
	var last int
	flood := func(from, to int) {
		for i := from; i < to; i++ {
			u := telegramtest.User{ID: int64(10_000 + i%1000), FirstName: "s"}
			last = e.tg.SendText(telegramtest.Private(u), u, texts[i%len(texts)])
		}
		// Generous: the race detector and a shared 2-core machine make
		// this slow; the budget is about correctness, the bench measures
		// speed.
		e.waitConfirmedWithin(last, 5*time.Minute)
	}
	// Memory: the first tenth warms up (every stranger chat seen once,
	// buffers grown); the other nine tenths must not grow the daemon's
	// anonymous memory (heap, stacks) by more than a few MB — a record kept
	// per message or per attempt, even 100 bytes, would show.
	flood(0, n/10)
	warm := rssAnon(t, child.Process.Pid)
	flood(n/10, n)
	end := rssAnon(t, child.Process.Pid)
	t.Logf("daemon RssAnon: %d KiB after %d messages, %d KiB after %d", warm>>10, n/10, end>>10, n)
	if grown := end - warm; grown > 8<<20 {
		t.Errorf("daemon's anonymous memory grew by %d KiB over %d stranger messages", grown>>10, n-n/10)
	}
	e.say(owner, "!echo still mine")
	e.waitReply(owner.ID, "still mine")
	for _, m := range e.tg.Sent() {
		if m.ChatID != owner.ID {
			t.Fatalf("a stranger got a reply: %+v", m)
		}
	}
	st := e.status()
	if st.StrangersDropped != uint64(n) {
		t.Errorf("strangers dropped = %d, want %d", st.StrangersDropped, n)
	}
	after, _ := os.Stat(dbPath)
	growth := after.Size() - before.Size()
	t.Logf("%d stranger messages grew the store by %d bytes", n, growth)
	// bbolt grows its file in steps; a record per message would be several
	// MB. The ceiling leaves room for the owner's own traffic and freelist.
	if growth > 1<<20 {
		t.Errorf("store grew by %d bytes under a stranger flood", growth)
	}
}

// TestE2EMalformedUpdatesDoNotCrash: garbage, truncated and oversized
// updates from the platform are skipped; the daemon keeps serving.
func TestE2EMalformedUpdatesDoNotCrash(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.pair()
	huge := strings.Repeat("A", 1<<20)
	for _, raw := range []string{
		`{"message":{"message_id":"not a number"}}`,
		`{"message":{"chat":null,"from":null,"text":"x"}}`,
		`{"message":{"message_id":1,"chat":{"id":1001,"type":"private"},"text":"no from"}}`,
		`{"callback_query":{"id":"1","from":{"id":1001},"data":"approve:zzz"}}`,
		`{"message":{"message_id":2,"date":1,"chat":{"id":1001,"type":"private"},"from":{"id":1001,"is_bot":false,"first_name":"O"},"text":"` + huge + `"}}`,
		`[1,2,3]`, `"string"`, `{"edited_message":{}}`, `{}`,
	} {
		e.tg.PushUpdate(json.RawMessage(raw))
	}
	e.say(owner, "!echo alive")
	e.waitReply(owner.ID, "alive")
	if got := len(e.tg.SentTo(owner.ID)); got > 3 {
		t.Errorf("malformed updates caused replies:%s", e.describeSent())
	}
}

// rssAnon is the RssAnon of process pid, in bytes.
func rssAnon(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc/pid/status")
	return 0
}
