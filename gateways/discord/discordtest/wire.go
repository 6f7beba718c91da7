package discordtest

import "time"

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

// Message reference types.
const (
	referenceDefault = 0
	referenceForward = 1
)

type wireReference struct {
	Type      int    `json:"type"`
	MessageID string `json:"message_id"`
	ChannelID string `json:"channel_id"`
	GuildID   string `json:"guild_id,omitempty"`
}

type wireSticker struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	FormatType int    `json:"format_type"`
}

type wireEmbed struct {
	Type        string `json:"type"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	URL         string `json:"url,omitempty"`
}

type wirePollMedia struct {
	Text string `json:"text"`
}

type wirePollAnswer struct {
	AnswerID int           `json:"answer_id"`
	Media    wirePollMedia `json:"poll_media"`
}

type wirePoll struct {
	Question         wirePollMedia    `json:"question"`
	Answers          []wirePollAnswer `json:"answers"`
	Expiry           string           `json:"expiry"`
	AllowMultiselect bool             `json:"allow_multiselect"`
	LayoutType       int              `json:"layout_type"`
}

// wireSnapshotMessage is the subset of a message's fields a message
// snapshot carries.
type wireSnapshotMessage struct {
	Type            int              `json:"type"`
	Content         string           `json:"content"`
	Embeds          []wireEmbed      `json:"embeds"`
	Attachments     []wireAttachment `json:"attachments"`
	Timestamp       string           `json:"timestamp"`
	EditedTimestamp *string          `json:"edited_timestamp"`
	Flags           int              `json:"flags"`
	Mentions        []wireUser       `json:"mentions"`
	MentionRoles    []string         `json:"mention_roles"`
	StickerItems    []wireSticker    `json:"sticker_items,omitempty"`
	Components      []Row            `json:"components"`
}

type wireSnapshot struct {
	Message wireSnapshotMessage `json:"message"`
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
	Embeds           []wireEmbed      `json:"embeds"`
	Components       []Row            `json:"components"`
	Pinned           bool             `json:"pinned"`
	Type             int              `json:"type"`
	Flags            int              `json:"flags"`
	MessageReference *wireReference   `json:"message_reference,omitempty"`
	MessageSnapshots []wireSnapshot   `json:"message_snapshots,omitempty"`
	StickerItems     []wireSticker    `json:"sticker_items,omitempty"`
	Poll             *wirePoll        `json:"poll,omitempty"`
}

// wire renders m as Discord does. Gateway dispatches carry guild_id; REST
// answers leave it out. Without the Message Content intent, content,
// attachments, embeds and the poll of a guild message that does not
// mention the bot are blank, and so are those of a snapshot it forwards.
func (m Message) wire(gateway, content bool) wireMessage {
	w := wireMessage{
		ID: m.ID, ChannelID: m.ChannelID, Author: m.Author.wire(), Content: m.Content,
		Timestamp: wireTime(m.Time),
		Mentions:  []wireUser{}, MentionRoles: []string{}, Attachments: []wireAttachment{},
		Embeds: []wireEmbed{}, Components: cloneRows(m.Components), Type: m.Type, Flags: m.Flags,
		StickerItems: wireStickers(m.Stickers),
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
		w.Attachments = wireAttachments(m.Attachments)
		w.Embeds = wireEmbeds(m.Embeds)
		w.Poll = m.Poll.wire(m.Time)
	} else {
		w.Content = ""
	}
	switch {
	case m.Forwarded != nil:
		f := m.Forwarded
		w.MessageReference = &wireReference{Type: referenceForward, MessageID: f.MessageID, ChannelID: f.ChannelID}
		w.MessageSnapshots = []wireSnapshot{{Message: f.wire(content)}}
	case m.ReplyTo != "":
		w.MessageReference = &wireReference{Type: referenceDefault, MessageID: m.ReplyTo, ChannelID: m.ChannelID, GuildID: m.GuildID}
	}
	return w
}

// wire renders a forward's snapshot; content as in Message.wire.
func (f *Forwarded) wire(content bool) wireSnapshotMessage {
	w := wireSnapshotMessage{
		Type: MessageDefault, Timestamp: wireTime(f.Time), Flags: f.Flags,
		Embeds: []wireEmbed{}, Attachments: []wireAttachment{}, Mentions: []wireUser{}, MentionRoles: []string{},
		StickerItems: wireStickers(f.Stickers), Components: []Row{},
	}
	if content {
		w.Content, w.Attachments, w.Embeds = f.Content, wireAttachments(f.Attachments), wireEmbeds(f.Embeds)
	}
	return w
}

func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000+00:00") }

func wireAttachments(as []Attachment) []wireAttachment {
	out := []wireAttachment{}
	for _, a := range as {
		out = append(out, wireAttachment{ID: a.ID, Filename: a.Filename,
			ContentType: a.ContentType, Size: a.Size, URL: a.URL, ProxyURL: a.URL})
	}
	return out
}

func wireStickers(ss []Sticker) []wireSticker {
	var out []wireSticker
	for _, s := range ss {
		out = append(out, wireSticker{ID: s.ID, Name: s.Name, FormatType: max(s.FormatType, 1)})
	}
	return out
}

func wireEmbeds(es []Embed) []wireEmbed {
	out := []wireEmbed{}
	for _, e := range es {
		out = append(out, wireEmbed{Type: "rich", Title: e.Title, Description: e.Description, URL: e.URL})
	}
	return out
}

// wire renders a poll posted at t; it runs for a day. nil for none.
func (p *Poll) wire(t time.Time) *wirePoll {
	if p == nil {
		return nil
	}
	w := &wirePoll{Question: wirePollMedia{Text: p.Question}, Expiry: wireTime(t.Add(24 * time.Hour)), LayoutType: 1,
		Answers: []wirePollAnswer{}}
	for i, a := range p.Answers {
		w.Answers = append(w.Answers, wirePollAnswer{AnswerID: i + 1, Media: wirePollMedia{Text: a}})
	}
	return w
}
