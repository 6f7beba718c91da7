package telegram

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/turn"
)

// The tests here pin that latch answers in the forum topic the owner wrote
// in. Telegram puts a message sent without message_thread_id that is no
// reply in the General topic; the fake, like Telegram, refuses it there
// once General is closed, so a post that leaves the topic fails.

var opsForum = telegramtest.Forum(77, "Ops") // opsGroup, made a forum

// forum is a forum with two open topics and General closed, a gateway on
// it that paces fast (pacing is not under test here), and the gateway's
// Run feeding a memSink.
type forum struct {
	srv          *telegramtest.Server
	g            *Gateway
	sink         *memSink
	topic, other int // thread ids
}

func newForum(t *testing.T) *forum {
	t.Helper()
	f := &forum{srv: newFake(t), sink: &memSink{}}
	f.srv.SetPrivacyMode(false)
	f.topic = f.srv.CreateTopic(opsForum, bob, "Builds")
	f.other = f.srv.CreateTopic(opsForum, bob, "Deploys")
	f.srv.SetTopicClosed(opsForum.ID, telegramtest.GeneralTopic, true)
	f.g, _ = started(t, f.srv)
	f.g.chatEvery, f.g.groupWindow = time.Millisecond, 17*time.Millisecond
	f.g.timing.stream, f.g.timing.groupStream = 50*time.Millisecond, 50*time.Millisecond
	run(t, f.g, f.sink)
	return f
}

// ask delivers alice's text in a topic (0: General) and returns the
// message as the gateway handed it on.
func (f *forum) ask(t *testing.T, topic int, text string) gateways.Message {
	t.Helper()
	d := f.srv.Deliver(telegramtest.Incoming{Chat: opsForum, From: &alice, Topic: topic, Text: text})
	return f.stored(t, d.UpdateID)
}

// stored waits for the update's message to reach the sink.
func (f *forum) stored(t *testing.T, updateID int) gateways.Message {
	t.Helper()
	waitFake(t, f.srv, "the update to be confirmed", func() bool { return f.srv.ConfirmedOffset() > updateID })
	msgs := f.sink.storedMsgs()
	if len(msgs) == 0 {
		t.Fatal("nothing stored")
	}
	return msgs[len(msgs)-1]
}

// chat is the forum's id as the Hub knows it.
func (f *forum) chat() string { return strconv.FormatInt(opsForum.ID, 10) }

// checkTopic fails for every post in the forum outside topic, and every
// "typing…" not shown there.
func (f *forum) checkTopic(t *testing.T, topic int) {
	t.Helper()
	for _, s := range f.srv.SentTo(opsForum.ID) {
		if s.Topic != topic || s.ThreadID != topic {
			t.Errorf("%s %.30q landed in topic %d (message_thread_id %d), want %d", s.Method, s.Plain, s.Topic, s.ThreadID, topic)
		}
	}
	for _, c := range f.srv.Calls("sendChatAction") {
		if c.Params["message_thread_id"] != strconv.Itoa(topic) {
			t.Errorf("typing… in thread %q, want %d", c.Params["message_thread_id"], topic)
		}
	}
}

// TestTopicMessageIDs: a message in a topic, and a press of a button in
// one, is named "<id>@<thread>" with the plain chat id; a reply in General
// carries a message_thread_id of its reply chain, which is no topic.
func TestTopicMessageIDs(t *testing.T) {
	f := newForum(t)
	inTopic := f.ask(t, f.topic, "in a topic")
	f.srv.SetTopicClosed(opsForum.ID, telegramtest.GeneralTopic, false)
	inGeneral := f.ask(t, 0, "in General")
	id, _ := strconv.Atoi(inGeneral.ID)
	reply := f.stored(t, f.srv.Deliver(telegramtest.Incoming{Chat: opsForum, From: &alice, ReplyTo: id, Text: "reply"}).UpdateID)
	sent, err := f.g.Send(testContext(t), f.chat(), gateways.Reply{Text: "buttons here", ReplyTo: inTopic.ID})
	if err != nil {
		t.Fatal(err)
	}
	botMsg, _, _ := strings.Cut(sent, "@")
	n, _ := strconv.Atoi(botMsg)
	upd, queryID := f.srv.SendCallback(opsForum, alice, n, "approve:k3x9p")
	press := f.stored(t, upd)
	for _, m := range []gateways.Message{inTopic, inGeneral, reply, press} {
		if m.ChatID != f.chat() {
			t.Errorf("%q: chat %s, want the plain chat id %s", m.Text, m.ChatID, f.chat())
		}
	}
	wantTopic := "@" + strconv.Itoa(f.topic)
	if !strings.HasSuffix(inTopic.ID, wantTopic) || strings.Contains(inGeneral.ID, "@") || strings.Contains(reply.ID, "@") {
		t.Errorf("ids %q, %q, %q; want the first in topic %d, the others in none", inTopic.ID, inGeneral.ID, reply.ID, f.topic)
	}
	if sent != botMsg+wantTopic {
		t.Errorf("Send returned %q, want %q", sent, botMsg+wantTopic)
	}
	if press.Callback == nil || press.ID != sent || press.Callback.MessageID != sent {
		t.Fatalf("press %+v, want one on message %s", press, sent)
	}
	if err := f.g.AnswerCallback(testContext(t), f.chat(), *press.Callback, "Approved", "✓ approved"); err != nil {
		t.Errorf("AnswerCallback: %v", err)
	}
	if !f.srv.CallbackAnswered(queryID) || f.srv.SentTo(opsForum.ID)[0].Keyboard != nil {
		t.Error("the press was not answered or its message not resolved")
	}
}

