package telegram

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// The tests here pin that a message sent on behalf of a chat (an anonymous
// group administrator, someone posting as a channel, a channel post forwarded
// into its discussion group) is nobody's: Telegram names a placeholder user
// as its sender, shared by everyone who posts that way, so letting it pair or
// pass the chat lock would hand the owner's shell to all of them.

var (
	opsGroup   = telegramtest.Supergroup(77, "Ops")
	opsChannel = telegramtest.Channel(78, "Ops news")
	// placeholders are the users Telegram names as the sender of a message
	// sent on behalf of a chat.
	placeholders = []telegramtest.User{
		telegramtest.GroupAnonymousBot(), telegramtest.ChannelBot(), telegramtest.ServiceUser(),
	}
)

// lockFixture is the Telegram adapter feeding the real Hub, with its store
// and pairer and groups allowed to pair: what the chat lock makes of updates
// as the adapter decodes them from the fake Bot API. The Hub's dispatch loop
// runs only when a test starts it, so that without it what the lock let
// through stays in the inbox to be looked at.
type lockFixture struct {
	srv    *telegramtest.Server
	g      *Gateway
	db     *store.DB
	pairer *pairing.Pairer
	hub    *gateways.Hub

	mu  sync.Mutex
	ran []string // commands the Hub's shell was asked to run
}

func newLockFixture(t *testing.T) *lockFixture {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "latch.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := pairing.New(bytes.Repeat([]byte{7}, pairing.KeyLen))
	if err != nil {
		t.Fatal(err)
	}
	f := &lockFixture{srv: newFake(t), db: db, pairer: p}
	// Every group message reaches the bot, so that what the lock makes of
	// them is under test, not what Telegram filters out.
	f.srv.SetPrivacyMode(false)
	f.g, _ = started(t, f.srv)
	f.hub = gateways.NewHub(gateways.Config{
		Store: db, Pairer: p, Gateways: []gateways.Gateway{f.g},
		AllowGroups: map[string]bool{gatewayName: true},
		Shell: func(_ context.Context, cmd string) string {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.ran = append(f.ran, cmd)
			return "ran " + cmd
		},
		Log: slog.New(slog.DiscardHandler),
	})
	run(t, f.g, f.hub)
	return f
}

// dispatch starts the Hub's dispatch loop.
func (f *lockFixture) dispatch(t *testing.T) {
	adaptertest.Run(t, f.hub.Run)
}

