package discordtest

import (
	"regexp"
	"slices"
	"time"
)

// Post is an inbound message a test sends as a user.
type Post struct {
	Author User
	// ChannelID is where it goes: "" is the author's DM with the bot; a
	// guild channel is created on first use.
	ChannelID string
	GuildID   string
	Content   string
	Files     []File
	// Type is the message type; 0 is an ordinary message.
	Type int
	// Flags are the message's flags (FlagVoiceMessage: its one file is
	// a voice message).
	Flags int
	// Stickers are sent with the message (Discord's sticker_items).
	Stickers []Sticker
	// Poll makes the message a poll; Discord sends one without content.
	Poll *Poll
	// Forward makes the message a forward of another, which arrives as
	// Discord sends it: a message_reference of type 1 (FORWARD) and the
	// original in message_snapshots. Discord's forwards have no content
	// of their own; a test may set Content anyway.
	Forward *Snapshot
	// Offline keeps the message out of the gateway: it only lands in the
	// channel's history, as if no session had been there to receive it.
	Offline bool
}

// SendDM posts text from u into u's DM with the bot, with files attached,
// and dispatches it to the bot's session.
func (s *Server) SendDM(u User, text string, files ...File) Message {
	return s.Post(Post{Author: u, Content: text, Files: files})
}

// SendGuildMessage posts text from u into a text channel of a guild
// (created on first use). To mention the bot, put BotMention() in text.
func (s *Server) SendGuildMessage(guildID, channelID string, u User, text string) Message {
	return s.Post(Post{Author: u, ChannelID: channelID, GuildID: guildID, Content: text})
}

// AddDMHistory posts text from u into u's DM without dispatching it, as
// if the bot had been offline.
func (s *Server) AddDMHistory(u User, text string) Message {
	return s.Post(Post{Author: u, Content: text, Offline: true})
}

// Post adds an inbound message to its channel's history and, unless it is
// Offline, dispatches MESSAGE_CREATE to the bot's session (if the intents
// let it through).
func (s *Server) Post(p Post) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addUserLocked(p.Author)
	var ch *channel
	if p.ChannelID == "" {
		ch = s.dmLocked(p.Author)
	} else {
		ch = s.guildChannelLocked(p.GuildID, p.ChannelID)
	}
	now := time.Now()
	m := &Message{
		ID: s.nextIDLocked(now), ChannelID: ch.id, GuildID: ch.guildID, Author: p.Author,
		Content: p.Content, Time: now, Type: p.Type, Mentions: s.mentionsLocked(p.Content),
		Flags: p.Flags, Stickers: slices.Clone(p.Stickers),
	}
	if p.Poll != nil {
		m.Poll = &Poll{Question: p.Poll.Question, Answers: slices.Clone(p.Poll.Answers)}
	}
	for _, f := range p.Files {
		m.Attachments = append(m.Attachments, s.storeFileLocked(ch.id, f, now))
	}
	if p.Forward != nil {
		m.Forwarded = s.forwardLocked(*p.Forward, now)
	}
	ch.msgs = append(ch.msgs, m)
	if !p.Offline {
		s.dispatchMessageLocked(m)
	}
	s.notifyLocked()
	return m.clone()
}

// DeliverAgain dispatches MESSAGE_CREATE for a message already in the
// history, as Discord may after a reconnect. With no session to take it
// now, it goes out right after the next READY.
func (s *Server) DeliverAgain(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.findLocked(m.ChannelID, m.ID)
	if stored == nil {
		return
	}
	if !s.dispatchMessageLocked(stored) {
		s.gw.afterReady = append(s.gw.afterReady, stored)
	}
	s.notifyLocked()
}

// DMChannel returns the id of u's DM channel with the bot, opening it.
func (s *Server) DMChannel(u User) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addUserLocked(u)
	return s.dmLocked(u).id
}

// AddUser makes a user known, so the bot can open a DM with them.
func (s *Server) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addUserLocked(u)
}

// History returns a channel's messages, oldest first.
func (s *Server) History(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[channelID]
	if ch == nil {
		return nil
	}
	out := make([]Message, len(ch.msgs))
	for i, m := range ch.msgs {
		out[i] = m.clone()
	}
	return out
}

