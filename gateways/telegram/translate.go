package telegram

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways"
)

// maxInboundUnits is Telegram's own limit on a message text. A longer text
// did not come from Telegram and is dropped rather than handed on.
const maxInboundUnits = 4096

// batch is one getUpdates answer, translated.
type batch struct {
	msgs  []gateways.Message
	next  int // offset that confirms the whole batch
	count int // updates at or past the offset, usable or not
}

// translate turns raw updates into messages. Each update is decoded on its
// own so that one malformed update is skipped instead of blocking the batch.
// Updates below offset were confirmed already and are ignored.
func (g *Gateway) translate(raws []json.RawMessage, offset int) batch {
	b := batch{next: offset}
	for _, raw := range raws {
		var u tgbotapi.Update
		if err := json.Unmarshal(raw, &u); err != nil {
			var id struct {
				UpdateID *int `json:"update_id"`
			}
			if json.Unmarshal(raw, &id) != nil || id.UpdateID == nil {
				g.log.Warn("skipping an update without update_id", "err", err)
				continue
			}
			u = tgbotapi.Update{UpdateID: *id.UpdateID}
			g.log.Warn("skipping a malformed update", "update_id", u.UpdateID, "err", err)
		}
		if offset > 0 && u.UpdateID < offset {
			continue
		}
		b.count++
		b.next = max(b.next, u.UpdateID+1)
		m, ok := g.message(u)
		if u.CallbackQuery != nil {
			m, ok = g.callback(u)
		}
		if ok {
			b.msgs = append(b.msgs, m)
		}
	}
	return b
}

// message translates an update carrying a usable message: text, a caption
// or attachments, a known chat type and a sender.
func (g *Gateway) message(u tgbotapi.Update) (gateways.Message, bool) {
	m := u.Message
	if m == nil || m.Chat == nil {
		return gateways.Message{}, false
	}
	log := g.log.With("update_id", u.UpdateID, "chat_id", m.Chat.ID)
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	files := attachments(m)
	chatType, known := chatType(m.Chat.Type)
	switch {
	case text == "" && len(files) == 0:
		log.Debug("skipping a message without text")
		return gateways.Message{}, false
	case !known:
		log.Debug("skipping a message from an unknown chat type", "type", m.Chat.Type)
		return gateways.Message{}, false
	case m.From == nil:
		// Without a sender it cannot be attributed to a user.
		log.Debug("skipping a message without a sender")
		return gateways.Message{}, false
	case utf16Len(text) > maxInboundUnits:
		log.Warn("skipping an oversized message", "utf16_units", utf16Len(text))
		return gateways.Message{}, false
	}
	return gateways.Message{
		Gateway:  gatewayName,
		ID:       strconv.Itoa(m.MessageID),
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

// callback translates a button press on one of the bot's messages. A press
// is not answered here: the Hub answers those it accepts (AnswerCallback)
// and leaves strangers' presses unanswered.
func (g *Gateway) callback(u tgbotapi.Update) (gateways.Message, bool) {
	q := u.CallbackQuery
	log := g.log.With("update_id", u.UpdateID)
	switch {
	case q.ID == "" || q.From == nil:
		log.Debug("skipping a callback query without id or sender")
		return gateways.Message{}, false
	case q.Message == nil || q.Message.Chat == nil:
		// Inline-mode messages and messages too old to be delivered carry
		// no chat to attribute the press to.
		log.Debug("skipping a callback query without its message")
		return gateways.Message{}, false
	case q.Data == "" || len(q.Data) > maxCallbackData:
		log.Debug("skipping a callback query without valid data")
		return gateways.Message{}, false
	}
	chatType, known := chatType(q.Message.Chat.Type)
	if !known {
		log.Debug("skipping a callback query from an unknown chat type", "type", q.Message.Chat.Type)
		return gateways.Message{}, false
	}
	msgID := strconv.Itoa(q.Message.MessageID)
	return gateways.Message{
		Gateway:  gatewayName,
		ID:       msgID,
		ChatID:   strconv.FormatInt(q.Message.Chat.ID, 10),
		ChatType: chatType,
		ChatName: chatName(q.Message.Chat),
		UserID:   strconv.FormatInt(q.From.ID, 10),
		UserName: userName(q.From),
		// A press has no date of its own; the update arrives as it happens.
		Time:     time.Now().UTC().Truncate(time.Second),
		Callback: &gateways.Callback{ID: q.ID, Data: q.Data, MessageID: msgID},
	}, true
}

// attachments lists the files of a message. Of a photo's sizes only the
// largest is kept.
func attachments(m *tgbotapi.Message) []gateways.Attachment {
	var out []gateways.Attachment
	if d := m.Document; d != nil && d.FileID != "" {
		out = append(out, gateways.Attachment{ID: d.FileID, Name: d.FileName, Size: int64(d.FileSize), Kind: "document", MIME: d.MimeType})
	}
	if p, ok := largest(m.Photo); ok {
		out = append(out, gateways.Attachment{ID: p.FileID, Size: int64(p.FileSize), Kind: "photo", MIME: "image/jpeg"})
	}
	if v := m.Voice; v != nil && v.FileID != "" {
		out = append(out, gateways.Attachment{ID: v.FileID, Size: int64(v.FileSize), Kind: "voice", MIME: v.MimeType})
	}
	if a := m.Audio; a != nil && a.FileID != "" {
		out = append(out, gateways.Attachment{ID: a.FileID, Name: a.FileName, Size: int64(a.FileSize), Kind: "audio", MIME: a.MimeType})
	}
	return out
}

// largest picks the photo size with the most pixels (then bytes).
func largest(sizes []tgbotapi.PhotoSize) (tgbotapi.PhotoSize, bool) {
	best, ok := tgbotapi.PhotoSize{}, false
	for _, p := range sizes {
		if p.FileID == "" {
			continue
		}
		if !ok || p.Width*p.Height > best.Width*best.Height ||
			p.Width*p.Height == best.Width*best.Height && p.FileSize > best.FileSize {
			best, ok = p, true
		}
	}
	return best, ok
}

func chatType(t string) (gateways.ChatType, bool) {
	switch t {
	case "private":
		return gateways.ChatPrivate, true
	case "group", "supergroup":
		return gateways.ChatGroup, true
	case "channel":
		return gateways.ChatChannel, true
	}
	return "", false
}

// chatName is the group's title, else the person's name, else @username.
func chatName(c *tgbotapi.Chat) string {
	if c.Title != "" {
		return c.Title
	}
	if name := strings.TrimSpace(c.FirstName + " " + c.LastName); name != "" {
		return name
	}
	if c.UserName != "" {
		return "@" + c.UserName
	}
	return ""
}

// userName is the sender's @username (without "@"), else their full name.
func userName(u *tgbotapi.User) string {
	if u.UserName != "" {
		return u.UserName
	}
	return strings.TrimSpace(u.FirstName + " " + u.LastName)
}

// utf16Len is the length of s in UTF-16 code units, Telegram's measure.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
