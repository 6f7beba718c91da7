package telegramtest_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// threadOf is what a raw message says about its thread.
type threadOf struct {
	MessageID      int  `json:"message_id"`
	ThreadID       int  `json:"message_thread_id"`
	IsTopicMessage bool `json:"is_topic_message"`
	ReplyTo        *struct {
		MessageID         int             `json:"message_id"`
		ForumTopicCreated json.RawMessage `json:"forum_topic_created"`
	} `json:"reply_to_message"`
}

// rawMessages polls the updates and returns their messages undecoded
// (go-telegram-bot-api v5.5.1 predates topics).
func rawMessages(t *testing.T, bot *tgbotapi.BotAPI) []threadOf {
	t.Helper()
	resp, err := bot.MakeRequest("getUpdates", tgbotapi.Params{})
	if err != nil {
		t.Fatal(err)
	}
	var ups []struct {
		Message threadOf `json:"message"`
	}
	if err := json.Unmarshal(resp.Result, &ups); err != nil {
		t.Fatal(err)
	}
	var out []threadOf
	for _, u := range ups {
		out = append(out, u.Message)
	}
	return out
}

// TestTopicUpdates pins the shape of forum messages: in a topic they carry
// message_thread_id and is_topic_message, and the topic's creation message
// as reply_to_message; a reply in General carries a message_thread_id that
// names no topic.
func TestTopicUpdates(t *testing.T) {
	srv := newServer(t)
	srv.SetPrivacyMode(false)
	bot := newBot(t, srv)
	forum := telegramtest.Forum(90, "Forum")
	topic := srv.CreateTopic(forum, bob, "Builds")
	inTopic := srv.Deliver(telegramtest.Incoming{Chat: forum, From: &alice, Topic: topic, Text: "in the topic"}).MessageID
	inGeneral := srv.Deliver(telegramtest.Incoming{Chat: forum, From: &alice, Text: "in General"}).MessageID
	srv.Deliver(telegramtest.Incoming{Chat: forum, From: &alice, ReplyTo: inTopic, Text: "reply in the topic"})
	srv.Deliver(telegramtest.Incoming{Chat: forum, From: &alice, ReplyTo: inGeneral, Text: "reply in General"})
	got := rawMessages(t, bot)
	if len(got) != 4 {
		t.Fatalf("%d updates, want 4", len(got))
	}
	tests := []struct {
		name     string
		m        threadOf
		thread   int
		isTopic  bool
		replyTo  int
		rootSeen bool // reply_to_message is the topic's creation message
	}{
		{"in the topic", got[0], topic, true, topic, true},
		{"in General", got[1], 0, false, 0, false},
		{"reply in the topic", got[2], topic, true, inTopic, false},
		{"reply in General", got[3], inGeneral, false, inGeneral, false},
	}
	for _, tt := range tests {
		replyTo, root := 0, false
		if r := tt.m.ReplyTo; r != nil {
			replyTo, root = r.MessageID, len(r.ForumTopicCreated) > 0
		}
		if tt.m.ThreadID != tt.thread || tt.m.IsTopicMessage != tt.isTopic || replyTo != tt.replyTo || root != tt.rootSeen {
			t.Errorf("%s: thread %d topic %t reply_to %d (creation message %t); want %d %t %d (%t)",
				tt.name, tt.m.ThreadID, tt.m.IsTopicMessage, replyTo, root, tt.thread, tt.isTopic, tt.replyTo, tt.rootSeen)
		}
	}
}

// TestTopicSends pins where the bot's messages land in a forum and when
// Telegram refuses them.
func TestTopicSends(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	forum := telegramtest.Forum(90, "Forum")
	topic := srv.CreateTopic(forum, bob, "Builds")
	closed := srv.CreateTopic(forum, bob, "Archive")
	srv.SetTopicClosed(forum.ID, closed, true)
	inTopic := srv.Deliver(telegramtest.Incoming{Chat: forum, From: &alice, Topic: topic, Text: "q"}).MessageID
	inGeneral := srv.Deliver(telegramtest.Incoming{Chat: forum, From: &alice, Text: "q"}).MessageID
	generalReply := srv.Deliver(telegramtest.Incoming{Chat: forum, From: &alice, ReplyTo: inGeneral, Text: "q"}).MessageID
	send := func(extra tgbotapi.Params) (int, error) {
		p := tgbotapi.Params{"chat_id": strconv.FormatInt(forum.ID, 10), "text": "hi"}
		for k, v := range extra {
			p[k] = v
		}
		resp, err := bot.MakeRequest("sendMessage", p)
		if err != nil {
			return 0, err
		}
		var m threadOf
		if err := json.Unmarshal(resp.Result, &m); err != nil {
			t.Fatal(err)
		}
		if m.IsTopicMessage != (m.ThreadID != 0) {
			t.Errorf("answer: thread %d, is_topic_message %t", m.ThreadID, m.IsTopicMessage)
		}
		return m.ThreadID, nil
	}
	id := strconv.Itoa
	tests := []struct {
		name   string
		params tgbotapi.Params
		topic  int
		err    string
	}{
		{"to the topic", tgbotapi.Params{"message_thread_id": id(topic)}, topic, ""},
		{"reply in the topic", tgbotapi.Params{"reply_to_message_id": id(inTopic)}, topic, ""},
		{"to General", nil, 0, ""},
		{"to a closed topic", tgbotapi.Params{"message_thread_id": id(closed)}, 0, "Bad Request: TOPIC_CLOSED"},
		{"to a reply chain", tgbotapi.Params{"message_thread_id": id(inGeneral)}, 0, "Bad Request: message thread not found"},
		{"to General as thread 1", tgbotapi.Params{"message_thread_id": "1"}, 0, "Bad Request: message thread not found"},
	}
	for _, tt := range tests {
		got, err := send(tt.params)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || apiError(t, err).Message != tt.err):
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
		case got != tt.topic:
			t.Errorf("%s: landed in topic %d, want %d", tt.name, got, tt.topic)
		}
	}
	if _, err := bot.MakeRequest("sendMessage", tgbotapi.Params{"chat_id": strconv.FormatInt(forum.ID, 10), "text": "x",
		"reply_to_message_id": id(generalReply)}); err != nil {
		t.Errorf("a reply in General: %v", err)
	}

	srv.SetTopicClosed(forum.ID, telegramtest.GeneralTopic, true)
	if _, err := send(nil); err == nil || apiError(t, err).Message != "Bad Request: TOPIC_CLOSED" {
		t.Errorf("to a closed General: %v, want TOPIC_CLOSED", err)
	}
	if got, err := send(tgbotapi.Params{"message_thread_id": id(topic)}); err != nil || got != topic {
		t.Errorf("to the topic with General closed: topic %d, %v", got, err)
	}
	sent := srv.SentTo(forum.ID)
	if last := sent[len(sent)-1]; last.Topic != topic || last.ThreadID != topic {
		t.Errorf("recorded topic %d, thread %d; want %d", last.Topic, last.ThreadID, topic)
	}

	for _, tt := range []struct {
		thread string
		ok     bool
	}{{id(topic), true}, {id(closed), true}, {id(inGeneral), false}, {"", true}} {
		_, err := bot.MakeRequest("sendChatAction", tgbotapi.Params{
			"chat_id": strconv.FormatInt(forum.ID, 10), "action": "typing", "message_thread_id": tt.thread})
		if (err == nil) != tt.ok {
			t.Errorf("sendChatAction in thread %q: %v, want ok %t", tt.thread, err, tt.ok)
		}
	}
}

