package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// The tests here pin that the forum topic latch last answered in outlives
// a restart (it is stored in the cursor, which must still read as before),
// and that a topic that refuses a post does not lose it.

// restartRun is one run of latch on a store: a gateway on the fake, fast
// paced (pacing is not under test), feeding a Hub that dispatches.
type restartRun struct {
	g        *Gateway
	hub      *gateways.Hub
	stopGate func() error
	stopHub  func() error
}

// startLatch starts a gateway and a Hub on db as the daemon wires them:
// Start, Restore, then the gateway's Run and the Hub's dispatch loop.
func startLatch(t *testing.T, srv *telegramtest.Server, db *store.DB) *restartRun {
	t.Helper()
	p, err := pairing.New(bytes.Repeat([]byte{7}, pairing.KeyLen))
	if err != nil {
		t.Fatal(err)
	}
	r := &restartRun{}
	r.g, _ = started(t, srv)
	r.g.chatEvery, r.g.groupWindow = time.Millisecond, 17*time.Millisecond
	r.hub = gateways.NewHub(gateways.Config{
		Store: db, Pairer: p, Gateways: []gateways.Gateway{r.g},
		AllowGroups: map[string]bool{gatewayName: true},
		Shell:       func(_ context.Context, cmd string) string { return "ran " + cmd },
		Log:         slog.New(slog.DiscardHandler),
	})
	if err := r.g.Restore(testContext(t), r.hub); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	r.stopGate = run(t, r.g, r.hub)
	r.stopHub = adaptertest.Run(t, r.hub.Run)
	return r
}

// stop stops the gateway, then the Hub, as a daemon's shutdown does.
func (r *restartRun) stop(t *testing.T) {
	t.Helper()
	if err := r.stopGate(); err != nil {
		t.Errorf("gateway Run: %v", err)
	}
	if err := r.stopHub(); err != nil {
		t.Errorf("Hub Run: %v", err)
	}
}

func storedCursor(t *testing.T, db *store.DB) string {
	t.Helper()
	var c string
	if err := db.View(func(tx *store.Tx) (err error) { c, err = tx.Cursor(gatewayName); return err }); err != nil {
		t.Fatal(err)
	}
	return c
}

