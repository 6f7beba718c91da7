package telegram

import (
	"context"
	"errors"
	"html"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

func replyText(text string) gateways.Reply { return gateways.Reply{Text: text} }

func gatewaysReply(text string, pre bool) gateways.Reply { return gateways.Reply{Text: text, Pre: pre} }

// sentText undoes the rendering of one sent message: it strips the <pre>
// wrapper and unescapes it.
func sentText(t *testing.T, s telegramtest.Sent, pre bool) string {
	t.Helper()
	if !pre {
		if s.ParseMode != "" {
			t.Errorf("plain reply sent with parse_mode %q", s.ParseMode)
		}
		return s.Text
	}
	inner, ok := strings.CutPrefix(s.Text, "<pre>")
	inner, ok2 := strings.CutSuffix(inner, "</pre>")
	if !ok || !ok2 || s.ParseMode != "HTML" {
		t.Fatalf("pre chunk %.40q… (parse_mode %q) is not one HTML <pre> block", s.Text, s.ParseMode)
	}
	return html.UnescapeString(inner)
}

func TestSendChunks(t *testing.T) {
	var lines strings.Builder
	for i := range 300 {
		lines.WriteString(strconv.Itoa(i) + strings.Repeat(" word", 8) + "\n")
	}
	tests := []struct {
		name       string
		reply      gateways.Reply
		wantChunks int // 0 = don't check
		lineEnds   bool
	}{
		{"short", gateways.Reply{Text: "hello <b>world</b> & more"}, 1, false},
		{"short pre", gateways.Reply{Text: "a < b && c > d", Pre: true}, 1, false},
		{"10000 chars", gateways.Reply{Text: strings.Repeat("x", 10000)}, 3, false},
		{"many lines", gateways.Reply{Text: lines.String()}, 0, true},
		{"emoji", gateways.Reply{Text: "a" + strings.Repeat("😀", 5000)}, 3, false},
		{"emoji pre", gateways.Reply{Text: "a" + strings.Repeat("😀", 5000), Pre: true}, 3, false},
		{"markup pre", gateways.Reply{Text: strings.Repeat("<&>", 3000), Pre: true}, 0, false},
		{"mixed pre", gateways.Reply{Text: strings.Repeat("if a<b && 😀 {\n\tx := \"&amp;\"\n}\n", 400), Pre: true}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case has its own fake; pacing makes them slow
			srv := newFake(t)
			srv.AddChat(telegramtest.Private(alice))
			g, _ := started(t, srv)
			g.chatEvery = time.Millisecond // pacing is TestSendPacesPerChat's
			id, err := g.Send(testContext(t), "1111", tt.reply)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			sent := srv.Sent()
			if tt.wantChunks != 0 && len(sent) != tt.wantChunks {
				t.Errorf("sent %d messages, want %d", len(sent), tt.wantChunks)
			}
			var joined strings.Builder
			for i, s := range sent {
				if n := utf16Len(s.Text); n > 4096 {
					t.Errorf("chunk %d is %d UTF-16 units including markup, want ≤ 4096", i, n)
				}
				if !utf8.ValidString(s.Text) {
					t.Errorf("chunk %d is not valid UTF-8 (split inside a character)", i)
				}
				if s.Params["disable_web_page_preview"] != "true" {
					t.Errorf("chunk %d allows link previews", i)
				}
				text := sentText(t, s, tt.reply.Pre)
				if tt.lineEnds && i < len(sent)-1 && !strings.HasSuffix(text, "\n") {
					t.Errorf("chunk %d ends mid-line: %q", i, text[max(0, len(text)-20):])
				}
				joined.WriteString(text)
			}
			if joined.String() != tt.reply.Text {
				t.Errorf("chunks do not join back to the input (%d vs %d bytes)", joined.Len(), len(tt.reply.Text))
			}
			if want := strconv.Itoa(sent[len(sent)-1].MessageID); id != want {
				t.Errorf("Send returned id %q, want the last message's %q", id, want)
			}
		})
	}
}

func TestSendReplyThreadsFirstChunk(t *testing.T) {
	srv := newFake(t)
	in := srv.Deliver(telegramtest.Incoming{Chat: telegramtest.Private(alice), From: &alice, Text: "question"})
	g, _ := started(t, srv)
	_, err := g.Send(testContext(t), "1111", gateways.Reply{Text: strings.Repeat("y", 5000), ReplyTo: strconv.Itoa(in.MessageID)})
	if err != nil {
		t.Fatal(err)
	}
	sent := srv.Sent()
	if len(sent) != 2 || sent[0].ReplyTo != in.MessageID || sent[1].ReplyTo != 0 {
		t.Fatalf("reply_to of the chunks = %v, want [%d 0]", []int{sent[0].ReplyTo, sent[len(sent)-1].ReplyTo}, in.MessageID)
	}
	if sent[0].Params["allow_sending_without_reply"] != "true" {
		t.Error("first chunk lacks allow_sending_without_reply")
	}
	// A reply to a deleted message still arrives.
	if _, err := g.Send(testContext(t), "1111", gateways.Reply{Text: "z", ReplyTo: "999"}); err != nil {
		t.Errorf("reply to a missing message: %v", err)
	}
}

