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
	FlagVoiceMessage   = 1 << 13
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
	// Announced is the size the attachment object claims, for an inbound
	// file: 0 announces the real one. Discord's CDN may serve more or less
	// than was announced.
	Announced int
	// Chunked serves an inbound file without Content-Length (chunked
	// transfer encoding), so only reading it tells its size.
	Chunked bool
}

// Sticker is a sticker sent with a message (Discord's sticker item).
type Sticker struct {
	ID   string
	Name string
	// FormatType is 1 PNG, 2 APNG, 3 Lottie, 4 GIF; 0 is sent as 1.
	FormatType int
}

// Poll is a poll a user posts: a question and its answers' texts.
type Poll struct {
	Question string
	Answers  []string
}

// Embed is a rich embed, as far as the fake renders one.
type Embed struct {
	Title       string
	Description string
	URL         string
}

// Snapshot is what a test forwards: the fields of the original message a
// forward carries (Discord's message snapshot leaves out the author).
type Snapshot struct {
	Content  string
	Files    []File
	Stickers []Sticker
	Embeds   []Embed
	Flags    int
	// ChannelID is the original's channel; "" is another channel the fake
	// makes up.
	ChannelID string
}

// Forwarded is the snapshot a forward in the history carries, and the
// message it points to.
type Forwarded struct {
	ChannelID   string
	MessageID   string
	Content     string
	Attachments []Attachment
	Stickers    []Sticker
	Embeds      []Embed
	Flags       int
	Time        time.Time
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
	Stickers    []Sticker
	Poll        *Poll
	Embeds      []Embed
	// Forwarded is the message this one forwards, nil for none.
	Forwarded *Forwarded
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
	m.Stickers = slices.Clone(m.Stickers)
	m.Embeds = slices.Clone(m.Embeds)
	if m.Poll != nil {
		p := *m.Poll
		p.Answers = slices.Clone(p.Answers)
		m.Poll = &p
	}
	if m.Forwarded != nil {
		f := *m.Forwarded
		f.Attachments = slices.Clone(f.Attachments)
		f.Stickers = slices.Clone(f.Stickers)
		f.Embeds = slices.Clone(f.Embeds)
		m.Forwarded = &f
	}
	return m
}

// snowflake compares as a number.
func idLess(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x < y
}