func inboxLen(t *testing.T, db *store.DB) int {
	t.Helper()
	n := 0
	err := db.View(func(tx *store.Tx) error {
		return tx.ScanInbox(0, func(store.Entry) bool { n++; return true })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNoticeAfterRestartGoesToOwnersTopic: the owner of a latched forum
// (General closed) is answered in their topic; a stranger then posts in
// another. latch stops, a notice is queued meanwhile (as `latch pair`
// does with no daemon running), and after the restart — a new Gateway on
// the same store — the notice and "typing…" go to the owner's topic, not
// to the closed General (which would refuse it and lose it) nor to the
// stranger's topic.
func TestNoticeAfterRestartGoesToOwnersTopic(t *testing.T) {
	srv := newFake(t)
	srv.SetPrivacyMode(false)
	builds := srv.CreateTopic(opsForum, bob, "Builds")
	deploys := srv.CreateTopic(opsForum, bob, "Deploys")
	srv.SetTopicClosed(opsForum.ID, telegramtest.GeneralTopic, true)
	db, err := store.Open(filepath.Join(t.TempDir(), "latch.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	chat := strconv.FormatInt(opsForum.ID, 10)
	err = db.Update(func(tx *store.Tx) error {
		return tx.PutLatch(store.Latch{Gateway: gatewayName, ChatID: chat, ChatType: string(gateways.ChatGroup),
			UserID: strconv.FormatInt(alice.ID, 10), Since: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}

	first := startLatch(t, srv, db)
	srv.Deliver(telegramtest.Incoming{Chat: opsForum, From: &alice, Topic: builds, Text: "!echo hi"})
	if _, err := srv.WaitSent(testContext(t), func(s telegramtest.Sent) bool { return strings.Contains(s.Plain, "ran echo hi") }); err != nil {
		t.Fatalf("waiting for the answer: %v", err)
	}
	// Stored while latch runs, with no update to carry it: a crash now
	// must not lose it.
	entry := chat + "@" + strconv.Itoa(builds)
	eventually(t, "the topic in the stored cursor", func() bool { return strings.Contains(storedCursor(t, db), entry) })
	stranger := srv.Deliver(telegramtest.Incoming{Chat: opsForum, From: &bob, Topic: deploys, Text: "!echo mine"})
	waitFake(t, srv, "the stranger's update confirmed", func() bool { return srv.ConfirmedOffset() > stranger.UpdateID })
	first.stop(t)

	const notice = "A pairing code was minted on the machine."
	err = db.Update(func(tx *store.Tx) error {
		_, err := tx.AppendInbox(store.Entry{Kind: store.KindNotice, Gateway: gatewayName, ChatID: chat,
			UserID: strconv.FormatInt(alice.ID, 10), Text: notice, Received: time.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before := len(srv.SentTo(opsForum.ID))

	second := startLatch(t, srv, db)
	eventually(t, "the notice handled", func() bool { return inboxLen(t, db) == 0 })
	second.g.Typing(testContext(t), chat)
	sent := srv.SentTo(opsForum.ID)[before:]
	if len(sent) != 1 || sent[0].Plain != notice || sent[0].Topic != builds {
		t.Fatalf("after the restart the forum got %+v; want the notice in topic %d (Builds)", sent, builds)
	}
	calls := srv.Calls("sendChatAction")
	if n := len(calls); n == 0 || calls[n-1].Params["message_thread_id"] != strconv.Itoa(builds) {
		t.Errorf("typing… after the restart: %+v, want it in topic %d", calls, builds)
	}
	if !strings.Contains(storedCursor(t, db), entry) {
		t.Errorf("cursor %q lost the topic", storedCursor(t, db))
	}
}

// TestCursorWithTopics pins the stored cursor: every cursor stored before
// topics were (a bare offset, or offset and ids) reads as it did, with no
// topics; one with topics reads both; writing the topics keeps the update
// ids as stored.
func TestCursorWithTopics(t *testing.T) {
	forum := opsForum.ID
	tests := []struct {
		name, stored string
		offset       int
		seen         []int
		topic        int
		written      string // the cursor after latch answers in topic 9
	}{
		{"none", "", 0, nil, 0, fmt.Sprintf("|%d@9", forum)},
		{"a bare offset", "1043", 1043, seq(943, 1042), 0, fmt.Sprintf("1043|%d@9", forum)},
		{"offset and ids", "1043;1000-1042", 1043, seq(1000, 1042), 0, fmt.Sprintf("1043;1000-1042|%d@9", forum)},
		{"with topics", fmt.Sprintf("1043;1042|5@3,%d@7", forum), 1043, []int{1042}, 7, fmt.Sprintf("1043;1042|5@3,%d@9", forum)},
		{"invalid topics", "1043;1042|x@7", 1043, []int{1042}, 0, fmt.Sprintf("1043;1042|%d@9", forum)},
		{"invalid ids", fmt.Sprintf("1043;x|%d@7", forum), 1043, nil, 7, fmt.Sprintf("1043;x|%d@9", forum)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newGateway(t, newFake(t))
			sink := &memSink{cursor: tt.stored}
			p := &poller{g: g, sink: sink}
			if !p.loadCursor(testContext(t)) {
				t.Fatal("loadCursor gave up")
			}
			if p.offset != tt.offset || !slices.Equal(p.recent.ids, tt.seen) {
				t.Errorf("offset %d, ids %v; want %d, %v", p.offset, p.recent.ids, tt.offset, tt.seen)
			}
			if got := g.chatTarget(forum).topic; got != tt.topic {
				t.Errorf("topic %d, want %d", got, tt.topic)
			}
			g.setTopic(target{chat: forum, topic: 9})
			if err := g.storeTopics(testContext(t), sink); err != nil {
				t.Fatal(err)
			}
			if got := sink.storedCursor(); got != tt.written {
				t.Errorf("written %q, want %q", got, tt.written)
			}
			calls := sink.ingestCalls()
			if len(calls) != 1 || len(calls[0].msgs) != 0 {
				t.Errorf("Ingest calls %+v, want one of no messages", calls)
			}
		})
	}
}

func seq(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// TestTopicBookBounded: the topics kept, and so stored, are those of the
// maxTopicChats chats latch answered last; answering in General forgets a
// chat; only a change counts as one.
func TestTopicBookBounded(t *testing.T) {
	var b topicBook
	for chat := int64(1); chat <= maxTopicChats+5; chat++ {
		b.set(-chat, int(chat))
	}
	if len(b.entries) != maxTopicChats || b.get(-1) != 0 || b.get(-(maxTopicChats+5)) != maxTopicChats+5 {
		t.Errorf("kept %v, want the last %d chats", b.entries, maxTopicChats)
	}
	oldest := b.entries[0].chat
	if !b.set(oldest, 99) || b.entries[len(b.entries)-1].chat != oldest {
		t.Error("answering a chat again does not make it the most recent")
	}
	if b.set(oldest, 99) {
		t.Error("the same topic again counts as a change")
	}
	if !b.set(oldest, 0) || b.get(oldest) != 0 || b.set(oldest, 0) {
		t.Error("answering in General does not forget the chat (once)")
	}
	parsed, ok := parseTopics(b.encode())
	if !ok || !slices.Equal(parsed.entries, b.entries) {
		t.Errorf("round trip: %v, %t; want %v", parsed.entries, ok, b.entries)
	}
	var long []string
	for chat := 1; chat <= 3*maxTopicChats; chat++ {
		long = append(long, fmt.Sprintf("-%d@%d", chat, chat))
	}
	if parsed, ok := parseTopics(strings.Join(long, ",")); !ok || len(parsed.entries) != maxTopicChats {
		t.Errorf("a long list read as %d entries, %t; want %d", len(parsed.entries), ok, maxTopicChats)
	}
	for _, s := range []string{"x", "-5", "-5@", "-5@0", "-5@-1", "0@5", "-5@7,", "-5@99999999999"} {
		if _, ok := parseTopics(s); ok {
			t.Errorf("parseTopics(%q) accepted", s)
		}
	}
}

// TestSendFallsBackFromRefusedTopic: a post into a topic that refuses it
// (closed, or deleted) goes to the topic latch last answered in, else to
// General, each tried once, unthreaded; where it landed is where what
// names no message goes next. Only with nowhere left does Send fail, as
// refused.
func TestSendFallsBackFromRefusedTopic(t *testing.T) {
	send := func(t *testing.T, f *forum, r gateways.Reply) (telegramtest.Sent, error) {
		t.Helper()
		before := len(f.srv.SentTo(opsForum.ID))
		_, err := f.g.Send(testContext(t), f.chat(), r)
		sent := f.srv.SentTo(opsForum.ID)[before:]
		if err != nil {
			return telegramtest.Sent{}, err
		}
		if len(sent) == 0 {
			t.Fatal("Send succeeded and posted nothing")
		}
		return sent[len(sent)-1], nil
	}
	answer := func(t *testing.T, f *forum, topic int) {
		t.Helper()
		q := f.ask(t, topic, "question")
		if s, err := send(t, f, gateways.Reply{Text: "answer", ReplyTo: q.ID}); err != nil || s.Topic != topic {
			t.Fatalf("answer in topic %d: %+v, %v", topic, s, err)
		}
	}

	t.Run("closed topic, General open", func(t *testing.T) {
		f := newForum(t)
		answer(t, f, f.topic)
		f.srv.SetTopicClosed(opsForum.ID, telegramtest.GeneralTopic, false)
		f.srv.SetTopicClosed(opsForum.ID, f.topic, true)
		long := strings.Repeat("notice ", 1000) // two messages
		if _, err := send(t, f, gateways.Reply{Text: long}); err != nil {
			t.Fatalf("notice: %v", err)
		}
		refused := f.srv.Count("sendMessage")
		if s, err := send(t, f, replyText("next")); err != nil || s.Topic != 0 {
			t.Errorf("the next notice: %+v, %v; want it in General", s, err)
		}
		if n := f.srv.Count("sendMessage") - refused; n != 1 {
			t.Errorf("the next notice took %d calls, want 1: it goes where the last one landed", n)
		}
		for _, s := range f.srv.SentTo(opsForum.ID)[1:] {
			if s.Topic != 0 {
				t.Errorf("%.20q landed in topic %d, want General", s.Plain, s.Topic)
			}
		}
	})

	t.Run("deleted topic, General open", func(t *testing.T) {
		f := newForum(t)
		answer(t, f, f.topic)
		f.srv.SetTopicClosed(opsForum.ID, telegramtest.GeneralTopic, false)
		f.srv.DeleteTopic(opsForum.ID, f.topic)
		if s, err := send(t, f, replyText("notice")); err != nil || s.Topic != 0 {
			t.Errorf("notice: %+v, %v; want it in General", s, err)
		}
	})

	t.Run("reply in closed General", func(t *testing.T) {
		f := newForum(t)
		answer(t, f, f.topic)
		// An administrator may still write in a closed topic; the bot,
		// no administrator, may not.
		q := f.ask(t, 0, "from General")
		s, err := send(t, f, gateways.Reply{Text: "answer", ReplyTo: q.ID})
		if err != nil || s.Topic != f.topic || s.ReplyTo != 0 {
			t.Errorf("answer: %+v, %v; want it unthreaded in topic %d, where latch last answered", s, err, f.topic)
		}
	})

	t.Run("reply in a closed topic", func(t *testing.T) {
		f := newForum(t)
		answer(t, f, f.topic)
		q := f.ask(t, f.other, "from a topic closed next")
		f.srv.SetTopicClosed(opsForum.ID, f.other, true)
		if s, err := send(t, f, gateways.Reply{Text: "answer", ReplyTo: q.ID}); err != nil || s.Topic != f.topic {
			t.Errorf("answer: %+v, %v; want it in topic %d", s, err, f.topic)
		}
	})

	t.Run("nowhere left", func(t *testing.T) {
		f := newForum(t)
		answer(t, f, f.topic)
		f.srv.SetTopicClosed(opsForum.ID, f.topic, true)
		calls := f.srv.Count("sendMessage")
		_, err := send(t, f, replyText("notice"))
		if !errors.Is(err, gateways.ErrRejected) {
			t.Errorf("notice with the topic and General closed: %v, want ErrRejected", err)
		}
		if n := f.srv.Count("sendMessage") - calls; n != 2 {
			t.Errorf("%d sends tried, want 2: the topic, then General, once each", n)
		}
	})
}
