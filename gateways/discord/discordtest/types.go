package discordtest

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// Discord's numbers the fake enforces.
const (
	// MaxContent is the longest message content, in Unicode code points
	// (Discord's API counts code points).
	MaxContent = 2000
	// DefaultMaxUpload is the attachment size limit of a server without
	// boosts.
	DefaultMaxUpload = 10 << 20
	// DefaultAckWindow is how long an interaction may go unanswered.
	DefaultAckWindow = 3 * time.Second
	// DefaultHeartbeat is the heartbeat_interval HELLO announces.
	DefaultHeartbeat = 41250 * time.Millisecond
	// maxCustomID is the longest custom_id of a component.
	maxCustomID = 100
	// followupWindow is how long an interaction token stays valid.
	followupWindow = 15 * time.Minute
)

// Channel types the fake knows.
const (
	channelGuildText = 0
	channelDM        = 1
)

// Message types the fake creates.
const (
	MessageDefault = 0
	MessageReply   = 19
	// MessageUserJoin is a system message ("X joined the server").
	MessageUserJoin = 7
)

// Message flags latch cares about.
const (
	FlagSuppressEmbeds = 1 << 2
	FlagEphemeral      = 1 << 6
)

// Gateway intents the fake applies.
const (
	IntentGuildMessages  = 1 << 9
	IntentDirectMessages = 1 << 12
	IntentMessageContent = 1 << 15
)

// discordEpoch is the first millisecond of 2015, the origin of snowflakes.
const discordEpoch = 1420070400000

// User is a Discord account.
type User struct {
	ID         string
	Username   string
	GlobalName string
	Bot        bool
}

// Attachment is a file on a message, served from the fake's CDN route.
type Attachment struct {
	ID          string
	Filename    string
	ContentType string
	Size        int
	URL         string
}

// File is a file a test attaches to an inbound message, or one the bot
// uploaded.
type File struct {
	Name        string
	ContentType string
	Data        []byte
}

// Row is an action row of components.
type Row struct {
	Type       int      `json:"type"`
	Components []Button `json:"components"`
}

// Button is a button component (type 2).
type Button struct {
	Type     int    `json:"type"`
	Style    int    `json:"style,omitempty"`
	Label    string `json:"label,omitempty"`
	CustomID string `json:"custom_id,omitempty"`
	URL      string `json:"url,omitempty"`
	Disabled bool   `json:"disabled,omitempty"`
}

// Message is a message in a channel's history.
type Message struct {
	ID          string
	ChannelID   string
	GuildID     string
	Author      User
	Content     string
	Time        time.Time
	Mentions    []User
	Attachments []Attachment
	Components  []Row
	Flags       int
	Type        int
	ReplyTo     string
}

// Sent is a message the bot created (or an interaction follow-up), with
// everything latch chose about it.
type Sent struct {
	ID        string
	ChannelID string
	Content   string
	// AllowedMentions is the allowed_mentions object as sent, nil when
	// absent. NoPings reports whether it silences every mention.
	AllowedMentions json.RawMessage
	Flags           int
	Components      []Row
	Files           []File
	ReplyTo         string
	// Edits are the later versions of the message (PATCH or an
	// UPDATE_MESSAGE interaction response), oldest first.
	Edits []Edit
	// Ephemeral is set on an interaction response or follow-up only its
	// user sees.
	Ephemeral bool
	// Interaction is the id of the interaction a response or follow-up
	// answered.
	Interaction string
	// Deferred is set on an interaction's deferred response ("thinking…"),
	// which has no content until it is edited.
	Deferred bool
	// Deleted is set once the bot deleted the message.
	Deleted bool
	Time    time.Time
}

// Edit is one later version of a sent message.
type Edit struct {
	Content    string
	Components []Row
	Flags      int
	// AllowedMentions is the edit's allowed_mentions as sent, nil when
	// absent (an edit re-parses mentions: it can ping too).
	AllowedMentions json.RawMessage
	Via             string // "patch", "interaction" or "webhook"
}

// NoPings reports whether the message's allowed_mentions is
// {"parse": []} with no users or roles allowed: nothing it contains pings
// anyone.
func (s Sent) NoPings() bool { return noPings(s.AllowedMentions) }

// NoPings reports whether the edit's allowed_mentions silences every
// mention, as Sent.NoPings does.
func (e Edit) NoPings() bool { return noPings(e.AllowedMentions) }

func noPings(allowed json.RawMessage) bool {
	var am struct {
		Parse []string `json:"parse"`
		Users []string `json:"users"`
		Roles []string `json:"roles"`
	}
	if len(allowed) == 0 || json.Unmarshal(allowed, &am) != nil {
		return false
	}
	return am.Parse != nil && len(am.Parse) == 0 && len(am.Users) == 0 && len(am.Roles) == 0
}

