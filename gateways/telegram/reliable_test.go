package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/turn"
)

// threeChunkAnswer is Markdown that renders to three messages.
func threeChunkAnswer(t *testing.T) (md string, chunks []string) {
	t.Helper()
	md = longAnswer() + "\n\n" + longAnswer()
	chunks = htmlChunks(md)
	if len(chunks) != 3 {
		t.Fatalf("test answer renders to %d chunks, want 3", len(chunks))
	}
	return md, chunks
}

// sentTexts lists the texts of the messages sent to alice.
func sentTexts(srv *telegramtest.Server) []string {
	var out []string
	for _, m := range srv.SentTo(alice.ID) {
		out = append(out, m.Text)
	}
	return out
}

// TestRenderTurnRetriesTransientFailures: one failed request in the middle
// of a multi-message answer leaves no hole in it.
func TestRenderTurnRetriesTransientFailures(t *testing.T) {
	tests := []struct {
		name  string
		fault telegramtest.Fault
	}{
		{"502 html page", telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>"}},
		{"500 json", telegramtest.Fault{Status: 500}},
		{"200 html page", telegramtest.Fault{Body: "<html>captive portal</html>"}},
		{"connection dropped", telegramtest.Fault{Hangup: true}},
		{"twice", telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>", Times: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			g, logs := started(t, srv)
			g.chatEvery = time.Millisecond // pacing is not under test here
			md, chunks := threeChunkAnswer(t)
			replyTo := question(srv)
			// The first chunk goes through; the second meets the fault.
			srv.Inject("sendMessage", telegramtest.Fault{}, tt.fault)
			g.RenderTurn(testContext(t), "1111", replyTo).Final(md)
			if got := sentTexts(srv); !slices.Equal(got, chunks) {
				t.Errorf("sent %d messages, want the 3 chunks once each, in order:\n%q", len(got), got)
			}
			if len(logs.lines("level=WARN", "trying again")) == 0 {
				t.Errorf("the retry was not logged; logs:\n%s", logs)
			}
		})
	}
}

