package telegramtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

func TestSendMessageValidation(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	chat := telegramtest.Private(alice)
	srv.SendText(chat, alice, "hello") // message 1 in the chat
	tests := []struct {
		name      string
		cfg       tgbotapi.MessageConfig
		wantErr   string // "" for success
		wantPlain string
	}{
		{"plain", msg("a <b> & c", ""), "", "a <b> & c"},
		{"trimmed", msg("  padded \n", ""), "", "padded"},
		{"empty", msg("", ""), "Bad Request: message text is empty", ""},
		{"whitespace only", msg(" \n ", ""), "Bad Request: message text is empty", ""},
		{"4096 units", msg(strings.Repeat("a", 4096), ""), "", strings.Repeat("a", 4096)},
		{"4097 units", msg(strings.Repeat("a", 4097), ""), "Bad Request: message is too long", ""},
		{"2048 emoji", msg(strings.Repeat("😀", 2048), ""), "", strings.Repeat("😀", 2048)},
		{"2049 emoji", msg(strings.Repeat("😀", 2049), ""), "Bad Request: message is too long", ""},
		{"markup does not count", msg("<b>"+strings.Repeat("&amp;", 4096)+"</b>", "HTML"), "", strings.Repeat("&", 4096)},
		{"html", msg(`<b>bold</b> <i>it</i> <a href="https://x.test/?a=1&amp;b=2">l</a> &lt;&gt;&amp;&quot;&#65;&#x42;`, "HTML"), "", `bold it l <>&"AB`},
		{"pre with language", msg(`<pre><code class="language-go">x := 1</code></pre>`, "HTML"), "", "x := 1"},
		{"spoiler span", msg(`<span class="tg-spoiler">s</span><tg-spoiler>t</tg-spoiler>`, "HTML"), "", "st"},
		{"raw >", msg("a > b", "HTML"), "", "a > b"},
		{"unknown tag", msg("<p>x</p>", "HTML"), `Bad Request: can't parse entities: Unsupported start tag "p" at byte offset 0`, ""},
		{"br", msg("a<br/>b", "HTML"), `can't parse entities: Unsupported start tag "br"`, ""},
		{"raw <", msg("a < b", "HTML"), "can't parse entities", ""},
		{"raw &", msg("fish & chips", "HTML"), "can't parse entities: Character '&' at byte offset 5", ""},
		{"bad entity", msg("&nbsp;", "HTML"), "can't parse entities", ""},
		{"unclosed", msg("<b>bold", "HTML"), `can't parse entities: Can't find end tag corresponding to start tag "b"`, ""},
		{"misnested", msg("<b><i>x</b></i>", "HTML"), `Unmatched end tag at byte offset 7, expected "</i>", found "</b>"`, ""},
		{"stray end", msg("x</b>", "HTML"), "Unexpected end tag at byte offset 1", ""},
		{"unclosed start tag", msg(`<a href="x>y`, "HTML"), "Unclosed start tag", ""},
		{"plain span", msg(`<span>x</span>`, "HTML"), `Unsupported start tag "span"`, ""},
		{"bad parse mode", msg("x", "XML"), "Bad Request: unsupported parse_mode", ""},
		{"unknown chat", tgbotapi.NewMessage(999, "x"), "Bad Request: chat not found", ""},
		{"reply", reply("x", 1, false), "", "x"},
		{"reply to missing", reply("x", 99, false), "Bad Request: message to be replied not found", ""},
		{"reply to missing allowed", reply("x", 99, true), "", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bot.Send(tt.cfg)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Send succeeded with %q, want error %q", got.Text, tt.wantErr)
				}
				if e := apiError(t, err); e.Code != 400 || !strings.Contains(e.Message, tt.wantErr) {
					t.Errorf("error = %d %q, want 400 containing %q", e.Code, e.Message, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got.Text != tt.wantPlain || got.Chat.ID != tt.cfg.ChatID || got.From == nil || !got.From.IsBot || got.Date == 0 {
				t.Errorf("message = %+v, want text %q from the bot", got, tt.wantPlain)
			}
		})
	}
}

func msg(text, mode string) tgbotapi.MessageConfig {
	m := tgbotapi.NewMessage(alice.ID, text)
	m.ParseMode = mode
	return m
}

func reply(text string, to int, allow bool) tgbotapi.MessageConfig {
	m := msg(text, "")
	m.ReplyToMessageID = to
	m.AllowSendingWithoutReply = allow
	return m
}

