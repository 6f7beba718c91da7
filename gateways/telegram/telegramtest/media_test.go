package telegramtest_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

func keyboard(data ...string) tgbotapi.InlineKeyboardMarkup {
	var row []tgbotapi.InlineKeyboardButton
	for _, d := range data {
		row = append(row, tgbotapi.NewInlineKeyboardButtonData("b", d))
	}
	return tgbotapi.NewInlineKeyboardMarkup(row)
}

func TestInlineKeyboards(t *testing.T) {
	srv := newServer(t)
	srv.AddChat(telegramtest.Private(alice))
	bot := newBot(t, srv)
	cfg := msg("pick", "")
	cfg.ReplyMarkup = keyboard(strings.Repeat("x", 65))
	if _, err := bot.Send(cfg); err == nil || apiError(t, err).Message != "Bad Request: BUTTON_DATA_INVALID" {
		t.Errorf("65-byte callback data: %v, want BUTTON_DATA_INVALID", err)
	}
	cfg.ReplyMarkup = keyboard("approve:a1", "deny:a1")
	m, err := bot.Send(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.ReplyMarkup == nil || len(m.ReplyMarkup.InlineKeyboard[0]) != 2 {
		t.Errorf("returned message lacks its keyboard: %+v", m.ReplyMarkup)
	}
	if kb := srv.Sent()[0].Keyboard; len(kb) != 1 || kb[0][1].CallbackData != "deny:a1" {
		t.Errorf("recorded keyboard %+v", kb)
	}

	// The same keyboard again is "not modified"; none removes it.
	same := tgbotapi.NewEditMessageReplyMarkup(1111, m.MessageID, keyboard("approve:a1", "deny:a1"))
	if _, err := bot.Request(same); err == nil || !strings.Contains(err.Error(), "message is not modified") {
		t.Errorf("unchanged markup: %v, want not modified", err)
	}
	none := tgbotapi.NewEditMessageReplyMarkup(1111, m.MessageID, tgbotapi.InlineKeyboardMarkup{InlineKeyboard: [][]tgbotapi.InlineKeyboardButton{}})
	if _, err := bot.Request(none); err != nil {
		t.Fatal(err)
	}
	s := srv.Sent()[0]
	if s.Keyboard != nil || len(s.Edits) != 1 || s.Edits[0].Method != "editMessageReplyMarkup" {
		t.Errorf("after removal: keyboard %+v, edits %+v", s.Keyboard, s.Edits)
	}

	// An edit of the text without reply_markup removes a keyboard too.
	cfg.ReplyMarkup = keyboard("x")
	m2, _ := bot.Send(cfg)
	if _, err := bot.Send(tgbotapi.NewEditMessageText(1111, m2.MessageID, "picked")); err != nil {
		t.Fatal(err)
	}
	if s := srv.Sent()[1]; s.Keyboard != nil || s.Current() != "picked" || s.Plain != "pick" {
		t.Errorf("after a text edit: keyboard %+v, current %q, plain %q", s.Keyboard, s.Current(), s.Plain)
	}
}

func TestChatRateLimit(t *testing.T) {
	srv := newServer(t)
	srv.AddChat(telegramtest.Private(alice))
	srv.AddChat(telegramtest.Private(bob))
	bot := newBot(t, srv)
	for i := range telegramtest.ChatRateBurst {
		if _, err := bot.Send(msg("burst", "")); err != nil {
			t.Fatalf("message %d of the burst: %v", i, err)
		}
	}
	if _, err := bot.Send(msg("off", "")); err != nil || srv.ChatRateViolations() != 0 {
		t.Fatalf("the model is on while off: %v", err)
	}
	srv.SetChatRateLimit(true)
	for range telegramtest.ChatRateBurst {
		if _, err := bot.Send(msg("burst", "")); err != nil {
			t.Fatal(err)
		}
	}
	_, err := bot.Send(msg("one too many", ""))
	if e := apiError(t, err); e.Code != 429 || e.RetryAfter != 1 {
		t.Errorf("beyond the burst: %d retry_after %d, want 429 with retry_after 1", e.Code, e.RetryAfter)
	}
	if _, err := bot.Send(tgbotapi.NewMessage(2222, "other chat")); err != nil {
		t.Errorf("another chat was limited too: %v", err)
	}
	if _, err := bot.Request(tgbotapi.NewChatAction(1111, tgbotapi.ChatTyping)); err != nil {
		t.Errorf("a chat action was limited: %v", err)
	}
	if n := srv.ChatRateViolations(); n != 1 {
		t.Errorf("%d violations, want 1", n)
	}
}

func TestFilesInAndOut(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	content := []byte("hello file")
	id := srv.AddFile(content, "hello.txt")
	srv.SendDocument(telegramtest.Private(alice), alice, id, "caption")
	f, err := bot.GetFile(tgbotapi.FileConfig{FileID: id})
	if err != nil || f.FileSize != len(content) || f.FilePath == "" {
		t.Fatalf("getFile = %+v, %v", f, err)
	}
	get := func(tok string) (int, []byte) {
		resp, err := http.Get(srv.URL() + "/file/bot" + tok + "/" + f.FilePath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := get(token); code != 200 || !bytes.Equal(b, content) {
		t.Errorf("download = %d %q, want the content", code, b)
	}
	if code, _ := get("1:wrong"); code != 404 {
		t.Errorf("download with a wrong token = %d, want 404", code)
	}
	if _, err := bot.GetFile(tgbotapi.FileConfig{FileID: "nope"}); err == nil {
		t.Error("getFile of an unknown id succeeded")
	}

	doc := tgbotapi.NewDocument(1111, tgbotapi.FileBytes{Name: "out.bin", Bytes: []byte{0, 1, 2, 255}})
	if _, err := bot.Send(doc); err != nil {
		t.Fatal(err)
	}
	photo := tgbotapi.NewPhoto(1111, tgbotapi.FileBytes{Name: "not.png", Bytes: []byte("text")})
	if _, err := bot.Send(photo); err == nil || !strings.Contains(err.Error(), "IMAGE_PROCESS_FAILED") {
		t.Errorf("sendPhoto of text = %v, want IMAGE_PROCESS_FAILED", err)
	}
	sent := srv.SentTo(1111)
	if len(sent) != 1 || sent[0].Method != "sendDocument" || sent[0].File == nil ||
		!bytes.Equal(sent[0].File.Data, []byte{0, 1, 2, 255}) || sent[0].File.Name != "out.bin" {
		t.Errorf("sent %+v, want the document byte for byte", sent)
	}
}
