package telegramtest_test

import (
	"strings"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

func TestKeepUserMessagesForgetsTheOldest(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	chat := telegramtest.Private(alice)
	srv.KeepUserMessages(2)
	var ids []int
	for _, text := range []string{"one", "two", "three"} {
		ids = append(ids, srv.Deliver(telegramtest.Incoming{Chat: chat, From: &alice, Text: text}).MessageID)
	}
	reply := func(id int) error {
		m := tgbotapi.NewMessage(alice.ID, "re")
		m.ReplyToMessageID = id
		_, err := bot.Send(m)
		return err
	}
	if err := reply(ids[0]); err == nil || !strings.Contains(apiError(t, err).Message, "message to be replied not found") {
		t.Errorf("reply to the forgotten message: err = %v, want message to be replied not found", err)
	}
	for _, id := range ids[1:] {
		if err := reply(id); err != nil {
			t.Errorf("reply to kept message %d: %v", id, err)
		}
	}
	// The bot's own messages are kept whatever the bound.
	sent := srv.SentTo(alice.ID)
	for range 3 {
		srv.Deliver(telegramtest.Incoming{Chat: chat, From: &alice, Text: "more"})
	}
	if err := reply(sent[0].MessageID); err != nil {
		t.Errorf("reply to the bot's own message: %v", err)
	}
}

func TestKeepCallsBoundsCallsNotCount(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	srv.KeepCalls("getMe", 3)
	for range 10 {
		if _, err := bot.GetMe(); err != nil {
			t.Fatal(err)
		}
	}
	// newBot's own getMe plus ten.
	if got := srv.Count("getMe"); got != 11 {
		t.Errorf("Count = %d, want 11", got)
	}
	if got := len(srv.Calls("getme")); got != 3 {
		t.Errorf("len(Calls) = %d, want the newest 3", got)
	}
	// Other methods keep everything.
	for range 5 {
		if _, err := bot.Send(tgbotapi.NewChatAction(alice.ID, tgbotapi.ChatTyping)); err == nil {
			t.Fatal("typing in an unknown chat succeeded")
		}
	}
	if got := len(srv.Calls("sendChatAction")); got != 5 {
		t.Errorf("len(Calls(sendChatAction)) = %d, want 5", got)
	}
}
