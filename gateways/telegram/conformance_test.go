package telegram_test

import (
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/gatewaytest"
	"github.com/latchd/latch/gateways/telegram"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// TestConformance runs the suite every adapter passes against the fake
// Bot API.
func TestConformance(t *testing.T) {
	gatewaytest.Run(t, newConformanceFake)
}

func newConformanceFake(t *testing.T) *gatewaytest.Fake {
	const token = "987654321:AAF-secretTokenValue_0123456789abcdefg"
	srv := telegramtest.New(token)
	t.Cleanup(srv.Close)
	owner := telegramtest.User{ID: 1111, FirstName: "Alice", Username: "alice"}
	stranger := telegramtest.User{ID: 2222, FirstName: "Bob"}
	other := telegramtest.User{ID: 3333, FirstName: "Carol"}
	ownerChat := telegramtest.Chat{ID: owner.ID, Type: "private", FirstName: owner.FirstName}
	strangerChat := telegramtest.Chat{ID: stranger.ID, Type: "private", FirstName: stranger.FirstName}
	room := telegramtest.Chat{ID: -1001234, Type: "supergroup", Title: "shared"}

	var mu sync.Mutex
	texts := map[string]string{} // the owner's messages by update id, to replay
	messages := func(chat int64) []gatewaytest.Message {
		var out []gatewaytest.Message
		for _, s := range srv.SentTo(chat) {
			m := gatewaytest.Message{ID: strconv.Itoa(s.MessageID), Text: s.Plain}
			if n := len(s.Edits); n > 0 && s.Edits[n-1].Method == "editMessageText" {
				m.Text = s.Edits[n-1].Plain
			}
			for _, e := range s.Entities {
				m.Pings = m.Pings || e.Type == "mention" || e.Type == "text_mention"
			}
			out = append(out, m)
		}
		return out
	}
	return &gatewaytest.Fake{
		Name:  "telegram",
		Token: token,
		New: func(tok string, log *slog.Logger) gateways.Gateway {
			return telegram.New(telegram.Config{Token: tok, APIURL: srv.URL(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, log)
		},
		Limit:     4096,
		Measure:   func(s string) int { return len(utf16.Encode([]rune(s))) },
		OwnerChat: strconv.FormatInt(owner.ID, 10),
		// Updates wait in the fake's queue while latch is down.
		FromOwner: func(text string, _ bool) string {
			d := srv.Deliver(telegramtest.Incoming{Chat: ownerChat, From: &owner, Text: text})
			id := fmt.Sprintf("%d/%d", d.UpdateID, d.MessageID)
			mu.Lock()
			texts[id] = text
			mu.Unlock()
			return id
		},
		FromStranger: func(text string) { srv.SendText(strangerChat, stranger, text) },
		FromOther:    func(text string) { srv.SendText(room, other, text) },
		// A replay of the update in the next poll's answer, as a proxy or
		// a retried request would serve it.
		Redeliver: func(id string) {
			var update, message int
			fmt.Sscanf(id, "%d/%d", &update, &message)
			mu.Lock()
			text := texts[id]
			mu.Unlock()
			raw := fmt.Sprintf(`{"ok":true,"result":[{"update_id":%d,"message":{"message_id":%d,"date":%d,`+
				`"chat":{"id":%d,"type":"private","first_name":%q},"from":{"id":%d,"is_bot":false,"first_name":%q},"text":%q}}]}`,
				update, message, time.Now().Unix(), owner.ID, owner.FirstName, owner.ID, owner.FirstName, text)
			srv.Inject("getUpdates", telegramtest.Fault{Body: raw})
		},
		ToOwner:    func() []gatewaytest.Message { return messages(owner.ID) },
		ToStranger: func() []gatewaytest.Message { return messages(stranger.ID) },
		ToOther:    func() []gatewaytest.Message { return messages(room.ID) },
		Press: func(id, data string) (func() int, error) {
			msg, err := strconv.Atoi(id)
			if err != nil {
				return nil, err
			}
			_, query := srv.SendCallback(ownerChat, owner, msg, data)
			return func() int {
				n := 0
				for _, c := range srv.Calls("answerCallbackQuery") {
					if c.Params["callback_query_id"] == query {
						n++
					}
				}
				return n
			}, nil
		},
		FailSends: func(status, n, retryAfter int) {
			srv.Inject("sendMessage", telegramtest.Fault{Status: status, RetryAfter: retryAfter, Times: n})
		},
		ClearFaults: func() { srv.ClearFaults("sendMessage") },
		Sends:       func() int { return srv.Count("sendMessage") },
	}
}