// TestTurnStaysInTopic: with General closed, everything a turn posts —
// the streaming answer and its later chunks, a tool line, an approval
// request, a file, "typing…" — goes to the owner's topic.
func TestTurnStaysInTopic(t *testing.T) {
	f := newForum(t)
	q := f.ask(t, f.topic, "question")
	ev := f.g.RenderTurn(testContext(t), f.chat(), q.ID)
	ev.Text("Let me look.")
	call := turn.ToolCall{ID: "1", Name: "bash", Summary: "make"}
	ev.ToolStarted(call)
	ev.ToolFinished(call, turn.ToolResult{Duration: time.Second})
	ev.Approval(turn.Approval{ID: "k3x9p", Tool: "bash", Summary: "rm -rf build"})
	if err := ev.File(turn.File{Name: "out.txt", Data: []byte("x")}); err != nil {
		t.Errorf("File: %v", err)
	}
	md := longAnswer()
	stream(ev, md, time.Millisecond)
	ev.Final(md)
	ev.(ender).End()
	f.g.Typing(testContext(t), f.chat())

	var methods []string
	for _, s := range f.srv.SentTo(opsForum.ID) {
		methods = append(methods, s.Method)
	}
	// The first answer, the tool line, the approval, the file, then the
	// long answer streamed and its second chunk.
	want := "sendMessage sendMessage sendMessage sendDocument sendMessage sendMessage"
	if got := strings.Join(methods, " "); got != want {
		t.Errorf("posted %s, want %s", got, want)
	}
	if f.srv.Count("sendChatAction") == 0 {
		t.Error("no typing… shown")
	}
	f.checkTopic(t, f.topic)
}