func TestSentRecordsMessages(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	chat := telegramtest.Group(7, "G")
	in := srv.Deliver(telegramtest.Incoming{Chat: chat, From: &bob, Text: "question"})
	cfg := tgbotapi.NewMessage(chat.ID, "<pre>a &amp; b</pre>")
	cfg.ParseMode = tgbotapi.ModeHTML
	cfg.ReplyToMessageID = in.MessageID
	m, err := bot.Send(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.MessageID != in.MessageID+1 || m.ReplyToMessage == nil || m.ReplyToMessage.Text != "question" {
		t.Errorf("reply = id %d reply_to %+v, want id %d answering %q", m.MessageID, m.ReplyToMessage, in.MessageID+1, "question")
	}
	sent := srv.Sent()
	if len(sent) != 1 {
		t.Fatalf("Sent() has %d messages, want 1", len(sent))
	}
	s := sent[0]
	if s.Method != "sendMessage" || s.ChatID != -7 || s.MessageID != m.MessageID || s.Text != cfg.Text ||
		s.Plain != "a & b" || s.ParseMode != "HTML" || s.ReplyTo != in.MessageID {
		t.Errorf("Sent()[0] = %+v", s)
	}
	if len(s.Entities) != 1 || s.Entities[0].Type != "pre" || s.Entities[0].Length != 5 {
		t.Errorf("entities = %+v, want one pre entity of length 5", s.Entities)
	}
	if got := srv.SentTo(-7); len(got) != 1 {
		t.Errorf("SentTo(-7) = %d messages, want 1", len(got))
	}
}

func TestEditMessageText(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	chat := telegramtest.Private(alice)
	in := srv.Deliver(telegramtest.Incoming{Chat: chat, From: &alice, Text: "hi"})
	m, err := bot.Send(tgbotapi.NewMessage(chat.ID, "working"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		id      int
		text    string
		wantErr string
	}{
		{"edit", m.MessageID, "done", ""},
		{"not modified", m.MessageID, "done", "Bad Request: message is not modified"},
		{"empty", m.MessageID, "", "Bad Request: message text is empty"},
		{"too long", m.MessageID, strings.Repeat("x", 4097), "Bad Request: message is too long"},
		{"missing", 999, "x", "Bad Request: message to edit not found"},
		{"not the bot's", in.MessageID, "x", "Bad Request: message can't be edited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bot.Send(tgbotapi.NewEditMessageText(chat.ID, tt.id, tt.text))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("edit: %v", err)
				}
				return
			}
			if e := apiError(t, err); e.Code != 400 || !strings.HasPrefix(e.Message, tt.wantErr) {
				t.Errorf("error = %d %q, want 400 %q", e.Code, e.Message, tt.wantErr)
			}
		})
	}
	edits := srv.Sent()[0].Edits
	if len(edits) != 1 || edits[0].Plain != "done" {
		t.Errorf("Edits = %+v, want one edit to %q", edits, "done")
	}
}

func TestChatActionCommandsCallbacks(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	chat := telegramtest.Private(alice)
	srv.AddChat(chat)
	if _, err := bot.Request(tgbotapi.NewChatAction(chat.ID, tgbotapi.ChatTyping)); err != nil {
		t.Errorf("sendChatAction typing: %v", err)
	}
	if _, err := bot.Request(tgbotapi.NewChatAction(chat.ID, "dancing")); err == nil {
		t.Error("sendChatAction accepted an unknown action")
	}
	good := tgbotapi.NewSetMyCommands(tgbotapi.BotCommand{Command: "new_1", Description: "Start over"})
	if _, err := bot.Request(good); err != nil {
		t.Errorf("setMyCommands: %v", err)
	}
	for _, name := range []string{"Start", "", "with-dash", strings.Repeat("a", 33)} {
		_, err := bot.Request(tgbotapi.NewSetMyCommands(tgbotapi.BotCommand{Command: name, Description: "d"}))
		if err == nil {
			t.Errorf("setMyCommands accepted command name %q", name)
		}
	}
	if got := srv.Commands(); len(got) != 1 || got[0].Command != "new_1" {
		t.Errorf("Commands() = %+v, want the valid list only", got)
	}
	_, qid := srv.SendCallback(chat, alice, 0, "x")
	if _, err := bot.Request(tgbotapi.NewCallback(qid, "")); err != nil || !srv.CallbackAnswered(qid) {
		t.Errorf("answerCallbackQuery: %v, answered %v", err, srv.CallbackAnswered(qid))
	}
	if _, err := bot.Request(tgbotapi.NewCallback(qid, "")); err == nil {
		t.Error("a callback query could be answered twice")
	}
}

