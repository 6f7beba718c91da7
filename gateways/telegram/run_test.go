package telegram

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

func TestRunTranslatesUpdates(t *testing.T) {
	srv := newFake(t)
	srv.SetPrivacyMode(false) // every group message reaches the bot
	date := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	private := telegramtest.Private(alice)
	group := telegramtest.Group(42, "Team")
	super := telegramtest.Supergroup(43, "Big Team")
	noName := telegramtest.Chat{ID: 3333, Type: "private", Username: "nameless"}
	tests := []struct {
		name string
		in   telegramtest.Incoming
		want gateways.Message // ID and Time are filled in
	}{
		{"private", telegramtest.Incoming{Chat: private, From: &alice, Text: "hello"},
			gateways.Message{ChatID: "1111", ChatType: gateways.ChatPrivate, ChatName: "Alice Liddell", UserID: "1111", UserName: "alice", Text: "hello"}},
		{"group", telegramtest.Incoming{Chat: group, From: &bob, Text: "/status"},
			gateways.Message{ChatID: "-42", ChatType: gateways.ChatGroup, ChatName: "Team", UserID: "2222", UserName: "Bob", Text: "/status"}},
		{"supergroup", telegramtest.Incoming{Chat: super, From: &alice, Text: "hi all"},
			gateways.Message{ChatID: "-1000000000043", ChatType: gateways.ChatGroup, ChatName: "Big Team", UserID: "1111", UserName: "alice", Text: "hi all"}},
		{"caption", telegramtest.Incoming{Chat: private, From: &alice, Caption: "look at this"},
			gateways.Message{ChatID: "1111", ChatType: gateways.ChatPrivate, ChatName: "Alice Liddell", UserID: "1111", UserName: "alice", Text: "look at this"}},
		{"username only", telegramtest.Incoming{Chat: noName, From: &telegramtest.User{ID: 3333, Username: "nameless"}, Text: "x"},
			gateways.Message{ChatID: "3333", ChatType: gateways.ChatPrivate, ChatName: "@nameless", UserID: "3333", UserName: "nameless", Text: "x"}},
	}
	var want []gateways.Message
	last := 0
	for _, tt := range tests {
		tt.in.Date = date
		d := srv.Deliver(tt.in)
		m := tt.want
		m.Gateway, m.ID, m.Time = "telegram", strconv.Itoa(d.MessageID), date
		want = append(want, m)
		last = d.UpdateID
	}
	// Updates with nothing for latch still advance the cursor.
	srv.PushUpdate(json.RawMessage(`{"message":{"message_id":99,"date":1,"chat":{"id":-5,"type":"channel","title":"News"},"text":"post"}}`))
	srv.PushUpdate(json.RawMessage(`{"message":{"message_id":98,"date":1,"chat":{"id":7,"type":"secret"},"from":{"id":7,"first_name":"X"},"text":"?"}}`))
	last = srv.Deliver(telegramtest.Incoming{Chat: private, From: &alice}).UpdateID // a sticker, say

	g, _ := started(t, srv)
	sink := &memSink{}
	run(t, g, sink)
	cursor := strconv.Itoa(last + 1)
	eventually(t, "cursor "+cursor, func() bool { return sink.storedNext() == cursor })
	got := sink.storedMsgs()
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s:\n got %+v\nwant %+v", tests[i].name, got[i], want[i])
		}
	}
	allowed := srv.AllowedUpdates()
	if !reflect.DeepEqual(allowed, []string{"message", "callback_query"}) {
		t.Errorf("allowed_updates = %v, want [message callback_query]", allowed)
	}
	if p := srv.Calls("getUpdates")[0].Params; p["timeout"] != "30" {
		t.Errorf("getUpdates timeout = %q, want 30", p["timeout"])
	}
}

