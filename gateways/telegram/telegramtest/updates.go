package telegramtest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf16"
)

// queued is one unconfirmed update.
type queued struct {
	id  int
	typ string // "message", "callback_query", … ("" if unknown)
	raw json.RawMessage
}

// poller is the getUpdates request currently in progress; closing kick
// terminates it with 409 Conflict, described by why (set before closing).
type poller struct {
	kick chan struct{}
	why  string
}

// Deliver pushes an inbound message, as if a user had sent it. Messages in
// channels arrive as channel_post updates, all others as message updates;
// a group message that privacy mode keeps from the bot (see
// SetPrivacyMode) makes none, and UpdateID is 0.
func (s *Server) Deliver(in Incoming) Delivered {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chatLocked(in.Chat)
	date := in.Date
	if date.IsZero() {
		date = time.Now()
	}
	from, sender := sentBy(in)
	doc := in.Document
	if doc == nil && in.Animation != nil {
		doc = documentOf(in.Animation)
	}
	m := c.addUser(&message{from: from, senderChat: sender, autoForward: in.AutomaticForward, forwardedFrom: in.ForwardedFrom,
		date: date.Unix(), text: in.Text, caption: in.Caption, replyTo: in.ReplyTo, topic: c.topicOf(in),
		document: doc, photo: slices.Clone(in.Photo), voice: in.Voice, audio: in.Audio, media: mediaOf(in)}, s.keepUser)
	m.entities = commandEntities(in.Text)
	if s.hiddenLocked(c, m) {
		return Delivered{MessageID: m.id}
	}
	typ := "message"
	if in.Chat.Type == "channel" {
		typ = "channel_post"
	}
	id := s.enqueueLocked(typ, map[string]any{typ: s.wireLocked(c, m, true)})
	return Delivered{UpdateID: id, MessageID: m.id}
}

// sentBy is what an update says about who sent in: from and sender_chat.
// Copies are returned, as the caller may reuse its values.
func sentBy(in Incoming) (from *User, sender *Chat) {
	switch {
	case in.SenderChat != nil:
		c := *in.SenderChat
		sender = &c
	case in.From == nil:
		c := in.Chat
		sender = &c
	default:
		u := *in.From
		return &u, nil
	}
	// On behalf of a chat: the placeholder Telegram puts in from, except in
	// channels, where from is left out.
	var u User
	switch {
	case in.Chat.Type == "channel":
		return nil, sender
	case in.AutomaticForward:
		u = ServiceUser()
	case sender.ID == in.Chat.ID:
		u = GroupAnonymousBot()
	default:
		u = ChannelBot()
	}
	return &u, sender
}

// SendText pushes a text message from a user in a chat and returns its
// update id (0 if privacy mode keeps it from the bot). Use Private, Group or
// Supergroup for the chat.
func (s *Server) SendText(chat Chat, from User, text string) (updateID int) {
	return s.Deliver(Incoming{Chat: chat, From: &from, Text: text}).UpdateID
}

// SendCallback pushes a callback query (an inline button press) on the bot's
// message messageID in chat and returns its update id and query id.
func (s *Server) SendCallback(chat Chat, from User, messageID int, data string) (updateID int, queryID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chatLocked(chat)
	queryID = fmt.Sprintf("%d", 4_000_000+len(s.callbacks))
	s.callbacks[queryID] = false
	q := map[string]any{
		"id":            queryID,
		"from":          from,
		"chat_instance": fmt.Sprintf("%d", chat.ID),
		"data":          data,
	}
	if m := c.messages[messageID]; m != nil {
		q["message"] = s.wireLocked(c, m, false)
	}
	return s.enqueueLocked("callback_query", map[string]any{"callback_query": q}), queryID
}

// PushUpdate queues a raw update, for tests of malformed or unusual updates.
// raw must be valid JSON. If it is an object its update_id is set to the next
// id; anything else is queued verbatim (and can only be confirmed past).
func (s *Server) PushUpdate(raw json.RawMessage) (updateID int) {
	if !json.Valid(raw) {
		panic("telegramtest: PushUpdate needs valid JSON")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		id := s.nextUpdateID
		s.nextUpdateID++
		s.queue = append(s.queue, queued{id: id, raw: slices.Clone(raw)})
		s.notifyLocked()
		return id
	}
	typ := ""
	for k := range obj {
		if k != "update_id" {
			typ = k
		}
	}
	fields := make(map[string]any, len(obj))
	for k, v := range obj {
		fields[k] = v
	}
	return s.enqueueLocked(typ, fields)
}

func (s *Server) enqueueLocked(typ string, fields map[string]any) int {
	id := s.nextUpdateID
	s.nextUpdateID++
	fields["update_id"] = id
	raw, err := json.Marshal(fields)
	if err != nil {
		panic(fmt.Sprintf("telegramtest: marshal update: %v", err))
	}
	s.queue = append(s.queue, queued{id: id, typ: typ, raw: raw})
	s.notifyLocked()
	return id
}

// commandEntities marks a leading /command the way Telegram does.
func commandEntities(text string) []Entity {
	if !strings.HasPrefix(text, "/") {
		return nil
	}
	cmd, _, _ := strings.Cut(text, " ")
	cmd, _, _ = strings.Cut(cmd, "\n")
	return []Entity{{Type: "bot_command", Offset: 0, Length: len(utf16.Encode([]rune(cmd)))}}
}

