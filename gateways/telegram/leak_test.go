package telegram

import (
	"fmt"
	"io"
	stdlog "log"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/turn"
)

// TestTokenNeverLeaks drives the gateway through every failure it handles,
// including transport errors whose *url.Error quotes the request URL, and a
// server that echoes the token back, then checks that neither the token nor
// its secret half appears in any log line, returned error or status.
func TestTokenNeverLeaks(t *testing.T) {
	libLog := &logBuffer{}
	_ = tgbotapi.SetLogger(stdlog.New(libLog, "", 0))
	t.Cleanup(func() { _ = tgbotapi.SetLogger(stdlog.New(os.Stderr, "", stdlog.LstdFlags)) })

	srv := telegramtest.New(testToken)
	defer srv.Close()
	srv.AddChat(telegramtest.Private(alice))
	g, logs := started(t, srv)
	g.chatEvery = time.Millisecond // pacing is not under test here
	ctx := testContext(t)
	var outputs []string
	collect := func(err error) {
		outputs = append(outputs, g.Info().LastError)
		if err != nil {
			outputs = append(outputs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}

	srv.Inject("getUpdates", leakFaults()...)
	id := srv.SendText(telegramtest.Private(alice), alice, "hi")
	sink := &memSink{ingestErrs: 1}
	stop := run(t, g, sink)
	eventually(t, "delivery after the faults", func() bool { return sink.storedNext() == strconv.Itoa(id+1) })

	for _, f := range leakFaults() {
		srv.Inject("sendMessage", f)
		_, err := g.Send(ctx, "1111", gateways.Reply{Text: "x"})
		collect(err)
	}

	// The server goes away: every poll now fails in the transport.
	before := len(logs.lines("getUpdates failed"))
	srv.Close()
	eventually(t, "a transport error after Close", func() bool {
		return len(logs.lines("getUpdates failed")) > before
	})
	g.Typing(ctx, "1111")
	_, err := g.Send(ctx, "1111", gateways.Reply{Text: "x"})
	collect(err)
	collect(g.Download(ctx, gateways.Attachment{ID: "f"}, io.Discard, 10))
	collect(g.fetchFile(ctx, "documents/f", io.Discard, 10, nil))
	collect(g.SendFile(ctx, "1111", turn.File{Name: "a.txt", Data: []byte("a")}, ""))
	collect(g.AnswerCallback(ctx, "1111", gateways.Callback{ID: "1", MessageID: "1"}, "", "done"))
	ev := g.RenderTurn(ctx, "1111", "")
	ev.Text("x")
	ev.Final("x")
	collect(stop())

	g2, logs2 := newGateway(t, srv)
	err = g2.Start(ctx)
	outputs = append(outputs, err.Error(), g2.Info().LastError)

	all := strings.Join(append(outputs, logs.String(), logs2.String(), libLog.String()), "\n")
	_, secret, _ := strings.Cut(testToken, ":")
	if strings.Contains(all, testToken) || strings.Contains(all, secret) {
		t.Errorf("the bot token leaked:\n%s", all)
	}
	if !strings.Contains(all, redacted) {
		t.Errorf("no scrubbed URL seen: the test did not exercise a transport error:\n%s", all)
	}
	if libLog.String() != "" {
		t.Errorf("the library logged:\n%s", libLog)
	}
}

// leakFaults is every kind of failure, including one that echoes the token.
func leakFaults() []telegramtest.Fault {
	return []telegramtest.Fault{
		{Status: 429, RetryAfter: 1},
		{Status: 409},
		{Status: 403},
		{Status: 502, Body: "<html>bad gateway</html>"},
		{Status: 500},
		{Malformed: true},
		{Hangup: true},
		{Status: 400, Description: "Bad Request: unknown token " + testToken},
	}
}
