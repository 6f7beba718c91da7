package telegramtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

const token = "123456789:AAHtest-secret_token"

var (
	alice = telegramtest.User{ID: 1111, FirstName: "Alice", Username: "alice"}
	bob   = telegramtest.User{ID: 2222, FirstName: "Bob", LastName: "Builder"}
)

func newServer(t *testing.T) *telegramtest.Server {
	t.Helper()
	srv := telegramtest.New(token)
	t.Cleanup(srv.Close)
	return srv
}

func newBot(t *testing.T, srv *telegramtest.Server) *tgbotapi.BotAPI {
	t.Helper()
	bot, err := tgbotapi.NewBotAPIWithClient(token, srv.URL()+"/bot%s/%s", &http.Client{})
	if err != nil {
		t.Fatalf("NewBotAPIWithClient: %v", err)
	}
	return bot
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// apiError extracts the Bot API error the library returned.
func apiError(t *testing.T, err error) *tgbotapi.Error {
	t.Helper()
	var e *tgbotapi.Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v (%T), want *tgbotapi.Error", err, err)
	}
	return e
}

func TestGetMe(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	if bot.Self.UserName != "latch_test_bot" || bot.Self.ID != 123456789 || !bot.Self.IsBot {
		t.Errorf("getMe = %+v, want latch_test_bot with id 123456789", bot.Self)
	}
	srv.SetBotUsername("other_bot")
	me, err := bot.GetMe()
	if err != nil || me.UserName != "other_bot" {
		t.Errorf("getMe after SetBotUsername = %+v, %v; want other_bot", me, err)
	}
}

func TestWrongTokenIsUnauthorized(t *testing.T) {
	srv := newServer(t)
	_, err := tgbotapi.NewBotAPIWithClient("999:wrong", srv.URL()+"/bot%s/%s", &http.Client{})
	if e := apiError(t, err); e.Code != 401 || e.Message != "Unauthorized" {
		t.Errorf("error = %d %q, want 401 Unauthorized", e.Code, e.Message)
	}
}

func TestMethodNames(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	if _, err := bot.MakeRequest("GETME", nil); err != nil {
		t.Errorf("GETME: %v, want method names to be case-insensitive", err)
	}
	_, err := bot.MakeRequest("noSuchMethod", nil)
	if e := apiError(t, err); e.Code != 404 || e.Message != "Not Found" {
		t.Errorf("unknown method: %d %q, want 404 Not Found", e.Code, e.Message)
	}
	if got := srv.Count("getme"); got != 2 {
		t.Errorf("Count(getme) = %d, want 2 (NewBotAPI and GETME)", got)
	}
}

