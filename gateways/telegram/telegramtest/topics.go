package telegramtest

import (
	"fmt"
	"net/http"
	"time"
)

// Forum topics, as the Bot API has them since 6.3. A forum is a supergroup
// with is_forum set; its topics are threads whose id (message_thread_id) is
// the id of the service message that created the topic. Every message in a
// topic carries message_thread_id and is_topic_message, and one that is no
// explicit reply carries the topic's creation message as reply_to_message.
// The General topic is no topic: its messages carry neither field, and a
// message the bot sends without message_thread_id that is no reply lands
// there. A reply in General, or in any supergroup that is no forum, carries
// message_thread_id too (the id of the first message of its reply chain)
// but not is_topic_message: that id names no topic, and sending to it fails
// with "message thread not found".
//
// A closed topic (General included) takes no messages from the bot, which
// in the fake is no administrator: sends there fail with TOPIC_CLOSED. A
// deleted topic is gone with its messages: a send naming it fails with
// "message thread not found". The
// General topic's id is 1 in a forum, and message ids there start after
// it; message_thread_id 1 is refused as "message thread not found", as the
// Bot API has been reported to do (General is reached by leaving it out).

// GeneralTopic stands for a forum's General topic in SetTopicClosed.
const GeneralTopic = 0

// topic is the state of one forum topic.
type topic struct {
	name   string
	closed bool
}

// forumTopicCreated is the service message that opens a topic.
type forumTopicCreated struct {
	Name      string `json:"name"`
	IconColor int    `json:"icon_color"`
}

// topicIconColor is the first of the colours Telegram lets a topic have.
const topicIconColor = 0x6FB9F0

// Forum returns a forum supergroup (is_forum): a Supergroup split into
// topics (see CreateTopic).
func Forum(id int64, title string) Chat {
	c := Supergroup(id, title)
	c.IsForum = true
	return c
}

// CreateTopic opens a topic in a forum, as by creator, and returns its
// message_thread_id: the id of its forum_topic_created service message.
// It makes no update. It panics if chat is not a forum.
func (s *Server) CreateTopic(chat Chat, creator User, name string) (threadID int) {
	if !chat.IsForum {
		panic("telegramtest: CreateTopic in a chat that is not a forum")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chatLocked(chat)
	if c.topics == nil {
		c.topics = map[int]*topic{}
	}
	from := creator
	m := c.add(&message{from: &from, date: time.Now().Unix(), topicCreated: &forumTopicCreated{Name: name, IconColor: topicIconColor}})
	m.topic = m.id
	c.topics[m.id] = &topic{name: name}
	s.notifyLocked()
	return m.id
}

// SetTopicClosed closes or reopens a topic of a forum (GeneralTopic for
// General), as an administrator does. While it is closed the bot's sends
// there fail with "Bad Request: TOPIC_CLOSED". It panics on an unknown
// chat or topic.
func (s *Server) SetTopicClosed(chatID int64, threadID int, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil || !c.chat.IsForum {
		panic(fmt.Sprintf("telegramtest: chat %d is not a known forum", chatID))
	}
	if threadID == GeneralTopic {
		c.generalClosed = closed
		return
	}
	t := c.topics[threadID]
	if t == nil {
		panic(fmt.Sprintf("telegramtest: forum %d has no topic %d", chatID, threadID))
	}
	t.closed = closed
}

// DeleteTopic deletes a topic of a forum with all its messages, as an
// administrator does. Sends that name it by message_thread_id then fail
// with "Bad Request: message thread not found", as on Telegram. It panics
// on an unknown chat or topic (General cannot be deleted).
func (s *Server) DeleteTopic(chatID int64, threadID int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil || !c.chat.IsForum || c.topics[threadID] == nil {
		panic(fmt.Sprintf("telegramtest: forum %d has no topic %d", chatID, threadID))
	}
	delete(c.topics, threadID)
	for id, m := range c.messages {
		if m.topic == threadID {
			delete(c.messages, id)
		}
	}
}

// topicOf is the topic a user's message lands in: the one it was
// sent in, else that of the message it replies to. It panics on a topic
// the chat does not have, a mistake of the test's.
func (c *chatState) topicOf(in Incoming) int {
	if in.Topic != 0 {
		if !c.chat.IsForum || c.topics[in.Topic] == nil {
			panic(fmt.Sprintf("telegramtest: chat %d has no forum topic %d", c.chat.ID, in.Topic))
		}
		return in.Topic
	}
	if r := c.messages[in.ReplyTo]; r != nil && c.chat.IsForum {
		return r.topic
	}
	return 0
}

// sendTopic decides where a message the bot sends lands, as the Bot API
// does: in the topic message_thread_id names, which must be an open topic
// of a forum; without one, in the topic of the message it replies to
// (replyTo, already checked by replyTarget); else in General. A closed
// topic or a closed General refuses it.
func (c *chatState) sendTopic(p params, replyTo int64) (int, *apiError) {
	thread, aerr := p.int("message_thread_id", 0)
	if aerr != nil {
		return 0, aerr
	}
	if thread != 0 {
		t := c.topics[int(thread)]
		switch {
		case !c.chat.IsForum || t == nil:
			return 0, badRequest("message thread not found")
		case t.closed:
			return 0, topicClosed()
		}
		return int(thread), nil
	}
	if !c.chat.IsForum {
		return 0, nil
	}
	topic := 0
	if r := c.messages[int(replyTo)]; r != nil {
		topic = r.topic
	}
	if t := c.topics[topic]; t != nil && t.closed || topic == 0 && c.generalClosed {
		return 0, topicClosed()
	}
	return topic, nil
}

// actionTopic checks the message_thread_id of sendChatAction: if given,
// it must name a topic of a forum.
func (c *chatState) actionTopic(p params) *apiError {
	thread, aerr := p.int("message_thread_id", 0)
	if aerr != nil {
		return aerr
	}
	if thread != 0 && (!c.chat.IsForum || c.topics[int(thread)] == nil) {
		return badRequest("message thread not found")
	}
	return nil
}

func topicClosed() *apiError {
	return &apiError{code: http.StatusBadRequest, desc: "Bad Request: TOPIC_CLOSED"}
}

// threadFieldsLocked sets what a message says about its thread:
// message_thread_id and is_topic_message for a message in a topic, with its
// topic's creation message as reply_to_message unless it replies to
// another; for a reply outside topics in a supergroup, message_thread_id
// alone, the first message of its reply chain.
func (s *Server) threadFieldsLocked(c *chatState, m *message, w *wireMessage, withReply bool) {
	switch {
	case m.topic != 0:
		w.MessageThreadID, w.IsTopicMessage = m.topic, true
		if root := c.messages[m.topic]; withReply && m.replyTo == 0 && m.id != m.topic && root != nil {
			w.ReplyToMessage = s.wireLocked(c, root, false)
		}
	case m.replyTo != 0 && c.chat.Type == "supergroup":
		root := m
		for seen := 0; seen < 1000; seen++ { // a chain of replies ends; the bound is a guard
			up := c.messages[root.replyTo]
			if up == nil {
				break
			}
			root = up
		}
		if root != m {
			w.MessageThreadID = root.id
		}
	}
}

// threadParam is the message_thread_id a send asked for, 0 if none.
func threadParam(p params) int {
	n, _ := p.int("message_thread_id", 0)
	return int(n)
}
