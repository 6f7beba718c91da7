package telegram

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// Forum topics. A forum supergroup (is_forum) splits one chat into topics,
// and a message the bot sends there without message_thread_id that is not
// a reply lands in the General topic — or fails, if General is closed. So
// every send, file and "typing…" in such a chat carries the topic it
// belongs in.
//
// Where the topic lives. gateways.Message.ChatID stays the plain chat id:
// the latch, the pairing guard, the Hub's queues and the agent's session
// are per chat, and a group latched from one topic is latched in all of
// them — the owner may move between topics, and the topic only decides
// where latch answers. With the topic in ChatID ("-100123/7") the owner's
// messages from another topic would be dropped as another chat's.
//
// The topic rides the message reference instead: the ID of a message in a
// topic (gateways.Message.ID, Callback.MessageID) is "<message id>@<thread
// id>", and the Hub hands it back as the message to reply to (Reply.ReplyTo,
// RenderTurn's replyTo). An answer so goes to the topic of the message it
// answers, also for a message stored before a restart, and a stranger
// posting in another topic cannot move it. What names no message (Typing,
// a Send without ReplyTo such as a notice) goes to the topic latch last
// answered in, remembered per chat and kept in the stored cursor across
// restarts (see topicstate.go).
//
// A topic can refuse a post: closed (TOPIC_CLOSED, General too) or
// deleted ("message thread not found", TOPIC_DELETED). A Send then tries
// the topic latch last answered in, then General, each once (placement),
// rather than lose a notice that one of them would take.

// msgRef is a message as the adapter names it to the Hub.
type msgRef struct {
	id    int // message_id
	topic int // message_thread_id of its forum topic; 0: none
}

// String is the reference: "42", or "42@7" for message 42 in topic 7.
func (r msgRef) String() string {
	if r.topic == 0 {
		return strconv.Itoa(r.id)
	}
	return strconv.Itoa(r.id) + "@" + strconv.Itoa(r.topic)
}

// parseRef reads a reference String made (a bare id is one without topic).
func parseRef(s string) (msgRef, bool) {
	id, topic, hasTopic := strings.Cut(s, "@")
	var r msgRef
	var err error
	if r.id, err = strconv.Atoi(id); err != nil {
		return msgRef{}, false
	}
	if hasTopic {
		if r.topic, err = strconv.Atoi(topic); err != nil || r.topic <= 0 {
			return msgRef{}, false
		}
	}
	return r, true
}

// target is where a call posts: a chat and, in a forum, a topic.
type target struct {
	chat  int64
	topic int // message_thread_id; 0: none (General, or not a forum)
}

// key names the target for the typing gate: "typing…" shows per topic.
func (t target) key() string {
	if t.topic == 0 {
		return strconv.FormatInt(t.chat, 10)
	}
	return strconv.FormatInt(t.chat, 10) + "@" + strconv.Itoa(t.topic)
}

// replyTarget is where an answer to the message ref goes: ref's topic,
// which becomes the chat's topic for what names no message.
func (g *Gateway) replyTarget(chat int64, ref msgRef) target {
	to := target{chat: chat, topic: ref.topic}
	g.setTopic(to)
	return to
}

// chatTarget is where a post that answers no message goes: the topic latch
// last answered in, if any.
func (g *Gateway) chatTarget(chat int64) target {
	g.mu.Lock()
	defer g.mu.Unlock()
	return target{chat: chat, topic: g.topics.get(chat)}
}

// targetOf is replyTarget for a reference given as text ("" for none),
// chatTarget without one. ok is false for text that is no reference.
func (g *Gateway) targetOf(chat int64, reply string) (to target, ref msgRef, ok bool) {
	if reply == "" {
		return g.chatTarget(chat), msgRef{}, true
	}
	if ref, ok = parseRef(reply); !ok {
		return target{}, msgRef{}, false
	}
	return g.replyTarget(chat, ref), ref, true
}

// placement is where one Send posts, and where it may go instead should
// Telegram refuse the topic: each spare once, in order, so it cannot loop.
type placement struct {
	to    target
	spare []target
	moved bool // to is a spare
}

// placementOf is targetOf with the spares of a forum: the topic latch last
// answered in before this post, then General. In a chat that is no forum
// both are to itself, so there are none.
func (g *Gateway) placementOf(chat int64, reply string) (placement, msgRef, bool) {
	last := g.chatTarget(chat)
	to, ref, ok := g.targetOf(chat, reply)
	p := placement{to: to}
	for _, t := range []target{last, {chat: chat}} {
		if t != to && !slices.Contains(p.spare, t) {
			p.spare = append(p.spare, t)
		}
	}
	return p, ref, ok
}

// move goes to the next spare if err is Telegram refusing the topic, and
// reports whether it did.
func (p *placement) move(err error) bool {
	if len(p.spare) == 0 || !topicRefused(err) {
		return false
	}
	p.to, p.spare, p.moved = p.spare[0], p.spare[1:], true
	return true
}

// topicRefused reports whether Telegram refused a post for its forum
// topic: closed (TOPIC_CLOSED; General too), or deleted ("message thread
// not found" when message_thread_id names it, TOPIC_DELETED).
func topicRefused(err error) bool {
	var apiErr *tgbotapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest {
		return false
	}
	m := strings.ToLower(apiErr.Message)
	return strings.Contains(m, "topic_closed") || strings.Contains(m, "topic_deleted") ||
		strings.Contains(m, "message thread not found")
}

// topicFields are what Bot API 6.3 added to a message about its topic.
type topicFields struct {
	ThreadID int  `json:"message_thread_id"`
	IsTopic  bool `json:"is_topic_message"`
}

// topic is the forum topic the fields name, or 0. message_thread_id alone
// is no topic: Telegram sets it on any reply in a supergroup, to the first
// message of the reply chain, and sending to it fails with "message thread
// not found".
func (f *topicFields) topic() int {
	if f == nil || !f.IsTopic || f.ThreadID <= 0 || f.ThreadID > maxMessageID {
		return 0
	}
	return f.ThreadID
}

// maxMessageID bounds a message_thread_id: message ids are 32-bit.
const maxMessageID = 1<<31 - 1

// updateTopic reads the forum topic of an update's message, or of the
// message a button press is on (0 if none). go-telegram-bot-api v5.5.1
// predates topics, so it is read from the raw update; the cheap search
// spares the decode for every update outside topics.
func updateTopic(raw []byte) int {
	if !bytes.Contains(raw, []byte(`"is_topic_message"`)) {
		return 0
	}
	var u struct {
		Message  *topicFields `json:"message"`
		Callback *struct {
			Message *topicFields `json:"message"`
		} `json:"callback_query"`
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		return 0
	}
	if u.Callback != nil {
		return u.Callback.Message.topic()
	}
	return u.Message.topic()
}
