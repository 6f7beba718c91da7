package telegramtest_test

import (
	"slices"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// TestPrivacyMode: with privacy mode on (a new bot's default) a group
// message reaches the bot only if it is meant for it; private chats are not
// affected, and getMe says which mode is on.
func TestPrivacyMode(t *testing.T) {
	group := telegramtest.Supergroup(43, "Big")
	for _, on := range []bool{true, false} {
		srv := newServer(t)
		srv.SetPrivacyMode(on)
		bot := newBot(t, srv)
		if bot.Self.CanReadAllGroupMessages == on {
			t.Errorf("privacy mode %t: getMe can_read_all_group_messages = %t", on, bot.Self.CanReadAllGroupMessages)
		}
		srv.AddChat(group)
		botMsg, err := bot.Send(tgbotapi.NewMessage(group.ID, "which one?"))
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			in   telegramtest.Incoming
			seen bool // with privacy mode on
		}{
			{telegramtest.Incoming{Chat: group, From: &bob, Text: "/pair ABCD"}, true},
			{telegramtest.Incoming{Chat: group, From: &bob, Text: "/stop@Latch_Test_Bot"}, true},
			{telegramtest.Incoming{Chat: group, From: &bob, Text: "/stop@other_bot"}, false},
			{telegramtest.Incoming{Chat: group, From: &bob, Text: "hello all"}, false},
			{telegramtest.Incoming{Chat: group, From: &bob, Text: "!ls"}, false},
			{telegramtest.Incoming{Chat: group, From: &bob, Text: "hey @latch_test_bot, look"}, true},
			{telegramtest.Incoming{Chat: group, From: &bob, Text: "hey @latch_test_bots"}, false},
			{telegramtest.Incoming{Chat: group, From: &bob, Text: "this one", ReplyTo: botMsg.MessageID}, true},
			{telegramtest.Incoming{Chat: telegramtest.Group(42, "Team"), From: &bob, Text: "plain"}, false},
			{telegramtest.Incoming{Chat: telegramtest.Private(alice), From: &alice, Text: "plain"}, true},
			{telegramtest.Incoming{Chat: telegramtest.Channel(44, "News"), Text: "post"}, true},
		}
		var want []int
		for _, tt := range tests {
			d := srv.Deliver(tt.in)
			if reached := tt.seen || !on; reached != (d.UpdateID != 0) || d.MessageID == 0 {
				t.Errorf("privacy mode %t: %q in %s gave update %d, message %d; want an update: %t",
					on, tt.in.Text, tt.in.Chat.Type, d.UpdateID, d.MessageID, reached)
			}
			if d.UpdateID != 0 {
				want = append(want, d.UpdateID)
			}
		}
		ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{AllowedUpdates: []string{"message", "channel_post"}})
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, u := range ups {
			got = append(got, u.UpdateID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("privacy mode %t: getUpdates = %v, want %v", on, got, want)
		}
	}
}
