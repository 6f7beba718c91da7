package discord

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/logkey"
)

const (
	// maxInbound is the longest message Discord lets anyone send (Nitro
	// doubles the normal 2000). A longer text did not come from Discord.
	maxInbound = 4000
	// maxCustomID is Discord's limit on a button's custom_id.
	maxCustomID = 100
	// discordEpoch is the first millisecond of 2015, where snowflakes start.
	discordEpoch = 1420070400000
)

// translate turns a message into a adapter.Message, or reports false for
// one latch ignores: the bot's own, other bots' and webhooks', system
// messages, oversized ones, bare mentions of the bot, and (unless
// AllowGroups) anything from a server; a server message must mention the
// bot, and the mention is cut from the text so that "@latch /pair CODE"
// reads "/pair CODE". What the message carries is body's: a forward's
// text comes labelled, and a message without text or files is described
// rather than dropped.
func (g *Gateway) translate(m *discordgo.Message) (adapter.Message, bool) {
	botID := g.botUserID()
	log := g.log.With("message_id", m.ID, logkey.Chat, m.ChannelID)
	switch {
	case m.Author == nil, m.Author.ID == botID, m.Author.Bot, m.WebhookID != "":
		return adapter.Message{}, false
	case m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply:
		log.Debug("skipping a system message", "type", m.Type)
		return adapter.Message{}, false
	}
	chatType, chatName := adapter.ChatPrivate, displayName(m.Author)
	if m.GuildID != "" {
		if !g.cfg.AllowGroups || !mentions(m, botID) {
			return adapter.Message{}, false
		}
		chatType, chatName = adapter.ChatGroup, ""
	}
	text, files, runes := body(m, botID)
	switch {
	case text == "" && len(files) == 0:
		log.Debug("skipping a bare mention")
		return adapter.Message{}, false
	case runes > maxInbound:
		log.Warn("skipping an oversized message", "runes", runes)
		return adapter.Message{}, false
	}
	t := m.Timestamp
	if t.IsZero() {
		t = snowflakeTime(m.ID)
	}
	return adapter.Message{
		Gateway:  gatewayName,
		ID:       m.ID,
		ChatID:   m.ChannelID,
		ChatType: chatType,
		ChatName: chatName,
		UserID:   m.Author.ID,
		UserName: m.Author.Username,
		Text:     text,
		Time:     t.UTC(),
		Files:    files,
	}, true
}

// translateInteraction turns a button press into a adapter.Message with
// a Callback. A press is not acknowledged here: the Hub answers those it
// accepts (AnswerCallback).
func (g *Gateway) translateInteraction(i *discordgo.Interaction) (adapter.Message, bool) {
	if i.Type != discordgo.InteractionMessageComponent {
		return adapter.Message{}, false
	}
	data, ok := i.Data.(discordgo.MessageComponentInteractionData)
	user := i.User
	if user == nil && i.Member != nil {
		user = i.Member.User
	}
	switch {
	case !ok || data.CustomID == "" || len(data.CustomID) > maxCustomID:
		g.log.Debug("skipping a button press without valid data")
		return adapter.Message{}, false
	case user == nil || user.Bot || i.Message == nil || i.ID == "" || i.Token == "" || i.ChannelID == "":
		g.log.Debug("skipping an incomplete button press")
		return adapter.Message{}, false
	case i.GuildID != "" && !g.cfg.AllowGroups:
		return adapter.Message{}, false
	}
	g.texts.remember(i.Message.ID, i.Message.Content)
	chatType, chatName := adapter.ChatPrivate, displayName(user)
	if i.GuildID != "" {
		chatType, chatName = adapter.ChatGroup, ""
	}
	return adapter.Message{
		Gateway:  gatewayName,
		ID:       i.Message.ID,
		ChatID:   i.ChannelID,
		ChatType: chatType,
		ChatName: chatName,
		UserID:   user.ID,
		UserName: user.Username,
		// A press has no time of its own; it arrives as it happens.
		Time:     snowflakeTime(i.ID).UTC(),
		Callback: &adapter.Callback{ID: encodeCallbackID(i), Data: data.CustomID, MessageID: i.Message.ID},
	}, true
}

// encodeCallbackID packs what answering a press takes: the interaction's
// id, its application's id (for a follow-up) and its token (valid 15
// minutes). Tokens contain no ':'.
func encodeCallbackID(i *discordgo.Interaction) string {
	return i.ID + ":" + i.AppID + ":" + i.Token
}

func decodeCallbackID(s string) (id, app, token string, ok bool) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// attachments lists a message's files (or a forward snapshot's, whose
// flags then tell a voice message). Images count as photos, audio as
// audio (a voice message as voice), anything else as a document. The id
// is the attachment's CDN URL, which Download fetches — only once the Hub
// accepted the message, so a stranger's files are never fetched.
func attachments(m *discordgo.Message) []adapter.Attachment {
	var out []adapter.Attachment
	for _, a := range m.Attachments {
		if a == nil || a.URL == "" {
			continue
		}
		kind := "document"
		switch {
		case m.Flags&discordgo.MessageFlagsIsVoiceMessage != 0:
			kind = "voice"
		case strings.HasPrefix(a.ContentType, "image/"):
			kind = "photo"
		case strings.HasPrefix(a.ContentType, "audio/"):
			kind = "audio"
		}
		out = append(out, adapter.Attachment{ID: a.URL, Name: a.Filename, Size: int64(a.Size), Kind: kind, MIME: a.ContentType,
			Seconds: int(math.Ceil(a.DurationSecs))})
	}
	return out
}

// mentions reports whether m mentions the bot.
func mentions(m *discordgo.Message, botID string) bool {
	for _, u := range m.Mentions {
		if u != nil && u.ID == botID {
			return true
		}
	}
	return strings.Contains(m.Content, "<@"+botID+">") || strings.Contains(m.Content, "<@!"+botID+">")
}

// stripMention removes mentions of the bot (and the space after them).
func stripMention(text, botID string) string {
	if botID == "" {
		return strings.TrimSpace(text)
	}
	re := regexp.MustCompile(`<@!?` + regexp.QuoteMeta(botID) + `>[ \t]?`)
	return strings.TrimSpace(re.ReplaceAllString(text, ""))
}

// displayName is the user's display name, else their user name.
func displayName(u *discordgo.User) string {
	if u.GlobalName != "" {
		return u.GlobalName
	}
	return u.Username
}

// snowflakeTime is the creation time encoded in a Discord id.
func snowflakeTime(id string) time.Time {
	n, ok := snowflake(id)
	if !ok {
		return time.Now()
	}
	return time.UnixMilli(int64(n>>22) + discordEpoch)
}

func formatID(n uint64) string { return strconv.FormatUint(n, 10) }