// Text is the message's current content (after its edits).
func (s Sent) Text() string {
	if n := len(s.Edits); n > 0 {
		return s.Edits[n-1].Content
	}
	return s.Content
}

// Buttons are the message's current buttons (after its edits).
func (s Sent) Buttons() []Button {
	rows := s.Components
	if n := len(s.Edits); n > 0 {
		rows = s.Edits[n-1].Components
	}
	var out []Button
	for _, r := range rows {
		out = append(out, r.Components...)
	}
	return out
}

func (s Sent) clone() Sent {
	s.AllowedMentions = bytes.Clone(s.AllowedMentions)
	s.Components = cloneRows(s.Components)
	s.Files = slices.Clone(s.Files)
	s.Edits = slices.Clone(s.Edits)
	for i := range s.Edits {
		s.Edits[i].Components = cloneRows(s.Edits[i].Components)
		s.Edits[i].AllowedMentions = bytes.Clone(s.Edits[i].AllowedMentions)
	}
	return s
}

func cloneRows(rows []Row) []Row {
	out := slices.Clone(rows)
	for i := range out {
		out[i].Components = slices.Clone(out[i].Components)
	}
	return out
}

func (m Message) clone() Message {
	m.Mentions = slices.Clone(m.Mentions)
	m.Attachments = slices.Clone(m.Attachments)
	m.Components = cloneRows(m.Components)
	return m
}

// Wire forms, as Discord's JSON has them.

type wireUser struct {
	ID            string  `json:"id"`
	Username      string  `json:"username"`
	GlobalName    *string `json:"global_name"`
	Discriminator string  `json:"discriminator"`
	Avatar        *string `json:"avatar"`
	Bot           bool    `json:"bot,omitempty"`
}

func (u User) wire() wireUser {
	w := wireUser{ID: u.ID, Username: u.Username, Discriminator: "0", Bot: u.Bot}
	if u.GlobalName != "" {
		g := u.GlobalName
		w.GlobalName = &g
	}
	return w
}

type wireAttachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int    `json:"size"`
	URL         string `json:"url"`
	ProxyURL    string `json:"proxy_url"`
}

type wireReference struct {
	MessageID string `json:"message_id"`
	ChannelID string `json:"channel_id"`
	GuildID   string `json:"guild_id,omitempty"`
}

type wireMessage struct {
	ID               string           `json:"id"`
	ChannelID        string           `json:"channel_id"`
	GuildID          string           `json:"guild_id,omitempty"`
	Author           wireUser         `json:"author"`
	Content          string           `json:"content"`
	Timestamp        string           `json:"timestamp"`
	EditedTimestamp  *string          `json:"edited_timestamp"`
	TTS              bool             `json:"tts"`
	MentionEveryone  bool             `json:"mention_everyone"`
	Mentions         []wireUser       `json:"mentions"`
	MentionRoles     []string         `json:"mention_roles"`
	Attachments      []wireAttachment `json:"attachments"`
	Embeds           []any            `json:"embeds"`
	Components       []Row            `json:"components"`
	Pinned           bool             `json:"pinned"`
	Type             int              `json:"type"`
	Flags            int              `json:"flags"`
	MessageReference *wireReference   `json:"message_reference,omitempty"`
}

// wire renders m as Discord does. Gateway dispatches carry guild_id; REST
// answers leave it out. Without the Message Content intent, content and
// attachments of a guild message that does not mention the bot are blank.
func (m Message) wire(gateway, content bool) wireMessage {
	w := wireMessage{
		ID: m.ID, ChannelID: m.ChannelID, Author: m.Author.wire(), Content: m.Content,
		Timestamp: m.Time.UTC().Format("2006-01-02T15:04:05.000000+00:00"),
		Mentions:  []wireUser{}, MentionRoles: []string{}, Attachments: []wireAttachment{},
		Embeds: []any{}, Components: cloneRows(m.Components), Type: m.Type, Flags: m.Flags,
	}
	if w.Components == nil {
		w.Components = []Row{}
	}
	if gateway {
		w.GuildID = m.GuildID
	}
	for _, u := range m.Mentions {
		w.Mentions = append(w.Mentions, u.wire())
	}
	if content {
		for _, a := range m.Attachments {
			w.Attachments = append(w.Attachments, wireAttachment{ID: a.ID, Filename: a.Filename,
				ContentType: a.ContentType, Size: a.Size, URL: a.URL, ProxyURL: a.URL})
		}
	} else {
		w.Content = ""
	}
	if m.ReplyTo != "" {
		w.MessageReference = &wireReference{MessageID: m.ReplyTo, ChannelID: m.ChannelID, GuildID: m.GuildID}
	}
	return w
}

// snowflake compares as a number.
func idLess(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x < y
}