// futureSlack is how far past the queue's tail (the next update's id) tdlib
// still takes a getUpdates offset (TQueue::get).
const futureSlack = 10

// SkipWeek simulates a week without updates. Telegram then forgets the
// bot's update queue, and the next update_id is "chosen randomly instead of
// sequentially" (Bot API, Update): tdlib draws it from 2,000,001 to
// 1,000,000,000, so about half the time below the ids before. The fake
// always picks it below, at random in the lower half of the ids used so
// far, so that a client that keeps its offset from before misses whatever
// comes next unless it copes: getUpdates with that offset is answered from
// the queue's head, as on Telegram. Pending updates are dropped (Telegram
// keeps them for 24 hours) and ConfirmedOffset starts again from 0. It
// returns the id the next update will get.
func (s *Server) SkipWeek() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = nil
	s.confirmed = 0
	s.nextUpdateID = 1 + rand.IntN(max(1, s.nextUpdateID/2))
	s.notifyLocked()
	return s.nextUpdateID
}

// ConfirmedOffset is the highest offset a getUpdates call has confirmed (0
// before any, and after SkipWeek).
func (s *Server) ConfirmedOffset() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// Pending is the number of updates not yet confirmed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Polling reports whether a getUpdates request is in progress (registered
// as the bot's poller, typically waiting in a long poll).
func (s *Server) Polling() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poll != nil
}

// AllowedUpdates is the allowed_updates list last given to getUpdates.
func (s *Server) AllowedUpdates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.allowed)
}

// confirmLocked applies a getUpdates offset: a positive offset forgets every
// update below it; a negative one keeps only the last -offset updates.
func (s *Server) confirmLocked(offset int) {
	switch {
	case offset > 0:
		i := 0
		for i < len(s.queue) && s.queue[i].id < offset {
			i++
		}
		s.queue = s.queue[i:]
		s.confirmed = max(s.confirmed, offset)
	case offset < 0 && len(s.queue) > -offset:
		s.queue = s.queue[len(s.queue)+offset:]
		s.confirmed = max(s.confirmed, s.queue[0].id)
	}
}

// filterLocked drops queued updates of a type the bot did not ask for
// (Telegram never queues them).
func (s *Server) filterLocked() {
	if len(s.allowed) > 0 {
		s.queue = slices.DeleteFunc(s.queue, func(q queued) bool {
			return q.typ != "" && !slices.Contains(s.allowed, q.typ)
		})
	}
}

// collectLocked returns up to limit deliverable updates, dropping those of a
// type the bot did not ask for (Telegram never queues them).
func (s *Server) collectLocked(limit int) []json.RawMessage {
	s.filterLocked()
	var out []json.RawMessage
	for _, q := range s.queue {
		if len(out) == limit {
			break
		}
		out = append(out, q.raw)
	}
	return out
}

func (s *Server) getUpdates(ctx context.Context, p params) (any, *apiError) {
	offset, err := p.int("offset", 0)
	if err != nil {
		return nil, err
	}
	limit, err := p.int("limit", 100)
	if err != nil {
		return nil, err
	}
	timeout, err := p.int("timeout", 0)
	if err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), 100)
	timeout = min(max(timeout, 0), 3600)
	var allowed []string
	if v := p["allowed_updates"]; v != "" && json.Unmarshal([]byte(v), &allowed) != nil {
		return nil, badRequest("can't parse allowed updates")
	}

	me := &poller{kick: make(chan struct{})}
	s.mu.Lock()
	if s.hook.url != "" {
		s.mu.Unlock()
		return nil, &apiError{code: http.StatusConflict, desc: conflictHook}
	}
	if s.poll != nil {
		close(s.poll.kick)
	}
	s.poll = me
	if p["allowed_updates"] != "" {
		s.allowed = allowed
	}
	if offset > int64(s.nextUpdateID)+futureSlack {
		// tdlib refuses an offset this far past the queue's tail
		// ("Specified from_id is in the future") and telegram-bot-api then
		// reads from the queue's head: nothing is confirmed. A client sees
		// this after the ids started again lower (see SkipWeek).
		offset = 0
	}
	s.confirmLocked(int(offset))
	s.notifyLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.poll == me {
			s.poll = nil
			s.notifyLocked()
		}
		s.mu.Unlock()
	}()
	return s.longPoll(ctx, me, int(limit), time.Duration(timeout)*time.Second)
}

// longPoll waits until updates are deliverable or the wait ends.
func (s *Server) longPoll(ctx context.Context, me *poller, limit int, wait time.Duration) (any, *apiError) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	expired := wait <= 0
	for {
		s.mu.Lock()
		if s.instantEmpty {
			s.mu.Unlock()
			return json.RawMessage("[]"), nil
		}
		batch := s.collectLocked(limit)
		changed := s.changes.C()
		s.mu.Unlock()
		if len(batch) > 0 || expired {
			return rawArray(batch), nil
		}
		select {
		case <-changed:
		case <-timer.C:
			expired = true
		case <-me.kick:
			return nil, &apiError{code: http.StatusConflict, desc: cmp.Or(me.why, conflictPoll)}
		case <-ctx.Done():
			return nil, &apiError{code: http.StatusBadRequest, desc: "Bad Request: request cancelled"}
		case <-s.done:
			expired = true
		}
	}
}

func rawArray(items []json.RawMessage) json.RawMessage {
	if len(items) == 0 {
		return json.RawMessage("[]")
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return json.RawMessage(b.String())
}