func (s *Server) addUserLocked(u User) {
	if u.ID != "" {
		s.users[u.ID] = u
	}
}

func (s *Server) dmLocked(u User) *channel {
	if id, ok := s.dms[u.ID]; ok {
		return s.channels[id]
	}
	ch := &channel{id: s.nextIDLocked(time.Now()), kind: channelDM, recipient: u}
	s.channels[ch.id] = ch
	s.dms[u.ID] = ch.id
	return ch
}

func (s *Server) guildChannelLocked(guildID, id string) *channel {
	if ch, ok := s.channels[id]; ok {
		return ch
	}
	if guildID == "" {
		guildID = "900000000000000001"
	}
	ch := &channel{id: id, kind: channelGuildText, guildID: guildID}
	s.channels[id] = ch
	return ch
}

func (s *Server) findLocked(channelID, id string) *Message {
	ch := s.channels[channelID]
	if ch == nil {
		return nil
	}
	for _, m := range ch.msgs {
		if m.ID == id {
			return m
		}
	}
	return nil
}

var mentionRE = regexp.MustCompile(`<@!?(\d+)>`)

// mentionsLocked lists the known users content mentions, as Discord
// computes mentions from the text.
func (s *Server) mentionsLocked(content string) []User {
	var out []User
	for _, sub := range mentionRE.FindAllStringSubmatch(content, -1) {
		if u, ok := s.users[sub[1]]; ok && !slices.ContainsFunc(out, func(x User) bool { return x.ID == u.ID }) {
			out = append(out, u)
		}
	}
	return out
}

// forwardLocked makes the snapshot a forward of f carries, its files
// stored under the original's channel, as Discord's CDN keeps them.
func (s *Server) forwardLocked(f Snapshot, now time.Time) *Forwarded {
	chID := f.ChannelID
	if chID == "" {
		chID = s.nextIDLocked(now)
	}
	fw := &Forwarded{ChannelID: chID, MessageID: s.nextIDLocked(now), Content: f.Content,
		Stickers: slices.Clone(f.Stickers), Embeds: slices.Clone(f.Embeds), Flags: f.Flags, Time: now}
	for _, file := range f.Files {
		fw.Attachments = append(fw.Attachments, s.storeFileLocked(chID, file, now))
	}
	return fw
}

// storedFile is a file the fake's CDN serves.
type storedFile struct {
	data    []byte
	chunked bool
}

func (s *Server) storeFileLocked(channelID string, f File, now time.Time) Attachment {
	id := s.nextIDLocked(now)
	name := f.Name
	if name == "" {
		name = "unknown"
	}
	key := channelID + "/" + id + "/" + name
	s.files[key] = storedFile{data: slices.Clone(f.Data), chunked: f.Chunked}
	size := len(f.Data)
	if f.Announced > 0 {
		size = f.Announced
	}
	return Attachment{ID: id, Filename: name, ContentType: f.ContentType, Size: size, URL: s.signedURLLocked(key)}
}

// mentionsBot reports whether m mentions the bot.
func (s *Server) mentionsBot(m *Message) bool {
	return slices.ContainsFunc(m.Mentions, func(u User) bool { return u.ID == s.bot.ID })
}

// dispatchMessageLocked sends MESSAGE_CREATE for m to the session, if the
// intents let it through, and reports whether a session took it.
func (s *Server) dispatchMessageLocked(m *Message) bool {
	intent := IntentDirectMessages
	if m.GuildID != "" {
		intent = IntentGuildMessages
	}
	return s.dispatchLocked("MESSAGE_CREATE", intent, func(intents int) any {
		return m.wire(true, s.contentVisible(m, intents&IntentMessageContent != 0))
	})
}

// contentVisible applies the Message Content rule: a bot sees content in
// DMs, in messages that mention it and in its own, else only with the
// intent.
func (s *Server) contentVisible(m *Message, intent bool) bool {
	return intent || m.GuildID == "" || m.Author.ID == s.bot.ID || s.mentionsBot(m)
}
