package telegramtest

import (
	"strings"
)

// SetPrivacyMode turns the bot's privacy mode on or off, as BotFather's
// /setprivacy does; getMe reports it as can_read_all_group_messages (true
// when off). It is on for a new server, as for a new bot on Telegram.
//
// With it on, a message in a group or supergroup reaches the bot only if it
// is a command for the bot or for no bot in particular ("/start",
// "/start@latch_test_bot"), a reply to one of the bot's messages, or
// mentions the bot's @username; any other message there exists (it has an
// id, and can be replied to) but makes no update, and Deliver returns
// UpdateID 0. Private chats and channels are not affected. Telegram passes
// a command without a bot's name only if the bot was the last bot to post
// in the group; the fake, with one bot, always does. On Telegram a change
// applies to a group only once the bot is removed from it and added again;
// in the fake it applies at once.
func (s *Server) SetPrivacyMode(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.privacyOff = !on
}

// hiddenLocked reports whether privacy mode keeps m, a user's message in
// chat c, from the bot.
func (s *Server) hiddenLocked(c *chatState, m *message) bool {
	if s.privacyOff || c.chat.Type != "group" && c.chat.Type != "supergroup" {
		return false
	}
	text := m.text
	if text == "" {
		text = m.caption
	}
	if words := strings.Fields(text); len(words) > 0 && len(words[0]) > 1 && words[0][0] == '/' {
		if _, to, named := strings.Cut(words[0], "@"); !named || strings.EqualFold(to, s.bot.Username) {
			return false
		}
	}
	if r := c.messages[m.replyTo]; r != nil && r.fromBot {
		return false
	}
	return !mentions(text, s.bot.Username)
}

// mentions reports whether text mentions @name as a word.
func mentions(text, name string) bool {
	if name == "" {
		return false
	}
	lower, at := strings.ToLower(text), "@"+strings.ToLower(name)
	for i := 0; ; {
		j := strings.Index(lower[i:], at)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(at)
		if (start == 0 || !wordByte(lower[start-1])) && (end == len(lower) || !wordByte(lower[end])) {
			return true
		}
		i = end
	}
}

func wordByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9'
}