// TestSendFollowsTopic: a reply goes, every chunk of it, to the topic of
// the message it answers, which is where what answers no message (a
// notice, "typing…") goes next; a reply in General leaves the topics.
func TestSendFollowsTopic(t *testing.T) {
	f := newForum(t)
	q := f.ask(t, f.topic, "question")
	long := gateways.Reply{Text: strings.Repeat("<&>", 3000), Pre: true, ReplyTo: q.ID}
	if _, err := f.g.Send(testContext(t), f.chat(), long); err != nil {
		t.Fatal(err)
	}
	if _, err := f.g.Send(testContext(t), f.chat(), replyText("a notice")); err != nil {
		t.Fatal(err)
	}
	f.g.Typing(testContext(t), f.chat())
	if n := len(f.srv.SentTo(opsForum.ID)); n < 3 {
		t.Errorf("%d messages, want the reply's chunks and the notice", n)
	}
	f.checkTopic(t, f.topic)

	q2 := f.ask(t, f.other, "another")
	if err := f.g.SendFile(testContext(t), f.chat(), turn.File{Name: "a.txt", Data: []byte("a")}, q2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.g.Send(testContext(t), f.chat(), replyText("a notice")); err != nil {
		t.Fatal(err)
	}
	sent := f.srv.SentTo(opsForum.ID)
	for _, s := range sent[len(sent)-2:] {
		if s.Topic != f.other {
			t.Errorf("%s landed in topic %d, want %d", s.Method, s.Topic, f.other)
		}
	}

	f.srv.SetTopicClosed(opsForum.ID, telegramtest.GeneralTopic, false)
	general := f.ask(t, 0, "in General")
	if _, err := f.g.Send(testContext(t), f.chat(), gateways.Reply{Text: "answer", ReplyTo: general.ID}); err != nil {
		t.Fatal(err)
	}
	f.g.Typing(context.WithoutCancel(testContext(t)), f.chat())
	calls := f.srv.Calls("sendChatAction")
	if last := calls[len(calls)-1]; last.Params["message_thread_id"] != "" {
		t.Errorf("typing… after a reply in General went to thread %q", last.Params["message_thread_id"])
	}
	if s := f.srv.SentTo(opsForum.ID); s[len(s)-1].Topic != 0 {
		t.Errorf("the reply in General landed in topic %d", s[len(s)-1].Topic)
	}
}

// TestDecodeTopic pins the decoding rule on raw updates: only
// is_topic_message makes message_thread_id a topic; a reply chain's thread
// id, or a topic of the message replied to, is none.
func TestDecodeTopic(t *testing.T) {
	g := New(Config{Token: testToken}, nil)
	chat := mustJSON(t, opsForum)
	msg := func(fields string) string {
		return `{"message_id":42,"date":1,"chat":` + chat + `,"from":` + mustJSON(t, alice) + `,"text":"hi"` + fields + `}`
	}
	tests := []struct {
		name, raw, id string
	}{
		{"in a topic", `{"update_id":10,"message":` + msg(`,"message_thread_id":7,"is_topic_message":true`) + `}`, "42@7"},
		{"a reply chain", `{"update_id":10,"message":` + msg(`,"message_thread_id":5`) + `}`, "42"},
		{"explicitly no topic", `{"update_id":10,"message":` + msg(`,"message_thread_id":5,"is_topic_message":false`) + `}`, "42"},
		{"a topic without id", `{"update_id":10,"message":` + msg(`,"is_topic_message":true`) + `}`, "42"},
		{"replying to a topic's message", `{"update_id":10,"message":` +
			msg(`,"message_thread_id":5,"reply_to_message":{"message_id":8,"date":1,"chat":`+chat+`,"message_thread_id":7,"is_topic_message":true}`) + `}`, "42"},
		{"a press in a topic", `{"update_id":10,"callback_query":{"id":"9","from":` + mustJSON(t, alice) +
			`,"chat_instance":"1","data":"deny:x","message":` + msg(`,"message_thread_id":7,"is_topic_message":true`) + `}}`, "42@7"},
	}
	for _, tt := range tests {
		u := g.decode([]byte(tt.raw))
		if !u.ok || u.msg.ID != tt.id || u.msg.ChatID != strconv.FormatInt(opsForum.ID, 10) {
			t.Errorf("%s: ok %t, id %q, chat %s; want id %q in the plain chat", tt.name, u.ok, u.msg.ID, u.msg.ChatID, tt.id)
		}
		if cb := u.msg.Callback; cb != nil && cb.MessageID != tt.id {
			t.Errorf("%s: the press is on %q, want %q", tt.name, cb.MessageID, tt.id)
		}
	}
}

// TestParseRef: references round-trip, and what is none is refused.
func TestParseRef(t *testing.T) {
	for s, want := range map[string]msgRef{"42": {42, 0}, "42@7": {42, 7}} {
		if got, ok := parseRef(s); !ok || got != want || got.String() != s {
			t.Errorf("parseRef(%q) = %+v, %t; want %+v", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "x", "42@", "42@0", "42@-1", "42@x", "@7"} {
		if r, ok := parseRef(s); ok {
			t.Errorf("parseRef(%q) = %+v, want refused", s, r)
		}
	}
}

// TestHubAnswersInTopic: through the Hub, a group latched to its owner is
// latched in every topic (the chat is the group), and each answer goes to
// the topic its command came from, all of a long one, with General closed.
func TestHubAnswersInTopic(t *testing.T) {
	f := newLockFixture(t)
	f.latchTo(t, alice)
	builds := f.srv.CreateTopic(opsForum, bob, "Builds")
	deploys := f.srv.CreateTopic(opsForum, bob, "Deploys")
	f.srv.SetTopicClosed(opsForum.ID, telegramtest.GeneralTopic, true)
	f.dispatch(t)
	long := "!echo " + strings.Repeat("<", 1500) // its output is two messages
	f.srv.Deliver(telegramtest.Incoming{Chat: opsForum, From: &alice, Topic: builds, Text: long})
	f.srv.Deliver(telegramtest.Incoming{Chat: opsForum, From: &alice, Topic: deploys, Text: "!echo deployed"})
	if _, err := f.srv.WaitSent(testContext(t), func(s telegramtest.Sent) bool {
		return strings.Contains(s.Plain, "ran echo deployed")
	}); err != nil {
		t.Fatalf("waiting for the second answer: %v", err)
	}
	var got []string
	for _, s := range f.srv.SentTo(opsForum.ID) {
		got = append(got, strconv.Itoa(s.Topic))
	}
	want := []string{strconv.Itoa(builds), strconv.Itoa(builds), strconv.Itoa(deploys)}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("answers landed in topics %v, want %v", got, want)
	}
	if cmds := f.commands(); len(cmds) != 2 {
		t.Errorf("shell ran %q, want both commands", cmds)
	}
}
