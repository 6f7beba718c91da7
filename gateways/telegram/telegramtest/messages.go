package telegramtest

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxTextUnits is Telegram's message length limit, in UTF-16 code units
// after entity parsing.
const maxTextUnits = 4096

type chatState struct {
	chat     Chat
	nextID   int
	messages map[int]*message
	// users lists the ids of the users' messages still kept, oldest first,
	// while Server.KeepUserMessages bounds them.
	users []int
	// topics are a forum's topics by thread id (see topics.go).
	topics        map[int]*topic
	generalClosed bool
}

type message struct {
	id      int
	fromBot bool
	from    *User
	// senderChat is the chat a user's message was sent on behalf of (see
	// Incoming.SenderChat); from then holds Telegram's placeholder.
	senderChat    *Chat
	autoForward   bool
	forwardedFrom *User
	date          int64
	editDate      int64
	text          string
	caption       string
	entities      []Entity
	replyTo       int
	// topic is the forum topic the message is in (its thread id), 0 for
	// General or a chat that is no forum.
	topic        int
	topicCreated *forumTopicCreated
	keyboard     [][]Button
	document     *Document
	photo        []PhotoSize
	voice        *Voice
	audio        *Audio
	media        media
}

type msgKey struct {
	chat int64
	id   int
}

func (c *chatState) add(m *message) *message {
	c.nextID++
	m.id = c.nextID
	c.messages[m.id] = m
	return m
}

// addUser adds a user's message and forgets the oldest beyond keep (0:
// keep all).
func (c *chatState) addUser(m *message, keep int) *message {
	c.add(m)
	if keep <= 0 {
		return m
	}
	c.users = append(c.users, m.id)
	for len(c.users) > keep {
		delete(c.messages, c.users[0])
		c.users = c.users[1:]
	}
	return m
}

// chatLocked returns the state of chat, creating it on first sight.
func (s *Server) chatLocked(chat Chat) *chatState {
	c := s.chats[chat.ID]
	if c == nil {
		c = &chatState{messages: map[int]*message{}}
		if chat.IsForum {
			// Message id 1 stands for the General topic in a forum
			// (message_thread_id 1 is no topic): ids start after it.
			c.nextID = 1
		}
		s.chats[chat.ID] = c
	}
	c.chat = chat
	return c
}

// AddChat makes a chat known without a message in it. Sending to a chat the
// server has never seen fails with "chat not found", as on Telegram.
func (s *Server) AddChat(chat Chat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chatLocked(chat)
}

type wireMessage struct {
	MessageID          int                `json:"message_id"`
	MessageThreadID    int                `json:"message_thread_id,omitempty"`
	IsTopicMessage     bool               `json:"is_topic_message,omitempty"`
	From               *User              `json:"from,omitempty"`
	SenderChat         *Chat              `json:"sender_chat,omitempty"`
	Chat               Chat               `json:"chat"`
	IsAutomaticForward bool               `json:"is_automatic_forward,omitempty"`
	ForwardOrigin      *origin            `json:"forward_origin,omitempty"`
	Date               int64              `json:"date"`
	EditDate           int64              `json:"edit_date,omitempty"`
	ReplyToMessage     *wireMessage       `json:"reply_to_message,omitempty"`
	Text               string             `json:"text,omitempty"`
	Entities           []Entity           `json:"entities,omitempty"`
	Caption            string             `json:"caption,omitempty"`
	Document           *Document          `json:"document,omitempty"`
	Photo              []PhotoSize        `json:"photo,omitempty"`
	Voice              *Voice             `json:"voice,omitempty"`
	Audio              *Audio             `json:"audio,omitempty"`
	ReplyMarkup        *markup            `json:"reply_markup,omitempty"`
	ForumTopicCreated  *forumTopicCreated `json:"forum_topic_created,omitempty"`
	media
}

// origin is a MessageOrigin of the kind "user": who wrote a forwarded
// message, and when.
type origin struct {
	Type       string `json:"type"`
	Date       int64  `json:"date"`
	SenderUser *User  `json:"sender_user,omitempty"`
}