func TestRunConfirmsOnlyAfterIngest(t *testing.T) {
	srv := newFake(t)
	first := srv.SendText(telegramtest.Private(alice), alice, "one")
	g, _ := started(t, srv)
	sink := &memSink{}
	var confirmedAtIngest []int
	sink.onIngest = func(ingestCall) { confirmedAtIngest = append(confirmedAtIngest, srv.ConfirmedOffset()) }
	run(t, g, sink)
	waitFake(t, srv, "confirmation of the first update", func() bool { return srv.ConfirmedOffset() == first+1 })
	second := srv.SendText(telegramtest.Private(alice), alice, "two")
	waitFake(t, srv, "confirmation of the second update", func() bool { return srv.ConfirmedOffset() == second+1 })
	eventually(t, "two ingests", func() bool { return len(sink.ingestCalls()) == 2 })
	if confirmedAtIngest[0] >= first+1 || confirmedAtIngest[1] >= second+1 {
		t.Errorf("offsets confirmed at Ingest time = %v: a batch was confirmed before it was stored", confirmedAtIngest)
	}
	// The cursor is the next offset, then the ids taken (see seen).
	want := []string{fmt.Sprintf("%d;%d", first+1, first), fmt.Sprintf("%d;%d-%d", second+1, first, second)}
	if calls := sink.ingestCalls(); calls[0].cursor != want[0] || calls[1].cursor != want[1] {
		t.Errorf("cursors = %q, %q; want %q, %q", calls[0].cursor, calls[1].cursor, want[0], want[1])
	}
}

func TestRunRetriesSameBatchWhenIngestFails(t *testing.T) {
	srv := newFake(t)
	srv.SendText(telegramtest.Private(alice), alice, "one")
	last := srv.SendText(telegramtest.Private(bob), bob, "two")
	g, logs := started(t, srv)
	sink := &memSink{ingestErrs: 2}
	var polls, confirmed []int
	sink.onIngest = func(ingestCall) {
		polls = append(polls, srv.Count("getUpdates"))
		confirmed = append(confirmed, srv.ConfirmedOffset())
	}
	run(t, g, sink)
	eventually(t, "a successful ingest", func() bool { return sink.storedCursor() != "" })
	calls := sink.ingestCalls()
	if len(calls) < 3 {
		t.Fatalf("got %d Ingest calls, want 2 failures then a success", len(calls))
	}
	cursor := fmt.Sprintf("%d;%d-%d", last+1, last-1, last)
	for i, c := range calls[:3] {
		if c.cursor != cursor || len(c.msgs) != 2 || !reflect.DeepEqual(c.msgs, calls[0].msgs) {
			t.Errorf("call %d: cursor %q with %d messages, want the same batch (cursor %q, 2 messages)", i, c.cursor, len(c.msgs), cursor)
		}
	}
	if polls[0] != polls[2] {
		t.Errorf("getUpdates was called while the batch was failing (counts %v): the batch must be retried, not refetched", polls)
	}
	if confirmed[2] > last {
		t.Errorf("offset %d was confirmed before the failing batch was stored", confirmed[2])
	}
	if len(logs.lines("level=WARN", "storing updates failed")) != 2 {
		t.Errorf("want two warnings about the failed Ingest; logs:\n%s", logs)
	}
	waitFake(t, srv, "confirmation", func() bool { return srv.ConfirmedOffset() == last+1 })
}