func TestSendErrors(t *testing.T) {
	tests := []struct {
		name   string
		chat   string
		reply  gateways.Reply
		want   string
		wantIs error
	}{
		{"bad chat id", "alice", replyText("x"), `invalid chat id "alice"`, nil},
		{"bad reply id", "1111", gateways.Reply{Text: "x", ReplyTo: "x1"}, `invalid reply-to message id "x1"`, nil},
		{"empty", "1111", replyText(""), "empty reply", ErrEmptyReply},
		{"blank pre", "1111", gateways.Reply{Text: " \n\t", Pre: true}, "empty reply", ErrEmptyReply},
		{"unknown chat", "424242", replyText("x"), "telegram: send message 1 of 1: Bad Request: chat not found", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			srv.AddChat(telegramtest.Private(alice))
			g, _ := started(t, srv)
			_, err := g.Send(testContext(t), tt.chat, tt.reply)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Send = %v, want an error containing %q", err, tt.want)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Send = %v, want errors.Is %v", err, tt.wantIs)
			}
		})
	}
}

func TestSendWaitsOutRateLimit(t *testing.T) {
	srv := newFake(t)
	srv.AddChat(telegramtest.Private(alice))
	g, _ := started(t, srv)
	srv.Inject("sendMessage", telegramtest.Fault{Status: 429, RetryAfter: 1})
	if _, err := g.Send(testContext(t), "1111", replyText("hi")); err != nil {
		t.Fatalf("Send after a 429: %v", err)
	}
	calls := srv.Calls("sendMessage")
	if len(calls) != 2 {
		t.Fatalf("%d sendMessage calls, want 2", len(calls))
	}
	if gap := calls[1].Time.Sub(calls[0].Time); gap < time.Second {
		t.Errorf("resent after %v, want ≥ retry_after (1s)", gap)
	}
}

func TestSendRateLimitBoundedAndCancellable(t *testing.T) {
	t.Run("bounded", func(t *testing.T) {
		srv := newFake(t)
		srv.AddChat(telegramtest.Private(alice))
		g, _ := started(t, srv)
		srv.Inject("sendMessage", telegramtest.Fault{Status: 429, RetryAfter: 1, Times: -1})
		_, err := g.Send(testContext(t), "1111", replyText("hi"))
		if err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
			t.Errorf("Send = %v, want the 429 after bounded retries", err)
		}
		if n := srv.Count("sendMessage"); n != maxSendAttempts {
			t.Errorf("%d attempts, want %d", n, maxSendAttempts)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		srv := newFake(t)
		srv.AddChat(telegramtest.Private(alice))
		g, _ := started(t, srv)
		srv.Inject("sendMessage", telegramtest.Fault{Status: 429, RetryAfter: 3600})
		ctx, cancel := context.WithCancel(testContext(t))
		errc := make(chan error, 1)
		go func() {
			_, err := g.Send(ctx, "1111", replyText("hi"))
			errc <- err
		}()
		waitFake(t, srv, "the first attempt", func() bool { return srv.Count("sendMessage") == 1 })
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Send = %v, want context.Canceled", err)
		}
	})
}

func TestTyping(t *testing.T) {
	srv := newFake(t)
	srv.AddChat(telegramtest.Private(alice))
	g, logs := started(t, srv)
	g.Typing(testContext(t), "1111")
	if calls := srv.Calls("sendChatAction"); len(calls) != 1 || calls[0].Params["action"] != "typing" || calls[0].Params["chat_id"] != "1111" {
		t.Errorf("sendChatAction calls = %+v, want one typing in 1111", calls)
	}
	g.Typing(testContext(t), "424242") // unknown chat: ignored
	g.Typing(testContext(t), "nope")
	if len(logs.lines("level=DEBUG", "sendChatAction failed")) != 1 {
		t.Errorf("a failed sendChatAction is not logged at debug; logs:\n%s", logs)
	}
	if len(logs.lines("level=WARN")) != 0 || len(logs.lines("level=ERROR")) != 0 {
		t.Errorf("Typing failures logged above debug:\n%s", logs)
	}
}

func TestSendPacesPerChat(t *testing.T) {
	srv := newFake(t)
	srv.AddChat(telegramtest.Private(alice))
	srv.SetChatRateLimit(true)
	g, _ := started(t, srv)
	if _, err := g.Send(testContext(t), "1111", replyText(strings.Repeat("word ", 4000))); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Sent()); n != 5 {
		t.Errorf("sent %d chunks, want 5", n)
	}
	if v := srv.ChatRateViolations(); v != 0 {
		t.Errorf("%d messages broke the per-chat rate model", v)
	}
}

// TestRenderMarkdown: the Hub's own Markdown texts (MsgPairFailed, the
// notices) show with Telegram's formatting, not with literal backticks.
func TestRenderMarkdown(t *testing.T) {
	got := render(gateways.Reply{Text: gateways.MsgPairFailed, Markdown: true})
	if len(got) != 1 || strings.Contains(got[0], "`") || !strings.Contains(got[0], "<code>latch pair</code>") {
		t.Errorf("render = %q, want one HTML chunk with <code>latch pair</code> and no backticks", got)
	}
}