func (s *Server) wireLocked(c *chatState, m *message, withReply bool) *wireMessage {
	w := &wireMessage{
		MessageID: m.id, From: m.from, SenderChat: m.senderChat, Chat: c.chat,
		IsAutomaticForward: m.autoForward, Date: m.date, EditDate: m.editDate,
		Text: m.text, Entities: m.entities, Caption: m.caption,
		Document: m.document, Photo: m.photo, Voice: m.voice, Audio: m.audio, media: m.media,
	}
	if m.keyboard != nil {
		w.ReplyMarkup = &markup{InlineKeyboard: m.keyboard}
	}
	if m.forwardedFrom != nil {
		w.ForwardOrigin = &origin{Type: "user", Date: m.date, SenderUser: m.forwardedFrom}
	}
	if m.fromBot {
		bot := s.bot
		w.From = &bot
	}
	if r := c.messages[m.replyTo]; withReply && r != nil {
		w.ReplyToMessage = s.wireLocked(c, r, false)
	}
	w.ForumTopicCreated = m.topicCreated
	s.threadFieldsLocked(c, m, w, withReply)
	return w
}

// resolveChatLocked finds the chat named by chat_id (an id or @username).
func (s *Server) resolveChatLocked(p params) (*chatState, *apiError) {
	v := strings.TrimSpace(p["chat_id"])
	if v == "" {
		return nil, badRequest("chat_id is empty")
	}
	if name, ok := strings.CutPrefix(v, "@"); ok {
		for _, c := range s.chats {
			if strings.EqualFold(c.chat.Username, name) && c.chat.Type != "private" {
				return c, nil
			}
		}
		return nil, badRequest("chat not found")
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || s.chats[id] == nil {
		return nil, badRequest("chat not found")
	}
	return s.chats[id], nil
}

// SetBotUsername changes the username getMe reports.
func (s *Server) SetBotUsername(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bot.Username = name
}

func (s *Server) getMe(context.Context, params) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return struct {
		User
		CanJoinGroups           bool `json:"can_join_groups"`
		CanReadAllGroupMessages bool `json:"can_read_all_group_messages"`
		SupportsInlineQueries   bool `json:"supports_inline_queries"`
	}{User: s.bot, CanJoinGroups: true, CanReadAllGroupMessages: s.privacyOff}, nil
}

func (s *Server) sendMessage(_ context.Context, p params) (any, *apiError) {
	replyTo, aerr := p.int("reply_to_message_id", 0)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.resolveChatLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	plain, ents, aerr := render(p["text"], p["parse_mode"])
	if aerr != nil {
		return nil, aerr
	}
	kb, aerr := inlineKeyboard(p)
	if aerr != nil {
		return nil, aerr
	}
	if replyTo, aerr = replyTarget(c, p, replyTo); aerr != nil {
		return nil, aerr
	}
	topic, aerr := c.sendTopic(p, replyTo)
	if aerr != nil {
		return nil, aerr
	}
	now := time.Now()
	m := c.add(&message{fromBot: true, date: now.Unix(), text: plain, entities: ents, replyTo: int(replyTo), topic: topic, keyboard: kb})
	s.sentIndex[msgKey{c.chat.ID, m.id}] = len(s.sent)
	s.sent = append(s.sent, Sent{
		Method: "sendMessage", ChatID: c.chat.ID, MessageID: m.id, Text: p["text"], Plain: plain,
		Entities: ents, ParseMode: p["parse_mode"], ReplyTo: int(replyTo), ThreadID: threadParam(p), Topic: topic,
		Params: p.clone(), Keyboard: kb, Time: now,
	})
	s.notifyLocked()
	return s.wireLocked(c, m, true), nil
}