// TestRenderTurnFinalEditRetried: the edit that turns the streaming message
// into the answer's first chunk is tried again too.
func TestRenderTurnFinalEditRetried(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	g.chatEvery = time.Millisecond
	replyTo := question(srv)
	ev := g.RenderTurn(testContext(t), "1111", replyTo)
	ev.Text("**Done**: all")
	waitFake(t, srv, "the streaming message", func() bool { return len(srv.SentTo(alice.ID)) == 1 })
	srv.Inject("editMessageText", telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>"})
	ev.Final("**Done**: all good")
	sent := srv.SentTo(alice.ID)
	if len(sent) != 1 || len(sent[0].Edits) == 0 {
		t.Fatalf("sent %d messages, want the streamed one, edited", len(sent))
	}
	if last := sent[0].Edits[len(sent[0].Edits)-1]; last.Text != "<b>Done</b>: all good" || last.ParseMode != "HTML" {
		t.Errorf("last edit %q (parse_mode %q), want the formatted answer", last.Text, last.ParseMode)
	}
}

// TestRenderTurnNoticesLostPart: a chunk that cannot be delivered is
// followed by the rest of the answer and a notice, and a 4xx is not tried
// again.
func TestRenderTurnNoticesLostPart(t *testing.T) {
	tests := []struct {
		name      string
		fault     telegramtest.Fault
		wantCalls int // sendMessage requests: chunks, tries, notice
	}{
		{"server keeps failing", telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>", Times: maxReliableAttempts}, 3 + maxReliableAttempts},
		{"4xx not retried", telegramtest.Fault{Status: 400, Description: "Bad Request: message is too long"}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			g, _ := started(t, srv)
			g.chatEvery = time.Millisecond
			md, chunks := threeChunkAnswer(t)
			replyTo := question(srv)
			srv.Inject("sendMessage", telegramtest.Fault{}, tt.fault)
			g.RenderTurn(testContext(t), "1111", replyTo).Final(md)
			want := []string{chunks[0], chunks[2], lostNotice}
			if got := sentTexts(srv); !slices.Equal(got, want) {
				t.Errorf("sent %q…, want chunks 1 and 3, then %q", firstRunes(got, 30), lostNotice)
			}
			if n := srv.Count("sendMessage"); n != tt.wantCalls {
				t.Errorf("%d sendMessage requests, want %d", n, tt.wantCalls)
			}
			if sent := srv.SentTo(alice.ID); len(sent) == 3 && fmt.Sprint(sent[2].ReplyTo) != replyTo {
				t.Errorf("the notice replies to %d, want the question %s", sent[2].ReplyTo, replyTo)
			}
		})
	}
}

func firstRunes(texts []string, n int) []string {
	var out []string
	for _, s := range texts {
		if r := []rune(s); len(r) > n {
			s = string(r[:n])
		}
		out = append(out, s)
	}
	return out
}

func TestTransient(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	syntax := json.Unmarshal([]byte("<html>"), new(any)) // a 200 with an HTML page
	urlErr := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://api.telegram.org/bot" + redacted + "/sendMessage", Err: err}
	}
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"502 from the Bot API", live, &tgbotapi.Error{Code: 502, Message: "Bad Gateway"}, true},
		{"500 from the Bot API", live, &tgbotapi.Error{Code: 500, Message: "Internal Server Error"}, true},
		{"400", live, &tgbotapi.Error{Code: 400, Message: "Bad Request: chat not found"}, false},
		{"403", live, &tgbotapi.Error{Code: 403, Message: "Forbidden: bot was blocked by the user"}, false},
		{"429 left by post", live, &tgbotapi.Error{Code: 429, Message: "Too Many Requests"}, false},
		{"proxy's 502 page", live, &statusError{code: 502, status: "502 Bad Gateway"}, true},
		{"proxy's 403 page", live, &statusError{code: 403, status: "403 Forbidden"}, false},
		{"200 html page", live, syntax, true},
		{"truncated answer", live, io.ErrUnexpectedEOF, true},
		{"connection dropped", live, urlErr(io.EOF), true},
		{"connection refused", live, urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), true},
		{"request timeout", live, urlErr(context.DeadlineExceeded), true},
		{"redirect refused", live, urlErr(errors.New("redirect refused: the Bot API does not redirect")), false},
		{"ctx ended", ended, urlErr(context.Canceled), false},
		{"5xx after ctx ended", ended, &tgbotapi.Error{Code: 502}, false},
		{"not started", live, errNotStarted, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := transient(tt.ctx, tt.err); got != tt.want {
				t.Errorf("transient(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}

// TestSendRetriesTransientFailures: a plain reply (a !command's output, a
// notice) outlasts a passing 5xx or dropped connection too, every chunk
// once, in order.
func TestSendRetriesTransientFailures(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	g.chatEvery = time.Millisecond
	replyTo := question(srv)
	long := strings.Repeat("line of command output\n", 400)
	chunks := len(render(gateways.Reply{Text: long}))
	srv.Inject("sendMessage", telegramtest.Fault{}, telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>"}, telegramtest.Fault{Hangup: true})
	if _, err := g.Send(testContext(t), "1111", gateways.Reply{Text: long, ReplyTo: replyTo}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	var got strings.Builder
	n := 0
	for _, m := range srv.SentTo(alice.ID) {
		if m.Method == "sendMessage" && strings.HasPrefix(m.Plain, "line of") {
			got.WriteString(m.Plain)
			n++
		}
	}
	if n != chunks || chunks < 2 || strings.Count(got.String(), "line of command output") != 400 {
		t.Errorf("sent %d messages with %d lines, want %d with 400", n, strings.Count(got.String(), "line of command output"), chunks)
	}
}

// TestApprovalOutlastsTransientFailures: an approval request that meets a
// passing 5xx is sent again; one that never showed would leave the call
// waiting for a press that cannot come, denied at the timeout.
func TestApprovalOutlastsTransientFailures(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	g.chatEvery = time.Millisecond
	ev := g.RenderTurn(testContext(t), "1111", question(srv))
	srv.Inject("sendMessage", telegramtest.Fault{Status: 502, Body: "<html>bad gateway</html>"})
	ev.Approval(turn.Approval{ID: "k3x9p", Tool: "bash", Summary: "make"})
	if _, err := srv.WaitSent(testContext(t), func(s telegramtest.Sent) bool { return s.Keyboard != nil }); err != nil {
		t.Fatalf("the approval request never showed: %v", err)
	}
	ev.(ender).End()
}

// TestSendSaysWhenRefused: a reply Telegram refuses (a 4xx: the chat is
// not found, a topic is closed) is gateways.ErrRejected, so the Hub drops
// a notice at once instead of trying it for a day; a 5xx that outlasts the
// tries is not.
func TestSendSaysWhenRefused(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	g.chatEvery = time.Millisecond
	if _, err := g.Send(testContext(t), "999", gateways.Reply{Text: "hi"}); !errors.Is(err, gateways.ErrRejected) {
		t.Errorf("send to an unknown chat: %v, want ErrRejected", err)
	}
	question(srv)
	srv.Inject("sendMessage", telegramtest.Fault{Status: 500, Times: maxReliableAttempts})
	if _, err := g.Send(testContext(t), "1111", gateways.Reply{Text: "hi"}); err == nil || errors.Is(err, gateways.ErrRejected) {
		t.Errorf("send meeting 5xx only: %v, want an error that is not ErrRejected", err)
	}
}
