package telegramtest_test

import (
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// getIDs polls once, without waiting, and returns the update ids.
func getIDs(t *testing.T, bot *tgbotapi.BotAPI, offset int) []int {
	t.Helper()
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{Offset: offset})
	if err != nil {
		t.Fatalf("getUpdates(offset %d): %v", offset, err)
	}
	var ids []int
	for _, u := range ups {
		ids = append(ids, u.UpdateID)
	}
	return ids
}

// TestSkipWeekRestartsIDsBelow: after a week without updates the ids start
// again lower, and an offset from before is "in the future": getUpdates
// answers from the queue's head and confirms nothing, as telegram-bot-api
// does.
func TestSkipWeekRestartsIDsBelow(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	one := srv.SendText(telegramtest.Private(alice), alice, "one")
	if ids := getIDs(t, bot, one+1); len(ids) != 0 || srv.ConfirmedOffset() != one+1 {
		t.Fatalf("getUpdates = %v, confirmed %d; want nothing and %d", ids, srv.ConfirmedOffset(), one+1)
	}

	next := srv.SkipWeek()
	if next < 1 || next >= one-10 {
		t.Fatalf("SkipWeek = %d, want an id far below %d", next, one)
	}
	if srv.ConfirmedOffset() != 0 {
		t.Errorf("ConfirmedOffset after SkipWeek = %d, want 0", srv.ConfirmedOffset())
	}
	two := srv.SendText(telegramtest.Private(alice), alice, "two")
	three := srv.SendText(telegramtest.Private(alice), alice, "three")
	if two != next || three != next+1 {
		t.Fatalf("ids after SkipWeek = %d, %d; want %d, %d", two, three, next, next+1)
	}
	for range 2 { // asked again, the same: nothing was confirmed
		if ids := getIDs(t, bot, one+1); len(ids) != 2 || ids[0] != two || srv.Pending() != 2 {
			t.Fatalf("getUpdates(old offset) = %v with %d pending; want [%d %d] from the head, kept", ids, srv.Pending(), two, three)
		}
	}
	// Within 10 of the tail an offset is taken as it is.
	if ids := getIDs(t, bot, three+5); len(ids) != 0 || srv.Pending() != 0 || srv.ConfirmedOffset() != three+5 {
		t.Errorf("getUpdates(tail+4) = %v, %d pending, confirmed %d; want everything below it confirmed",
			ids, srv.Pending(), srv.ConfirmedOffset())
	}
}
