package telegram

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/logkey"
)

// Bounds on what an update may carry into the store. Telegram's own limits
// are lower (4096 characters of text, names of at most 64 and titles of 128
// characters, file ids under 100 bytes); anything beyond these did not come
// from Telegram and is dropped or clipped rather than handed on.
const (
	maxInboundUnits = 4096 // message text or caption, in UTF-16 units
	maxNameBytes    = 512  // chat and user names (display only: clipped)
	maxFileNameLen  = 255  // an attachment's file name (clipped)
	maxIDBytes      = 256  // file and callback query ids (dropped if longer)
	maxMIMEBytes    = 128  // an attachment's MIME type (dropped if longer)
)

// Telegram's placeholder senders. A message sent on behalf of a chat (by an
// anonymous group administrator, by someone posting in a group as a
// channel, or forwarded by Telegram from a channel into its discussion
// group) names one of these in from, for clients that predate sender_chat.
// Each stands for everyone who posts that way, so none of them is a person
// the chat lock could tell apart.
const (
	channelBotID        = 136817688  // @Channel_Bot: posted as a channel
	groupAnonymousBotID = 1087968824 // @GroupAnonymousBot: anonymous admins
	serviceUserID       = 777000     // Telegram: automatic forwards
)

// placeholderSender reports whether a user id is one of Telegram's
// placeholder senders.
func placeholderSender(id int64) bool {
	switch id {
	case channelBotID, groupAnonymousBotID, serviceUserID:
		return true
	}
	return false
}

// batch is one getUpdates answer, translated.
type batch struct {
	msgs []adapter.Message
	// ids are those of the updates taken, usable or not, in the order
	// received: Ingest stores them in the cursor and the next poll
	// confirms them.
	ids []int
	// repeats counts updates dropped as already taken.
	repeats int
	// restart is set when the update ids started again below the offset.
	restart bool
}

// translate turns raw updates into messages. Each update is decoded on its
// own so that one malformed update is skipped instead of blocking the batch.
//
// offset is the offset the batch was asked for and recent the ids taken
// last (see seen). An update in recent is a repeat and is dropped. An
// update below the offset is normally one too, since the Bot API forgets
// every update below the offset it is given; but Telegram chooses the next
// id at random after a week without updates (tdlib draws it from 2,000,001
// to 1,000,000,000, so about half the time below the ids before), and a
// self-hosted Bot API server has ids of its own. Its queue then usually
// ends far below latch's offset, and getUpdates, finding the offset "in the
// future", answers from the head of the queue. Dropping such a batch would
// drop it forever: the offset would never move, the same updates would
// come back on every poll, and the offset is stored, so a restart would
// not help. So a batch whose every update is below the offset, and some of
// which were not taken recently, is the new sequence: what it holds beyond
// the recent window is taken, and the cursor moves down to its highest id
// + 1. (New ids may overlap the window: a self-hosted server counting from
// 1, or an old plain cursor, whose window is guessed; dropping the whole
// batch then would leave latch deaf until the ids passed the old offset.)
//
// A repeat of an answer latch already took (a proxy or a retried request
// serving it again) holds only ids of the recent window, which covers more
// than two full batches, and a batch with any id at or above the offset
// cannot be that answer of the Bot API's: either way its ids below the
// offset are dropped. The size of the gap is no test: the new ids may land anywhere
// below, and one that landed close would leave latch deaf, which is worse
// than what a gap could guard against (a stale answer older than the
// window, which nothing in the Bot API produces).
func (g *Gateway) translate(raws []json.RawMessage, offset int, recent seen) batch {
	var us []update
	below, fresh := offset > 0, false
	for _, raw := range raws {
		u := g.decode(raw)
		if !u.hasID || u.id <= 0 || u.id > maxUpdateID {
			// Not an id Telegram gives (they are positive and 32-bit):
			// nothing to confirm or remember.
			continue
		}
		us = append(us, u)
		below = below && u.id < offset
		fresh = fresh || !recent.has(u.id)
	}
	b := batch{restart: below && fresh}
	var items []albumItem
	for _, u := range us {
		if recent.has(u.id) || slices.Contains(b.ids, u.id) || u.id < offset && !b.restart {
			b.repeats++
			continue
		}
		b.ids = append(b.ids, u.id)
		if u.ok {
			items = append(items, albumItem{msg: u.msg, album: u.album})
		}
	}
	if len(items) > 0 {
		b.msgs = mergeAlbums(items)
	}
	return b
}