func TestRunResumesFromCursor(t *testing.T) {
	tests := []struct {
		name       string
		cursor     string
		wantOffset string // offset param of the first getUpdates ("" = none)
		wantTexts  []string
	}{
		{"stored cursor", "1003", "1003", []string{"three"}},
		{"no cursor", "", "", []string{"one", "two", "three"}},
		{"garbage cursor", "abc", "", []string{"one", "two", "three"}},
		{"negative cursor", "-2", "", []string{"one", "two", "three"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			for _, text := range []string{"one", "two", "three"} {
				srv.SendText(telegramtest.Private(alice), alice, text) // ids 1001-1003
			}
			g, _ := started(t, srv)
			sink := &memSink{cursor: tt.cursor, cursorErrs: 1}
			run(t, g, sink)
			eventually(t, "cursor 1004", func() bool { return sink.storedNext() == "1004" })
			if got := srv.Calls("getUpdates")[0].Params["offset"]; got != tt.wantOffset {
				t.Errorf("first offset = %q, want %q", got, tt.wantOffset)
			}
			var texts []string
			for _, m := range sink.storedMsgs() {
				texts = append(texts, m.Text)
			}
			if !reflect.DeepEqual(texts, tt.wantTexts) {
				t.Errorf("ingested %q, want %q", texts, tt.wantTexts)
			}
		})
	}
}

func TestRunSkipsBadUpdates(t *testing.T) {
	srv := newFake(t)
	srv.PushUpdate(json.RawMessage(`"not an update"`))
	srv.PushUpdate(json.RawMessage(`{"message":{"message_id":"seven","chat":{"id":1,"type":"private"}}}`))
	srv.SendText(telegramtest.Private(alice), alice, strings.Repeat("x", 4097))
	last := srv.SendText(telegramtest.Private(alice), alice, "fine")
	g, logs := started(t, srv)
	sink := &memSink{}
	run(t, g, sink)
	eventually(t, "the batch", func() bool { return sink.storedNext() == strconv.Itoa(last+1) })
	if msgs := sink.storedMsgs(); len(msgs) != 1 || msgs[0].Text != "fine" {
		t.Errorf("ingested %+v, want only the good message", msgs)
	}
	for _, want := range []string{"skipping an update without update_id", "skipping a malformed update", "skipping an oversized message"} {
		if len(logs.lines("level=WARN", want)) != 1 {
			t.Errorf("no warning %q; logs:\n%s", want, logs)
		}
	}
}

// TestRunTranslatesCallbacks checks that button presses reach the sink as
// messages with a Callback and are left for the Hub to answer.
func TestRunTranslatesCallbacks(t *testing.T) {
	srv := newFake(t)
	srv.AddChat(telegramtest.Private(alice))
	g, _ := started(t, srv)
	id, err := g.Send(testContext(t), "1111", replyText("pick one"))
	if err != nil {
		t.Fatal(err)
	}
	msgID, _ := strconv.Atoi(id)
	_, qid := srv.SendCallback(telegramtest.Private(alice), bob, msgID, "approve:k3x9p")
	_, orphan := srv.SendCallback(telegramtest.Private(alice), alice, 999, "deny:x") // message unknown
	last, _ := srv.SendCallback(telegramtest.Private(alice), alice, msgID, strings.Repeat("x", 65))
	sink := &memSink{}
	run(t, g, sink)
	eventually(t, "the batch", func() bool { return sink.storedNext() == strconv.Itoa(last+1) })
	msgs := sink.storedMsgs()
	if len(msgs) != 1 {
		t.Fatalf("ingested %+v, want only the press on a known message with valid data", msgs)
	}
	m := msgs[0]
	want := gateways.Callback{ID: qid, Data: "approve:k3x9p", MessageID: id}
	if m.Callback == nil || *m.Callback != want {
		t.Errorf("Callback = %+v, want %+v", m.Callback, want)
	}
	if m.ChatID != "1111" || m.UserID != "2222" || m.ChatType != gateways.ChatPrivate || m.ID != id || m.Text != "" {
		t.Errorf("message = %+v, want chat 1111, user 2222 (the presser), id %s, no text", m, id)
	}
	if srv.CallbackAnswered(qid) || srv.CallbackAnswered(orphan) || srv.Count("answerCallbackQuery") != 0 {
		t.Error("Run answered a callback query; answering is the Hub's decision")
	}
}