func TestWaitSent(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	chat := telegramtest.Private(alice)
	srv.AddChat(chat)
	go func() { _, _ = bot.Send(tgbotapi.NewMessage(chat.ID, "later")) }()
	ctx := testContext(t)
	got, err := srv.WaitSent(ctx, func(s telegramtest.Sent) bool { return s.Plain == "later" })
	if err != nil || got.ChatID != chat.ID {
		t.Fatalf("WaitSent = %+v, %v", got, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := srv.WaitSent(short, func(telegramtest.Sent) bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitSent with no match = %v, want DeadlineExceeded", err)
	}
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault telegramtest.Fault
		check func(t *testing.T, err error)
	}{
		{"429", telegramtest.Fault{Status: 429, RetryAfter: 3}, func(t *testing.T, err error) {
			e := apiError(t, err)
			if e.Code != 429 || e.RetryAfter != 3 || e.Message != "Too Many Requests: retry after 3" {
				t.Errorf("got %d %q retry_after %d", e.Code, e.Message, e.RetryAfter)
			}
		}},
		{"409", telegramtest.Fault{Status: 409}, func(t *testing.T, err error) {
			if e := apiError(t, err); e.Code != 409 || !strings.HasPrefix(e.Message, "Conflict: terminated by other getUpdates request") {
				t.Errorf("got %d %q", e.Code, e.Message)
			}
		}},
		{"502 html", telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>"}, func(t *testing.T, err error) {
			if err == nil || !strings.Contains(err.Error(), "invalid character '<'") {
				t.Errorf("got %v, want a JSON syntax error from the library", err)
			}
		}},
		{"500 json", telegramtest.Fault{Status: 500}, func(t *testing.T, err error) {
			if e := apiError(t, err); e.Code != 500 || e.Message != "Internal Server Error" {
				t.Errorf("got %d %q", e.Code, e.Message)
			}
		}},
		{"malformed", telegramtest.Fault{Malformed: true}, func(t *testing.T, err error) {
			if err == nil {
				t.Error("malformed JSON decoded without error")
			}
		}},
		{"hangup", telegramtest.Fault{Hangup: true}, func(t *testing.T, err error) {
			if err == nil {
				t.Error("hangup gave no transport error")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			bot := newBot(t, srv)
			srv.Inject("getUpdates", tt.fault)
			_, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
			tt.check(t, err)
			if _, err := bot.GetUpdates(tgbotapi.UpdateConfig{}); err != nil {
				t.Errorf("fault outlived its Times: %v", err)
			}
		})
	}
}

func TestFaultTimesAndClear(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	srv.Inject("GETME", telegramtest.Fault{Status: 502, Times: 2})
	for i := range 2 {
		if _, err := bot.GetMe(); err == nil {
			t.Errorf("call %d: fault not applied", i)
		}
	}
	if _, err := bot.GetMe(); err != nil {
		t.Errorf("third call: %v, want success after Times", err)
	}
	srv.Inject("getMe", telegramtest.Fault{Status: 500, Times: -1})
	for range 3 {
		if _, err := bot.GetMe(); err == nil {
			t.Error("permanent fault not applied")
		}
	}
	srv.ClearFaults("getme")
	if _, err := bot.GetMe(); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}
}

func TestDelayFaultHonoursCancellation(t *testing.T) {
	srv := newServer(t)
	srv.Inject("getMe", telegramtest.Fault{Delay: time.Hour})
	ctx, cancel := context.WithCancel(testContext(t))
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/bot"+token+"/getMe", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	if err := srv.Wait(testContext(t), func() bool { return srv.Count("getMe") == 1 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("delayed request = %v, want context.Canceled", err)
	}
	// The server must not be stuck: Close returns (t.Cleanup) and a normal
	// request still works.
	if _, err := tgbotapi.NewBotAPIWithClient(token, srv.URL()+"/bot%s/%s", &http.Client{}); err != nil {
		t.Errorf("after a cancelled delay: %v", err)
	}
}

func TestDelayFaultThenAnswer(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	srv.Inject("getMe", telegramtest.Fault{Delay: 200 * time.Millisecond})
	start := time.Now()
	if _, err := bot.GetMe(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("delayed getMe answered after %v, want ≥ 200ms", d)
	}
}

func TestInstantEmpty(t *testing.T) {
	srv := newServer(t)
	bot := newBot(t, srv)
	srv.SendText(telegramtest.Private(alice), alice, "hidden")
	srv.SetInstantEmpty(true)
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{Timeout: 60})
	if err != nil || len(ups) != 0 {
		t.Errorf("instant-empty poll = %v, %v; want an immediate empty result", ups, err)
	}
	srv.SetInstantEmpty(false)
	if ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{}); err != nil || len(ups) != 1 {
		t.Errorf("after instant-empty: %d updates, %v; want the pending one", len(ups), err)
	}
}
