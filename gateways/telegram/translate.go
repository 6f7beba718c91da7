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
	msgs      []gateways.Message
	next      int      // offset that confirms the whole batch
	count     int      // updates at or past the offset, usable or not
	callbacks []string // callback query ids to answer
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
		if u.CallbackQuery != nil && u.CallbackQuery.ID != "" {
			b.callbacks = append(b.callbacks, u.CallbackQuery.ID)
		}
		if m, ok := g.message(u); ok {
			b.msgs = append(b.msgs, m)
		}
	}
	return b
}

// message translates an update carrying a usable message: text or caption,
// a known chat type and a sender.
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
	chatType, known := chatType(m.Chat.Type)
	switch {
	case text == "":
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
	}, true
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