// TestRunRecoversFromFaults checks that each kind of failure is retried and
// that polling then delivers.
func TestRunRecoversFromFaults(t *testing.T) {
	tests := []struct {
		name    string
		fault   telegramtest.Fault
		wantLog string
	}{
		{"502 html", telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>", Times: 2}, "Bot API answered HTTP 502 Bad Gateway"},
		{"500 json", telegramtest.Fault{Status: 500, Times: 2}, "Internal Server Error"},
		{"malformed json", telegramtest.Fault{Malformed: true, Times: 2}, "unexpected EOF"},
		{"200 html", telegramtest.Fault{Body: "<html>captive portal</html>"}, "invalid character"},
		{"hangup", telegramtest.Fault{Hangup: true, Times: 2}, "getUpdates failed"},
		{"404", telegramtest.Fault{Status: 404}, "Not Found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			g, logs := started(t, srv)
			srv.Inject("getUpdates", tt.fault)
			id := srv.SendText(telegramtest.Private(alice), alice, "hi")
			sink := &memSink{}
			run(t, g, sink)
			eventually(t, "delivery after the fault", func() bool { return sink.storedNext() == strconv.Itoa(id+1) })
			if len(logs.lines("level=WARN", "getUpdates failed", tt.wantLog)) == 0 {
				t.Errorf("no warning mentioning %q; logs:\n%s", tt.wantLog, logs)
			}
			eventually(t, "Connected", func() bool { return g.Info().Connected })
			if g.Info().LastError == "" {
				t.Error("Info().LastError is empty after a failure")
			}
		})
	}
}

func TestRunMalformedAnswerShrinksBatch(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	srv.Inject("getUpdates", telegramtest.Fault{Malformed: true})
	srv.SendText(telegramtest.Private(alice), alice, "hi")
	run(t, g, &memSink{})
	waitFake(t, srv, "a retry", func() bool { return srv.Count("getUpdates") >= 2 })
	calls := srv.Calls("getUpdates")
	if calls[0].Params["limit"] != "100" || calls[1].Params["limit"] != "1" {
		t.Errorf("limits = %q then %q, want 100 then 1 after an undecodable answer", calls[0].Params["limit"], calls[1].Params["limit"])
	}
}

func TestRunHonoursRetryAfter(t *testing.T) {
	srv := newFake(t)
	// A long back-off shows that the wait came from retry_after.
	g, logs := started(t, srv, func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour })
	srv.Inject("getUpdates", telegramtest.Fault{Status: 429, RetryAfter: 1})
	id := srv.SendText(telegramtest.Private(alice), alice, "hi")
	sink := &memSink{}
	run(t, g, sink)
	eventually(t, "delivery after 429", func() bool { return sink.storedNext() == strconv.Itoa(id+1) })
	calls := srv.Calls("getUpdates")
	if gap := calls[1].Time.Sub(calls[0].Time); gap < time.Second {
		t.Errorf("retried %v after a 429 with retry_after 1, want ≥ 1s", gap)
	}
	if len(logs.lines("level=WARN", "rate limited", "retry_after=1s")) != 1 {
		t.Errorf("429 not logged; logs:\n%s", logs)
	}
}

func TestRunConflictLogsOncePerEpisode(t *testing.T) {
	srv := newFake(t)
	g, logs := started(t, srv)
	sink := &memSink{}
	run(t, g, sink)
	for episode := 1; episode <= 2; episode++ {
		srv.Inject("getUpdates", telegramtest.Fault{Status: 409, Times: 3})
		// The poll in progress (if any) returns this update; the next ones
		// meet the conflict.
		id := srv.SendText(telegramtest.Private(alice), alice, fmt.Sprint("before ", episode))
		eventually(t, "delivery", func() bool { return sink.storedNext() == strconv.Itoa(id+1) })
		id = srv.SendText(telegramtest.Private(alice), alice, fmt.Sprint("after ", episode))
		eventually(t, "delivery after the conflict", func() bool { return sink.storedNext() == strconv.Itoa(id+1) })
	}
	warns := logs.lines("level=WARN", "another process is polling this bot token (409 Conflict); retrying")
	if len(warns) != 2 {
		t.Errorf("got %d conflict warnings, want 2 (one per episode); logs:\n%s", len(warns), logs)
	}
	if n := len(logs.lines("polling works again")); n != 2 {
		t.Errorf("got %d recovery messages, want 2", n)
	}
}

