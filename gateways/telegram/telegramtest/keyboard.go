package telegramtest

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// maxCallbackData is Telegram's limit on a button's callback_data, in bytes.
const maxCallbackData = 64

// markup is reply_markup as the Bot API serialises an inline keyboard.
type markup struct {
	InlineKeyboard [][]Button `json:"inline_keyboard"`
}

// inlineKeyboard reads the reply_markup parameter. Absent, or a kind of
// markup other than an inline keyboard, gives nil.
func inlineKeyboard(p params) ([][]Button, *apiError) {
	raw := p["reply_markup"]
	if raw == "" || raw == "null" {
		return nil, nil
	}
	var m struct {
		InlineKeyboard *[][]Button `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	if m.InlineKeyboard == nil || len(*m.InlineKeyboard) == 0 {
		return nil, nil
	}
	for _, row := range *m.InlineKeyboard {
		for _, b := range row {
			switch {
			case b.Text == "":
				return nil, badRequest("text buttons are unallowed in the inline keyboard")
			case b.URL == "" && (b.CallbackData == "" || len(b.CallbackData) > maxCallbackData):
				return nil, badRequest("BUTTON_DATA_INVALID")
			}
		}
	}
	return *m.InlineKeyboard, nil
}

func sameKeyboard(a, b [][]Button) bool {
	return slices.EqualFunc(a, b, func(x, y []Button) bool { return slices.Equal(x, y) })
}

func cloneKeyboard(kb [][]Button) [][]Button {
	if kb == nil {
		return nil
	}
	out := make([][]Button, len(kb))
	for i, row := range kb {
		out[i] = slices.Clone(row)
	}
	return out
}

func notModified() *apiError {
	return badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
}

// editable finds a message the bot may edit.
func editable(c *chatState, id int64) (*message, *apiError) {
	m := c.messages[int(id)]
	switch {
	case id == 0:
		return nil, badRequest("message identifier is not specified")
	case m == nil:
		return nil, badRequest("message to edit not found")
	case !m.fromBot:
		return nil, badRequest("message can't be edited")
	}
	return m, nil
}

// replyTarget checks reply_to_message_id as sendMessage does.
func replyTarget(c *chatState, p params, replyTo int64) (int64, *apiError) {
	if replyTo != 0 && c.messages[int(replyTo)] == nil {
		if !p.bool("allow_sending_without_reply") {
			return 0, badRequest("message to be replied not found")
		}
		return 0, nil
	}
	return replyTo, nil
}

func (s *Server) editMessageReplyMarkup(_ context.Context, p params) (any, *apiError) {
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
	kb, aerr := inlineKeyboard(p)
	if aerr != nil {
		return nil, aerr
	}
	if sameKeyboard(kb, m.keyboard) {
		return nil, notModified()
	}
	now := time.Now()
	m.keyboard, m.editDate = kb, now.Unix()
	if i, ok := s.sentIndex[msgKey{c.chat.ID, m.id}]; ok {
		s.sent[i].Edits = append(s.sent[i].Edits, Edit{Method: "editMessageReplyMarkup", Keyboard: kb, Time: now})
		s.sent[i].Keyboard = kb
	}
	s.notifyLocked()
	return s.wireLocked(c, m, true), nil
}
