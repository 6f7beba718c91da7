package telegramtest_test

import (
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// TestDeliverOnBehalfOfChat checks the shape of messages sent on behalf of a
// chat as the library decodes them: sender_chat names the chat and, outside
// channels, from names Telegram's placeholder rather than a person.
func TestDeliverOnBehalfOfChat(t *testing.T) {
	srv := newServer(t)
	srv.SetPrivacyMode(false)
	bot := newBot(t, srv)
	group := telegramtest.Supergroup(77, "Ops")
	channel := telegramtest.Channel(78, "Ops news")
	srv.Deliver(telegramtest.Incoming{Chat: group, From: &alice, Text: "person"})
	srv.Deliver(telegramtest.Incoming{Chat: group, Text: "anonymous admin"})
	srv.Deliver(telegramtest.Incoming{Chat: group, SenderChat: &channel, Text: "as a channel"})
	srv.Deliver(telegramtest.Incoming{Chat: group, SenderChat: &channel, AutomaticForward: true, Text: "forward"})
	srv.Deliver(telegramtest.Incoming{Chat: channel, Text: "channel post"})
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
	if err != nil || len(ups) != 5 {
		t.Fatalf("GetUpdates = %d updates, %v; want 5", len(ups), err)
	}
	tests := []struct {
		name       string
		msg        *tgbotapi.Message
		from       *telegramtest.User // nil: no from
		senderChat int64              // 0: no sender_chat
		forward    bool
	}{
		{"person", ups[0].Message, &alice, 0, false},
		{"anonymous admin", ups[1].Message, ptr(telegramtest.GroupAnonymousBot()), group.ID, false},
		{"as a channel", ups[2].Message, ptr(telegramtest.ChannelBot()), channel.ID, false},
		{"automatic forward", ups[3].Message, ptr(telegramtest.ServiceUser()), channel.ID, true},
		{"channel post", ups[4].ChannelPost, nil, channel.ID, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.msg
			if m == nil {
				t.Fatalf("update %+v lacks the message", ups)
			}
			switch {
			case tt.from == nil && m.From != nil:
				t.Errorf("from = %+v, want none", m.From)
			case tt.from != nil && (m.From == nil || m.From.ID != tt.from.ID || m.From.IsBot != tt.from.IsBot ||
				m.From.UserName != tt.from.Username || m.From.FirstName != tt.from.FirstName):
				t.Errorf("from = %+v, want %+v", m.From, *tt.from)
			}
			var sender int64
			if m.SenderChat != nil {
				sender = m.SenderChat.ID
			}
			if sender != tt.senderChat || m.IsAutomaticForward != tt.forward {
				t.Errorf("sender_chat %d, is_automatic_forward %t; want %d, %t", sender, m.IsAutomaticForward, tt.senderChat, tt.forward)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