// TestDeletedTopic: a deleted topic is gone with its messages, as on
// Telegram: a send or "typing…" that names it fails with "message thread
// not found", a reply to one of its messages finds nothing to reply to,
// and the rest of the forum is untouched.
func TestDeletedTopic(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	forum := telegramtest.Forum(92, "Forum")
	gone := srv.CreateTopic(forum, bob, "Old")
	kept := srv.CreateTopic(forum, bob, "Kept")
	inGone := srv.Deliver(telegramtest.Incoming{Chat: forum, From: &alice, Topic: gone, Text: "q"}).MessageID
	srv.DeleteTopic(forum.ID, gone)
	chat := strconv.FormatInt(forum.ID, 10)
	id := strconv.Itoa
	for _, tt := range []struct {
		method string
		params tgbotapi.Params
		err    string
	}{
		{"sendMessage", tgbotapi.Params{"text": "x", "message_thread_id": id(gone)}, "Bad Request: message thread not found"},
		{"sendChatAction", tgbotapi.Params{"action": "typing", "message_thread_id": id(gone)}, "Bad Request: message thread not found"},
		{"sendMessage", tgbotapi.Params{"text": "x", "reply_to_message_id": id(inGone)}, "Bad Request: message to be replied not found"},
		{"sendMessage", tgbotapi.Params{"text": "x", "message_thread_id": id(kept)}, ""},
		{"sendMessage", tgbotapi.Params{"text": "x"}, ""},
	} {
		tt.params["chat_id"] = chat
		_, err := bot.MakeRequest(tt.method, tt.params)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s %v: %v", tt.method, tt.params, err)
		case tt.err != "" && (err == nil || apiError(t, err).Message != tt.err):
			t.Errorf("%s %v: %v, want %q", tt.method, tt.params, err, tt.err)
		}
	}
}

// TestGroupRateLimit: a group takes GroupRateLimit posts within
// GroupRateWindow, edits included, then 429 with the wait until the oldest
// leaves the window; a private chat is not under the group's limit.
func TestGroupRateLimit(t *testing.T) {
	srv := newServer(t)
	group := telegramtest.Supergroup(91, "Ops")
	srv.AddChat(group)
	srv.AddChat(telegramtest.Private(alice))
	bot := newBot(t, srv)
	srv.SetChatRateLimit(true)
	// Sped up so that the per-chat model (50 ms apart) lets 20 through in
	// a second, while the group's window is still 3 s.
	srv.SetRateSpeed(20)
	interval := telegramtest.ChatRateInterval / 20
	first, err := bot.Send(tgbotapi.NewMessage(group.ID, "0"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < telegramtest.GroupRateLimit; i++ {
		time.Sleep(interval) // keeps the per-chat rate, not a wait for an event
		var err error
		if i%2 == 0 {
			_, err = bot.Send(tgbotapi.NewMessage(group.ID, strconv.Itoa(i)))
		} else {
			_, err = bot.Send(tgbotapi.NewEditMessageText(group.ID, first.MessageID, strconv.Itoa(i)))
		}
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	time.Sleep(interval)
	_, err = bot.Send(tgbotapi.NewMessage(group.ID, "one too many"))
	if e := apiError(t, err); e.Code != 429 || e.RetryAfter < 1 || e.RetryAfter > 3 {
		t.Errorf("post %d: %d retry_after %d, want 429 with retry_after 1-3", telegramtest.GroupRateLimit+1, e.Code, e.RetryAfter)
	}
	for i := range telegramtest.GroupRateLimit + 1 {
		time.Sleep(interval)
		if _, err := bot.Send(tgbotapi.NewMessage(alice.ID, strconv.Itoa(i))); err != nil {
			t.Fatalf("private post %d: %v", i, err)
		}
	}
	if v, g := srv.ChatRateViolations(), srv.GroupRateViolations(); v != 1 || g != 1 {
		t.Errorf("violations %d (group %d), want 1 (1)", v, g)
	}
}