func (s *Server) editMessageText(_ context.Context, p params) (any, *apiError) {
	if p["inline_message_id"] != "" {
		return nil, badRequest("MESSAGE_ID_INVALID")
	}
	id, aerr := p.int("message_id", 0)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.resolveChatLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	m, aerr := editable(c, id)
	if aerr != nil {
		return nil, aerr
	}
	if m.document != nil || m.photo != nil {
		return nil, badRequest("there is no text in the message to edit")
	}
	plain, ents, aerr := render(p["text"], p["parse_mode"])
	if aerr != nil {
		return nil, aerr
	}
	// As on Telegram, an edit without reply_markup removes the keyboard.
	kb, aerr := inlineKeyboard(p)
	if aerr != nil {
		return nil, aerr
	}
	if plain == m.text && slices.Equal(ents, m.entities) && sameKeyboard(kb, m.keyboard) {
		return nil, notModified()
	}
	now := time.Now()
	m.text, m.entities, m.keyboard, m.editDate = plain, ents, kb, now.Unix()
	if i, ok := s.sentIndex[msgKey{c.chat.ID, m.id}]; ok {
		s.sent[i].Edits = append(s.sent[i].Edits, Edit{Method: "editMessageText", Text: p["text"], Plain: plain,
			ParseMode: p["parse_mode"], Keyboard: kb, Time: now})
		s.sent[i].Keyboard = kb
	}
	s.notifyLocked()
	return s.wireLocked(c, m, true), nil
}

// render validates a message text the way sendMessage does and returns what
// the user would see.
func render(text, parseMode string) (string, []Entity, *apiError) {
	if !utf8.ValidString(text) {
		return "", nil, badRequest("text must be encoded in UTF-8")
	}
	plain, ents := text, []Entity(nil)
	switch strings.ToLower(parseMode) {
	case "":
	case "html":
		var err error
		if plain, ents, err = parseHTML(text); err != nil {
			return "", nil, badRequest("can't parse entities: %v", err)
		}
	case "markdown", "markdownv2":
		// Accepted unvalidated: latch sends only plain text and HTML.
	default:
		return "", nil, badRequest("unsupported parse_mode")
	}
	plain, ents = trimText(plain, ents)
	switch {
	case plain == "":
		return "", nil, badRequest("message text is empty")
	case utf16Len(plain) > maxTextUnits:
		return "", nil, badRequest("message is too long")
	}
	return plain, ents, nil
}

var chatActions = []string{
	"typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
	"upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note",
}

func (s *Server) sendChatAction(_ context.Context, p params) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, aerr := s.resolveChatLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := c.actionTopic(p); aerr != nil {
		return nil, aerr
	}
	if !slices.Contains(chatActions, p["action"]) {
		return nil, badRequest("wrong parameter action in request")
	}
	return true, nil
}

var commandName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

func (s *Server) setMyCommands(_ context.Context, p params) (any, *apiError) {
	var cmds []Command
	if err := json.Unmarshal([]byte(p["commands"]), &cmds); err != nil {
		return nil, badRequest("can't parse commands JSON object")
	}
	if len(cmds) > 100 {
		return nil, badRequest("too many commands specified")
	}
	for _, c := range cmds {
		if !commandName.MatchString(c.Command) {
			return nil, badRequest("BOT_COMMAND_INVALID")
		}
		if n := utf8.RuneCountInString(strings.TrimSpace(c.Description)); n < 1 || n > 256 {
			return nil, badRequest("BOT_COMMAND_DESCRIPTION_INVALID")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands = cmds
	s.notifyLocked()
	return true, nil
}

func (s *Server) getMyCommands(context.Context, params) (any, *apiError) {
	return s.Commands(), nil
}

// Commands is the command list the bot last set with setMyCommands.
func (s *Server) Commands() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Command{}, s.commands...)
}

func (s *Server) answerCallbackQuery(_ context.Context, p params) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	answered, ok := s.callbacks[p["callback_query_id"]]
	if !ok || answered {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	s.callbacks[p["callback_query_id"]] = true
	s.notifyLocked()
	return true, nil
}

// CallbackAnswered reports whether the bot answered the callback query.
func (s *Server) CallbackAnswered(queryID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.callbacks[queryID]
}