func (f *lockFixture) mint(t *testing.T) string {
	t.Helper()
	var code string
	err := f.db.Update(func(tx *store.Tx) (err error) {
		code, _, err = f.pairer.Mint(tx, gatewayName, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pairing.Format(code)
}

// latchTo latches the gateway to opsGroup and user u directly in the store,
// as a pairing before these checks existed may have left it.
func (f *lockFixture) latchTo(t *testing.T, u telegramtest.User) {
	t.Helper()
	err := f.db.Update(func(tx *store.Tx) error {
		return tx.PutLatch(store.Latch{
			Gateway: gatewayName, ChatID: strconv.FormatInt(opsGroup.ID, 10), ChatType: string(gateways.ChatGroup),
			ChatName: opsGroup.Title, UserID: strconv.FormatInt(u.ID, 10), UserName: u.Username, Since: time.Now(),
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// processed waits until the gateway has handed the update updateID to the
// Hub and the Hub has committed it: Telegram is told to confirm an update
// only after that.
func (f *lockFixture) processed(t *testing.T, updateID int) {
	t.Helper()
	waitFake(t, f.srv, "confirmation of update "+strconv.Itoa(updateID),
		func() bool { return f.srv.ConfirmedOffset() > updateID })
}

func (f *lockFixture) latch(t *testing.T) *store.Latch {
	t.Helper()
	var l *store.Latch
	if err := f.db.View(func(tx *store.Tx) (err error) { l, err = tx.Latch(gatewayName); return err }); err != nil {
		t.Fatal(err)
	}
	return l
}

func (f *lockFixture) inbox(t *testing.T) []store.Entry {
	t.Helper()
	var out []store.Entry
	err := f.db.View(func(tx *store.Tx) error {
		return tx.ScanInbox(0, func(e store.Entry) bool { out = append(out, e); return true })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *lockFixture) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ran)
}

// sendOnBehalfOfChats delivers text in opsGroup in every way Telegram
// delivers a message sent on behalf of a chat, and once more with a
// person's from beside sender_chat, and returns the last update id.
func sendOnBehalfOfChats(t *testing.T, srv *telegramtest.Server, person telegramtest.User, text string) int {
	t.Helper()
	// As the Bot API delivers them: sender_chat and a placeholder from.
	srv.Deliver(telegramtest.Incoming{Chat: opsGroup, Text: text}) // an anonymous administrator
	srv.Deliver(telegramtest.Incoming{Chat: opsGroup, SenderChat: &opsChannel, Text: text})
	srv.Deliver(telegramtest.Incoming{Chat: opsGroup, SenderChat: &opsChannel, AutomaticForward: true, Text: text})
	// The placeholder alone, without sender_chat, as updates predating it
	// carried it.
	for _, p := range placeholders {
		srv.Deliver(telegramtest.Incoming{Chat: opsGroup, From: &p, Text: text})
	}
	// sender_chat beside a person's from: the message is still the chat's.
	raw, err := json.Marshal(map[string]any{"message": map[string]any{
		"message_id": 9001, "date": time.Now().Unix(), "chat": opsGroup,
		"from": person, "sender_chat": opsChannel, "text": text,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return srv.PushUpdate(raw)
}

// TestOnBehalfOfChatCannotPair checks that a pairing code sent on behalf
// of a chat in an allowed group neither latches the gateway nor uses the
// code up: the owner can still pair with it, as themselves.
func TestOnBehalfOfChatCannotPair(t *testing.T) {
	f := newLockFixture(t)
	code := f.mint(t)
	sendOnBehalfOfChats(t, f.srv, bob, "/pair "+code)
	last := f.srv.SendText(opsGroup, alice, "/pair "+code)
	f.processed(t, last)

	l := f.latch(t)
	if l == nil || l.ChatID != strconv.FormatInt(opsGroup.ID, 10) || l.UserID != strconv.FormatInt(alice.ID, 10) {
		t.Fatalf("latch = %+v, want the group latched to alice (%d), who paired last", l, alice.ID)
	}
	var failed uint64
	err := f.db.View(func(tx *store.Tx) (err error) {
		failed, err = tx.Counter(gatewayName, gateways.CounterFailed)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if failed != 0 {
		t.Errorf("%d failed pairing attempts counted, want 0: messages sent on behalf of a chat must not reach the Hub", failed)
	}
	notices := 0
	for _, e := range f.inbox(t) {
		if e.Kind == store.KindNotice {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d pairing replies queued, want 1 (alice's)", notices)
	}
}

// TestOnBehalfOfChatCannotActAsOwner checks that a command sent on behalf of
// a chat in the latched group is neither stored nor run: with the group
// latched to a person, and with it latched to a placeholder, which a
// pairing made before this check could have left (the exploit: every
// anonymous administrator, or everyone posting as a channel, was the
// owner).
func TestOnBehalfOfChatCannotActAsOwner(t *testing.T) {
	t.Run("latched to alice", func(t *testing.T) {
		f := newLockFixture(t)
		f.latchTo(t, alice)
		f.dispatch(t)
		sendOnBehalfOfChats(t, f.srv, alice, "!touch pwned")
		f.srv.SendText(opsGroup, alice, "!echo sentinel")
		// The owner's command runs after everything sent before it.
		if _, err := f.srv.WaitSent(testContext(t), func(s telegramtest.Sent) bool {
			return strings.Contains(s.Plain, "ran echo sentinel")
		}); err != nil {
			t.Fatalf("waiting for the owner's command: %v", err)
		}
		if got := f.commands(); !slices.Equal(got, []string{"echo sentinel"}) {
			t.Errorf("shell ran %q, want only the owner's [echo sentinel]", got)
		}
	})
	for _, p := range placeholders {
		t.Run("latched to "+cmp.Or(p.Username, p.FirstName), func(t *testing.T) {
			f := newLockFixture(t)
			f.latchTo(t, p)
			last := sendOnBehalfOfChats(t, f.srv, alice, "!touch pwned")
			f.processed(t, last)
			for _, e := range f.inbox(t) {
				t.Errorf("stored for dispatch: user %s %q", e.UserID, e.Text)
			}
		})
	}
}

// TestPlaceholderPressIgnored checks that a button press whose sender is a
// placeholder never reaches the inbox, where it would be answered or decide
// an approval.
func TestPlaceholderPressIgnored(t *testing.T) {
	// press sends a button press from each placeholder on a message of the
	// bot's in opsGroup and returns that message's id and the last update id.
	press := func(t *testing.T, f *lockFixture) (msgID, last int) {
		t.Helper()
		f.srv.AddChat(opsGroup)
		id, err := f.g.Send(testContext(t), strconv.FormatInt(opsGroup.ID, 10), replyText("🔐 Allow bash?"))
		if err != nil {
			t.Fatal(err)
		}
		msgID, _ = strconv.Atoi(id)
		for _, p := range placeholders {
			last, _ = f.srv.SendCallback(opsGroup, p, msgID, "approve:k3x9p")
		}
		return msgID, last
	}
	t.Run("latched to alice", func(t *testing.T) {
		// The control: alice's own press, after the others, is stored.
		f := newLockFixture(t)
		f.latchTo(t, alice)
		msgID, _ := press(t, f)
		last, _ := f.srv.SendCallback(opsGroup, alice, msgID, "approve:k3x9p")
		f.processed(t, last)
		got := f.inbox(t)
		if len(got) != 1 || got[0].UserID != strconv.FormatInt(alice.ID, 10) {
			t.Errorf("inbox = %+v, want only alice's press", got)
		}
	})
	for _, p := range placeholders {
		t.Run("latched to "+cmp.Or(p.Username, p.FirstName), func(t *testing.T) {
			f := newLockFixture(t)
			f.latchTo(t, p)
			_, last := press(t, f)
			f.processed(t, last)
			for _, e := range f.inbox(t) {
				t.Errorf("stored for dispatch: user %s %q %s", e.UserID, e.Text, e.Extra)
			}
		})
	}
}

// TestDecodeDropsOnBehalfOfChat pins the decoding rule on raw updates: what
// is dropped still has its update id, so that it is confirmed past, and a
// person replying to a channel's post is still that person.
func TestDecodeDropsOnBehalfOfChat(t *testing.T) {
	g := New(Config{Token: testToken}, slog.New(slog.DiscardHandler))
	msg := func(from, senderChat any) string {
		m := map[string]any{"message_id": 5, "date": 1, "chat": opsGroup, "text": "!id"}
		if from != nil {
			m["from"] = from
		}
		if senderChat != nil {
			m["sender_chat"] = senderChat
		}
		b, _ := json.Marshal(map[string]any{"update_id": 10, "message": m})
		return string(b)
	}
	press := func(from telegramtest.User) string {
		b, _ := json.Marshal(map[string]any{"update_id": 10, "callback_query": map[string]any{
			"id": "77", "from": from, "chat_instance": "1", "data": "deny:x",
			"message": map[string]any{"message_id": 4, "date": 1, "chat": opsGroup, "text": "?"},
		}})
		return string(b)
	}
	reply := `{"update_id":10,"message":{"message_id":6,"date":1,"chat":` + mustJSON(t, opsGroup) +
		`,"from":` + mustJSON(t, alice) + `,"text":"!id","reply_to_message":{"message_id":5,"date":1,"chat":` +
		mustJSON(t, opsGroup) + `,"from":` + mustJSON(t, telegramtest.ChannelBot()) + `,"sender_chat":` +
		mustJSON(t, opsChannel) + `,"text":"news"}}}`
	anon := telegramtest.GroupAnonymousBot()
	tests := []struct {
		name string
		raw  string
		ok   bool
	}{
		{"a person", msg(alice, nil), true},
		{"a person replying to a channel's post", reply, true},
		{"a person's press", press(alice), true},
		{"anonymous administrator", msg(anon, opsGroup), false},
		{"as a channel", msg(telegramtest.ChannelBot(), opsChannel), false},
		{"automatic forward", msg(telegramtest.ServiceUser(), opsChannel), false},
		{"sender_chat beside a person", msg(alice, opsChannel), false},
		{"sender_chat without from", msg(nil, opsChannel), false},
		{"placeholder without sender_chat", msg(anon, nil), false},
		{"channel bot without sender_chat", msg(telegramtest.ChannelBot(), nil), false},
		{"service account without sender_chat", msg(telegramtest.ServiceUser(), nil), false},
		{"anonymous administrator's press", press(anon), false},
		{"channel bot's press", press(telegramtest.ChannelBot()), false},
		{"service account's press", press(telegramtest.ServiceUser()), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := g.decode([]byte(tt.raw))
			if !u.hasID || u.id != 10 || u.ok != tt.ok {
				t.Errorf("decode: id %d (hasID %t), ok %t (%+v); want id 10, ok %t", u.id, u.hasID, u.ok, u.msg, tt.ok)
			}
			if tt.ok && u.msg.UserID != strconv.FormatInt(alice.ID, 10) {
				t.Errorf("attributed to user %s, want alice", u.msg.UserID)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDecodeDropsCommandsForAnotherBot: in a group, "/stop@other_bot" is
// another bot's command; it must not stop latch's work, nor a stranger's
// "/pair@other_bot x" count against the pending code.
func TestDecodeDropsCommandsForAnotherBot(t *testing.T) {
	g := New(Config{Token: testToken}, slog.New(slog.DiscardHandler))
	g.info.BotName = "latch_home_bot"
	for text, ok := range map[string]bool{
		"/status@latch_home_bot":   true,
		"/STOP@Latch_Home_Bot":     true,
		"/stop":                    true,
		"!ls @other_bot":           true,
		"hello @other_bot":         true,
		"/stop@other_bot":          false,
		"/pair@other_bot ABCD2345": false,
		" /new@other_bot\nmore":    false,
	} {
		b, _ := json.Marshal(map[string]any{"update_id": 10, "message": map[string]any{
			"message_id": 5, "date": 1, "chat": opsGroup, "from": alice, "text": text}})
		if u := g.decode(b); u.ok != ok {
			t.Errorf("%q: taken = %v, want %v", text, u.ok, ok)
		}
	}
}

// TestForwardedMessageIsNeverACommand: a message the owner forwards is
// someone else's words; "!touch pwned" or "/stop" in it must reach the
// agent as text, labelled, never run as the owner's command. The fake sends
// forward_origin as the Bot API does since 7.0.
func TestForwardedMessageIsNeverACommand(t *testing.T) {
	f := newLockFixture(t)
	f.latchTo(t, alice)
	f.srv.Deliver(telegramtest.Incoming{Chat: opsGroup, From: &alice, ForwardedFrom: &bob, Text: "!touch pwned"})
	last := f.srv.Deliver(telegramtest.Incoming{Chat: opsGroup, From: &alice, ForwardedFrom: &bob, Text: "/stop"}).UpdateID
	f.processed(t, last)
	got := f.inbox(t)
	if len(got) != 2 {
		t.Fatalf("inbox = %+v, want both forwarded messages", got)
	}
	for i, want := range []string{"!touch pwned", "/stop"} {
		if got[i].Text != gateways.ForwardedLabel+want {
			t.Errorf("stored %q, want %q", got[i].Text, gateways.ForwardedLabel+want)
		}
	}
}

// TestForwardedOnlyByItsOwnOrigin: a reply to a forwarded message is not
// itself forwarded.
func TestForwardedOnlyByItsOwnOrigin(t *testing.T) {
	own := `{"update_id":1,"message":{"message_id":2,"date":1,"text":"!ls","forward_origin":{"type":"hidden_user","date":1,"sender_user_name":"x"}}}`
	reply := `{"update_id":1,"message":{"message_id":3,"date":1,"text":"!ls","reply_to_message":{"message_id":2,"date":1,"forward_origin":{"type":"hidden_user","date":1,"sender_user_name":"x"}}}}`
	if !forwarded([]byte(own)) || forwarded([]byte(reply)) || forwarded([]byte(`{"update_id":1,"message":{"text":"forward_origin"}}`)) {
		t.Errorf("forwarded: own %v, reply %v", forwarded([]byte(own)), forwarded([]byte(reply)))
	}
}