func TestParameterEncodings(t *testing.T) {
	srv := newServer(t)
	srv.AddChat(telegramtest.Private(alice))
	base := srv.URL() + "/bot" + token + "/sendMessage"
	for _, name := range []string{"query", "form", "json", "multipart"} {
		t.Run(name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(encodedRequest(t, name, base))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				OK     bool `json:"ok"`
				Result struct {
					Text string `json:"text"`
					Chat struct {
						ID int64 `json:"id"`
					} `json:"chat"`
				} `json:"result"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if !got.OK || got.Result.Text != name || got.Result.Chat.ID != 1111 {
				t.Errorf("answer = %+v, want ok with text %q in chat 1111", got, name)
			}
		})
	}
}

// encodedRequest builds a sendMessage request to chat 1111 whose text is the
// name of the encoding used for its parameters.
func encodedRequest(t *testing.T, encoding, base string) *http.Request {
	t.Helper()
	var body io.Reader
	ctype, method, target := "", "POST", base
	switch encoding {
	case "query":
		method, target = "GET", base+"?chat_id=1111&text=query"
	case "form":
		ctype, body = "application/x-www-form-urlencoded", strings.NewReader(url.Values{"chat_id": {"1111"}, "text": {"form"}}.Encode())
	case "json":
		ctype, body = "application/json", strings.NewReader(`{"chat_id":1111,"text":"json"}`)
	case "multipart":
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		_ = w.WriteField("chat_id", "1111")
		_ = w.WriteField("text", "multipart")
		_ = w.Close()
		ctype, body = w.FormDataContentType(), &b
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req
}

func TestGetUpdatesOffsetConfirms(t *testing.T) {
	srv := newServer(t)
	srv.SetPrivacyMode(false)
	bot := newBot(t, srv)
	ids := []int{
		srv.SendText(telegramtest.Private(alice), alice, "one"),
		srv.SendText(telegramtest.Group(42, "Team"), bob, "two"),
		srv.SendText(telegramtest.Supergroup(43, "Big"), bob, "/status now"),
	}
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
	if err != nil || len(ups) != 3 {
		t.Fatalf("GetUpdates = %d updates, %v; want 3", len(ups), err)
	}
	for i, u := range ups {
		if u.UpdateID != ids[i] {
			t.Errorf("update %d id = %d, want %d", i, u.UpdateID, ids[i])
		}
	}
	m := ups[0].Message
	if m.Chat.ID != alice.ID || m.Chat.Type != "private" || m.From.ID != alice.ID || m.Text != "one" || m.Date == 0 {
		t.Errorf("private message = %+v chat %+v, want text one from alice in her private chat", m, m.Chat)
	}
	if c := ups[1].Message.Chat; c.ID != -42 || c.Type != "group" || c.Title != "Team" {
		t.Errorf("group chat = %+v, want -42 group Team", c)
	}
	if c := ups[2].Message.Chat; c.ID != -1000000000043 || c.Type != "supergroup" {
		t.Errorf("supergroup chat = %+v, want -1000000000043 supergroup", c)
	}
	if cmd := ups[2].Message.Command(); cmd != "status" {
		t.Errorf("Command() = %q, want status (bot_command entity)", cmd)
	}

	ups, err = bot.GetUpdates(tgbotapi.UpdateConfig{Offset: ids[1] + 1})
	if err != nil || len(ups) != 1 || ups[0].UpdateID != ids[2] {
		t.Fatalf("GetUpdates(offset) = %v, %v; want only the last update", ups, err)
	}
	if got := srv.ConfirmedOffset(); got != ids[1]+1 {
		t.Errorf("ConfirmedOffset = %d, want %d", got, ids[1]+1)
	}
	if got := srv.Pending(); got != 1 {
		t.Errorf("Pending = %d, want 1", got)
	}
	ups, err = bot.GetUpdates(tgbotapi.UpdateConfig{Offset: ids[0]})
	if err != nil || len(ups) != 1 {
		t.Errorf("confirmed updates came back: %v, %v", ups, err)
	}
}

func TestGetUpdatesLimitAndAllowedUpdates(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	for range 3 {
		srv.SendText(telegramtest.Private(alice), alice, "hi")
	}
	cb, _ := srv.SendCallback(telegramtest.Private(alice), alice, 1, "data")
	srv.PushUpdate(json.RawMessage(`{"edited_message":{"message_id":1,"date":1,"chat":{"id":1111,"type":"private"}}}`))

	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{Limit: 2})
	if err != nil || len(ups) != 2 {
		t.Fatalf("limit 2: %d updates, %v", len(ups), err)
	}
	ups, err = bot.GetUpdates(tgbotapi.UpdateConfig{AllowedUpdates: []string{"message", "callback_query"}})
	if err != nil || len(ups) != 4 || ups[3].UpdateID != cb || ups[3].CallbackQuery == nil {
		t.Fatalf("allowed updates: %d updates, %v; want 3 messages and the callback, no edit", len(ups), err)
	}
	if got := srv.AllowedUpdates(); len(got) != 2 {
		t.Errorf("AllowedUpdates = %v", got)
	}
}

func TestLongPollWaitsForUpdate(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	type result struct {
		ups []tgbotapi.Update
		err error
	}
	done := make(chan result, 1)
	go func() {
		ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 30})
		done <- result{ups, err}
	}()
	ctx := testContext(t)
	if err := srv.Wait(ctx, srv.Polling); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("long poll returned before any update: %+v", r)
	default:
	}
	id := srv.SendText(telegramtest.Private(alice), alice, "wake up")
	select {
	case r := <-done:
		if r.err != nil || len(r.ups) != 1 || r.ups[0].UpdateID != id {
			t.Errorf("long poll = %+v, want the new update %d", r, id)
		}
	case <-ctx.Done():
		t.Fatal("long poll did not return after an update arrived")
	}
}

func TestLongPollTimeout(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	start := time.Now()
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 1})
	if err != nil || len(ups) != 0 {
		t.Fatalf("GetUpdates = %v, %v; want empty", ups, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("long poll with timeout 1 returned after %v, want ≥ 1s", d)
	}
}

func TestConcurrentPollConflict(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	first := make(chan error, 1)
	go func() {
		_, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 30})
		first <- err
	}()
	ctx := testContext(t)
	if err := srv.Wait(ctx, srv.Polling); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		_, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 30})
		second <- err
	}()
	select {
	case err := <-first:
		e := apiError(t, err)
		want := "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
		if e.Code != 409 || e.Message != want {
			t.Errorf("first poll: %d %q, want 409 %q", e.Code, e.Message, want)
		}
	case <-ctx.Done():
		t.Fatal("first poll was not terminated by the second")
	}
	srv.SendText(telegramtest.Private(alice), alice, "hi")
	if err := <-second; err != nil {
		t.Errorf("second poll: %v, want the update", err)
	}
}

func TestCloseUnblocksLongPoll(t *testing.T) {
	srv := telegramtest.New(token)
	bot := newBot(t, srv)
	done := make(chan struct{})
	go func() {
		_, _ = bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 60})
		close(done)
	}()
	ctx := testContext(t)
	if err := srv.Wait(ctx, srv.Polling); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Close did not end the long poll")
	}
	if err := srv.Wait(ctx, func() bool { return false }); !errors.Is(err, telegramtest.ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
}

func TestWebhookBlocksPolling(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	srv.SetWebhook("https://example.com/hook")
	_, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
	if e := apiError(t, err); e.Code != 409 || !strings.Contains(e.Message, "webhook is active") {
		t.Errorf("poll with webhook: %d %q, want 409 webhook conflict", e.Code, e.Message)
	}
	srv.SendText(telegramtest.Private(alice), alice, "kept")
	if _, err := bot.Request(tgbotapi.DeleteWebhookConfig{}); err != nil {
		t.Fatal(err)
	}
	info, err := bot.GetWebhookInfo()
	if err != nil || info.URL != "" || info.PendingUpdateCount != 1 {
		t.Errorf("webhook info = %+v, %v; want no URL and 1 pending update", info, err)
	}
	if _, err := bot.Request(tgbotapi.DeleteWebhookConfig{DropPendingUpdates: true}); err != nil || srv.Pending() != 0 {
		t.Errorf("drop_pending_updates left %d updates (%v)", srv.Pending(), err)
	}
}

func TestPushUpdate(t *testing.T) {
	srv := newServer(t)
	a := srv.PushUpdate(json.RawMessage(`{"message":{"message_id":"seven"},"update_id":1}`))
	b := srv.PushUpdate(json.RawMessage(`"not an update"`))
	resp, err := http.Get(srv.URL() + "/bot" + token + "/getUpdates")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		OK     bool              `json:"ok"`
		Result []json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got.Result) != 2 {
		t.Fatalf("got %d updates, want 2", len(got.Result))
	}
	var first struct {
		UpdateID int             `json:"update_id"`
		Message  json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(got.Result[0], &first); err != nil || first.UpdateID != a || string(first.Message) != `{"message_id":"seven"}` {
		t.Errorf("first update = %s, want the raw message with update_id %d", got.Result[0], a)
	}
	if string(got.Result[1]) != `"not an update"` {
		t.Errorf("second update = %s, want it verbatim", got.Result[1])
	}
	bot := newBot(t, srv)
	if _, err := bot.GetUpdates(tgbotapi.UpdateConfig{Offset: b + 1}); err != nil || srv.Pending() != 0 {
		t.Errorf("confirming past raw updates: pending %d, %v", srv.Pending(), err)
	}
}

func TestEntitiesCountUTF16(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	srv.AddChat(telegramtest.Private(alice))
	cfg := tgbotapi.NewMessage(alice.ID, "😀 <b>x</b> <a href='https://x.test/?q=&lt;'>l</a>")
	cfg.ParseMode = tgbotapi.ModeHTML
	m, err := bot.Send(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entities) != 2 || m.Entities[0].Type != "bold" || m.Entities[0].Offset != 3 || m.Entities[0].Length != 1 ||
		m.Entities[1].URL != "https://x.test/?q=<" || m.Entities[1].Offset != 5 {
		t.Errorf("entities = %+v, want bold at UTF-16 offset 3 and a link at 5", m.Entities)
	}
}