// A webhook still set (by webhook mode, or behind latch's back) is deleted
// when the first poll meets its 409, and polling goes on at once: with an
// hour's backoff the message would not arrive before the test's deadline.
func TestRunRemovesWebhook(t *testing.T) {
	srv := newFake(t)
	srv.SetWebhook("https://example.com/hook")
	g, logs := started(t, srv, func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour })
	id := srv.SendText(telegramtest.Private(alice), alice, "hi")
	sink := &memSink{}
	run(t, g, sink)
	eventually(t, "delivery", func() bool { return sink.storedNext() == strconv.Itoa(id+1) })
	if len(logs.lines("level=WARN", "a webhook is set")) != 1 {
		t.Errorf("webhook conflict not logged; logs:\n%s", logs)
	}
	// "hi" came while the webhook was set: it arrives only if the deletion
	// kept the pending updates.
	if hooks := srv.Calls("deleteWebhook"); len(hooks) != 1 || hooks[0].Params["drop_pending_updates"] != "" {
		t.Errorf("deleteWebhook calls = %+v, want one without drop_pending_updates", hooks)
	}
}

// A webhook set again after every deletion does not make Run spin: only the
// first 409 of an episode is retried at once.
func TestRunWebhookSetAgainDoesNotSpin(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv, func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour })
	srv.SetWebhook("https://example.com/hook")
	srv.Inject("deleteWebhook", telegramtest.Fault{Body: `{"ok":true,"result":true}`, Times: -1}) // "deleted", yet still set
	run(t, g, &memSink{})
	waitFake(t, srv, "the retry after the first deletion", func() bool { return srv.Count("getUpdates") >= 2 })
	// Observing a rate needs a time window; this is not waiting for an event.
	time.Sleep(500 * time.Millisecond)
	if n := srv.Count("getUpdates"); n != 2 {
		t.Errorf("%d getUpdates calls, want 2: the first and one at once after deleting the webhook, then the backoff", n)
	}
}

func TestRunDoesNotSpin(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	srv.SetInstantEmpty(true)
	run(t, g, &memSink{})
	waitFake(t, srv, "the first poll", func() bool { return srv.Count("getUpdates") >= 1 })
	// Observing a rate needs a time window; this is not waiting for an event.
	time.Sleep(2500 * time.Millisecond)
	if n := srv.Count("getUpdates"); n > 4 {
		t.Errorf("%d getUpdates calls in 2.5s against an instantly empty server, want ≤ 4", n)
	}
}

func TestRunStopsPromptlyMidPoll(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv, func(c *Config) { c.PollTimeout = time.Hour })
	stop := run(t, g, &memSink{})
	waitFake(t, srv, "a long poll", srv.Polling)
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	// The poll would last an hour; returning at all shows the request was
	// cancelled. The bound only catches a hang.
	if d := time.Since(start); d > waitLimit {
		t.Errorf("Run took %v to stop", d)
	}
	waitFake(t, srv, "the poll to end", func() bool { return !srv.Polling() })
}

func TestRunStopsOnUnauthorized(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	srv.Inject("getUpdates", telegramtest.Fault{Status: 401})
	ctx := testContext(t)
	err := g.Run(ctx, &memSink{})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Run = %v, want ErrUnauthorized", err)
	}
	if info := g.Info(); info.Connected || !strings.Contains(info.LastError, "Unauthorized") {
		t.Errorf("Info = %+v, want disconnected with an Unauthorized error", info)
	}
}