// update is one raw update, decoded.
type update struct {
	id    int  // update_id
	hasID bool // false: not an update at all, nothing to confirm
	msg   adapter.Message
	ok    bool // msg is usable
	// album is the media group msg is an item of (see album.go), with
	// its forum topic; "" for none.
	album string
}

// decode translates one raw update as getUpdates or a webhook delivers it.
// An update that is malformed, or that carries nothing latch handles, keeps
// its id (so it can be confirmed past) with ok false.
func (g *Gateway) decode(raw []byte) update {
	// The id is read on its own: an update without one cannot be confirmed
	// or deduplicated, and the library would take a missing id for 0.
	var id struct {
		UpdateID *int `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &id); err != nil || id.UpdateID == nil {
		g.log.Warn("skipping an update without update_id", logkey.Err, err)
		return update{}
	}
	out := update{id: *id.UpdateID, hasID: true}
	var u tgbotapi.Update
	if err := json.Unmarshal(raw, &u); err != nil {
		g.log.Warn("skipping a malformed update", "update_id", out.id, logkey.Err, err)
		return out
	}
	topic := updateTopic(raw)
	if u.CallbackQuery != nil {
		out.msg, out.ok = g.callback(u, topic)
	} else {
		out.msg, out.ok = g.message(u, topic, raw)
		if out.ok && u.Message.MediaGroupID != "" {
			out.album = strconv.Itoa(topic) + ":" + u.Message.MediaGroupID
			out.msg.Group = out.album // the Hub folds what this batch could not (album.go)
		}
	}
	return out
}

// forwarded reports whether the update's message carries forward_origin
// (Bot API 7.0; the library predates it). The cheap search spares the
// decode for nearly every update; the decode tells the message's own
// origin from one in the message it replies to.
func forwarded(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`"forward_origin"`)) {
		return false
	}
	var u struct {
		Message *struct {
			Origin json.RawMessage `json:"forward_origin"`
		} `json:"message"`
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		return true // undecidable: the safe reading is "not the owner's command"
	}
	return u.Message != nil && len(u.Message.Origin) > 0 && string(u.Message.Origin) != "null"
}

// message translates an update carrying a usable message: text, a caption,
// attachments or content described in text (see media.go), a known chat
// type and a sender. topic is the message's forum topic (0: none), which
// its ID carries (see topic.go); raw is the update.
func (g *Gateway) message(u tgbotapi.Update, topic int, raw []byte) (adapter.Message, bool) {
	m := u.Message
	if m == nil || m.Chat == nil {
		return adapter.Message{}, false
	}
	log := g.log.With("update_id", u.UpdateID, logkey.Chat, m.Chat.ID)
	forwarded, text := forwarded(raw), messageText(m, raw)
	files := attachments(m)
	chatType, known := chatType(m.Chat.Type)
	switch {
	case text == "" && len(files) == 0:
		log.Debug("skipping a message without content latch handles")
		return adapter.Message{}, false
	case !known:
		log.Debug("skipping a message from an unknown chat type", "type", m.Chat.Type)
		return adapter.Message{}, false
	case m.From == nil:
		// Without a sender it cannot be attributed to a user.
		log.Debug("skipping a message without a sender")
		return adapter.Message{}, false
	case m.SenderChat != nil || placeholderSender(m.From.ID):
		// Sent on behalf of a chat: from is a placeholder shared by
		// everyone who posts that way, so the message is no one's. Were
		// it taken for its placeholder, it could pair the gateway to all
		// of them, or pass as an owner who once paired that way.
		log.Debug("skipping a message sent on behalf of a chat")
		return adapter.Message{}, false
	case utf16Len(text) > maxInboundUnits:
		log.Warn("skipping an oversized message", "utf16_units", utf16Len(text))
		return adapter.Message{}, false
	case !forwarded && strings.HasPrefix(strings.TrimSpace(text), "/") && forAnotherBot(text, g.botName()):
		// "/stop@other_bot" in a group is another bot's command. Taken for
		// latch's, it would stop latch's work, or a stranger's
		// "/pair@other_bot x" would count against the pending code.
		log.Debug("skipping a command addressed to another bot")
		return adapter.Message{}, false
	}
	if forwarded && text != "" {
		text = adapter.ForwardedLabel + text
	}
	return adapter.Message{
		Gateway:  gatewayName,
		ID:       msgRef{id: m.MessageID, topic: topic}.String(),
		ChatID:   strconv.FormatInt(m.Chat.ID, 10),
		ChatType: chatType,
		ChatName: chatName(m.Chat),
		UserID:   strconv.FormatInt(m.From.ID, 10),
		UserName: userName(m.From),
		Text:     text,
		Time:     time.Unix(int64(m.Date), 0).UTC(),
		Files:    files,
	}, true
}

// messageText is the text of a message: its text or caption, after the
// notes on what else it carries (see media.go). The notes come first: a
// caption after them is still read, but what starts the message is never
// a command.
func messageText(m *tgbotapi.Message, raw []byte) string {
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	ns := notes(m, raw)
	if len(ns) == 0 {
		return text
	}
	if text != "" {
		text = "\n\n" + text
	}
	return strings.Join(ns, "\n") + text
}

// callback translates a button press on one of the bot's messages, in the
// forum topic topic (0: none). A press is not answered here: the Hub
// answers those it accepts (AnswerCallback) and leaves strangers' presses
// unanswered.
func (g *Gateway) callback(u tgbotapi.Update, topic int) (adapter.Message, bool) {
	q := u.CallbackQuery
	log := g.log.With("update_id", u.UpdateID)
	switch {
	case q.ID == "" || len(q.ID) > maxIDBytes || q.From == nil:
		log.Debug("skipping a callback query without id or sender")
		return adapter.Message{}, false
	case placeholderSender(q.From.ID):
		// A press names the person who pressed; a placeholder there is no
		// one in particular (see message).
		log.Debug("skipping a callback query from a placeholder sender")
		return adapter.Message{}, false
	case q.Message == nil || q.Message.Chat == nil:
		// Inline-mode messages and messages too old to be delivered carry
		// no chat to attribute the press to.
		log.Debug("skipping a callback query without its message")
		return adapter.Message{}, false
	case q.Data == "" || len(q.Data) > maxCallbackData:
		log.Debug("skipping a callback query without valid data")
		return adapter.Message{}, false
	}
	chatType, known := chatType(q.Message.Chat.Type)
	if !known {
		log.Debug("skipping a callback query from an unknown chat type", "type", q.Message.Chat.Type)
		return adapter.Message{}, false
	}
	msgID := msgRef{id: q.Message.MessageID, topic: topic}.String()
	return adapter.Message{
		Gateway:  gatewayName,
		ID:       msgID,
		ChatID:   strconv.FormatInt(q.Message.Chat.ID, 10),
		ChatType: chatType,
		ChatName: chatName(q.Message.Chat),
		UserID:   strconv.FormatInt(q.From.ID, 10),
		UserName: userName(q.From),
		// A press has no date of its own; the update arrives as it happens.
		Time:     time.Now().UTC().Truncate(time.Second),
		Callback: &adapter.Callback{ID: q.ID, Data: q.Data, MessageID: msgID},
	}, true
}

func chatType(t string) (adapter.ChatType, bool) {
	switch t {
	case "private":
		return adapter.ChatPrivate, true
	case "group", "supergroup":
		return adapter.ChatGroup, true
	case "channel":
		return adapter.ChatChannel, true
	}
	return "", false
}

// chatName is the group's title, else the person's name, else @username.
func chatName(c *tgbotapi.Chat) string {
	if c.Title != "" {
		return clip(c.Title, maxNameBytes)
	}
	if name := strings.TrimSpace(c.FirstName + " " + c.LastName); name != "" {
		return clip(name, maxNameBytes)
	}
	if c.UserName != "" {
		return clip("@"+c.UserName, maxNameBytes)
	}
	return ""
}

// userName is the sender's @username (without "@"), else their full name.
func userName(u *tgbotapi.User) string {
	if u.UserName != "" {
		return clip(u.UserName, maxNameBytes)
	}
	return clip(strings.TrimSpace(u.FirstName+" "+u.LastName), maxNameBytes)
}

// clip shortens s to at most n bytes without splitting a character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// utf16Len is the length of s in UTF-16 code units, Telegram's measure.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// forAnotherBot reports whether text is a slash command addressed to a bot
// other than bot ("/cmd@name ..."). With bot unknown (before the gateway
// has started) nothing is.
func forAnotherBot(text, bot string) bool {
	words := strings.Fields(text)
	if bot == "" || len(words) == 0 || !strings.HasPrefix(words[0], "/") {
		return false
	}
	cmd := words[0]
	_, to, ok := strings.Cut(cmd, "@")
	return ok && !strings.EqualFold(to, bot)
}

// botName is the bot's username, known once the gateway has started.
func (g *Gateway) botName() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.info.BotName
}
