package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// testSecret is the webhook secret of these tests; like the token it must
// never show up in logs or errors.
const testSecret = "wh-SECRET_9f8e7d6c5b4a3210_zyxwvutsrq"

// hookPath is the path of the test webhook URL.
const hookPath = "/tg/updates"

// freeAddr returns a loopback address nothing listens on, for a listener
// that must come back on the same port after a restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// withWebhook configures webhook mode on addr.
func withWebhook(addr string) func(*Config) {
	return func(c *Config) {
		c.WebhookURL = "http://" + addr + hookPath
		c.WebhookListen = addr
		c.WebhookSecret = testSecret
	}
}

// hookFake is a fake whose failed deliveries are repeated quickly.
func hookFake(t *testing.T) *telegramtest.Server {
	t.Helper()
	srv := newFake(t)
	srv.SetWebhookRetry(telegramtest.WebhookRetry{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond})
	return srv
}

// startHook starts a webhook-mode gateway on addr and runs it into sink.
func startHook(t *testing.T, srv *telegramtest.Server, addr string, sink gateways.Sink, mutate ...func(*Config)) (*Gateway, *logBuffer, func() error) {
	t.Helper()
	g, logs := started(t, srv, append([]func(*Config){withWebhook(addr)}, mutate...)...)
	t.Cleanup(func() {
		for _, s := range []string{testSecret, testToken, strings.Split(testToken, ":")[1]} {
			if strings.Contains(logs.String(), s) {
				t.Errorf("a secret appears in the logs:\n%s", logs)
			}
		}
	})
	return g, logs, run(t, g, sink)
}

func TestWebhookDeliversUpdates(t *testing.T) {
	srv := hookFake(t)
	addr := freeAddr(t)
	sink := &memSink{}
	startHook(t, srv, addr, sink)

	calls := srv.Calls("setWebhook")
	if len(calls) != 1 {
		t.Fatalf("setWebhook called %d times, want 1", len(calls))
	}
	want := map[string]string{
		"url": "http://" + addr + hookPath, "secret_token": testSecret, "max_connections": "1",
		"drop_pending_updates": "false", "allowed_updates": `["message","callback_query"]`,
	}
	for k, v := range want {
		if got := calls[0].Params[k]; got != v {
			t.Errorf("setWebhook %s = %q, want %q", k, got, v)
		}
	}
	if n := srv.Count("deleteWebhook"); n != 0 {
		t.Errorf("deleteWebhook called %d times in webhook mode, want 0", n)
	}

	var ids []int
	for _, text := range []string{"one", "two", "/pair ABCD-2345"} {
		ids = append(ids, srv.SendText(telegramtest.Private(alice), alice, text))
	}
	eventually(t, "three messages", func() bool { return len(sink.storedMsgs()) == 3 })
	var texts []string
	for _, m := range sink.storedMsgs() {
		if m.ChatID != "1111" || m.UserID != "1111" || m.Gateway != "telegram" {
			t.Errorf("stored %+v, want alice's private chat", m)
		}
		texts = append(texts, m.Text)
	}
	if want := []string{"one", "two", "/pair ABCD-2345"}; !slices.Equal(texts, want) {
		t.Errorf("stored %q, want %q in order", texts, want)
	}
	if got, want := sink.storedCursor(), fmt.Sprintf("%d;%d-%d", ids[2]+1, ids[0], ids[2]); got != want {
		t.Errorf("cursor = %q, want %q", got, want)
	}
	waitFake(t, srv, "nothing pending", func() bool { return srv.Pending() == 0 })
	if n := srv.Count("getUpdates"); n != 0 {
		t.Errorf("getUpdates called %d times in webhook mode", n)
	}
	for _, d := range srv.WebhookDeliveries() {
		if d.Status != http.StatusOK {
			t.Errorf("delivery %+v, want 200", d)
		}
	}
}

// raw sends one raw HTTP request and returns the raw response.
func raw(t *testing.T, addr, req string) []byte {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := io.ReadAll(conn)
	// A server that closes with request bytes unread (headers too large)
	// resets the connection after its answer: the answer is what counts.
	if err != nil && !(errors.Is(err, syscall.ECONNRESET) && len(resp) > 0) {
		t.Fatalf("reading the response: %v (got %q)", err, resp)
	}
	return resp
}

// post builds a raw request.
func post(method, path string, headers []string, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: hook.example\r\nConnection: close\r\n", method, path)
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	if body != "" || method == http.MethodPost {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

// forged is an update a stranger would like latch to believe: a command
// from the owner's chat.
func forged(updateID int) string {
	return fmt.Sprintf(`{"update_id":%d,"message":{"message_id":7,"date":1700000000,`+
		`"chat":{"id":1111,"type":"private","first_name":"Alice"},"from":{"id":1111,"is_bot":false,"first_name":"Alice"},"text":"!rm -rf ~"}}`, updateID)
}

func TestWebhookRejectsAllButTelegram(t *testing.T) {
	srv := hookFake(t)
	addr := freeAddr(t)
	sink := &memSink{}
	startHook(t, srv, addr, sink)

	body := forged(5000)
	json := "Content-Type: application/json"
	good := SecretHeader + ": " + testSecret
	cases := []struct {
		name    string
		request string
	}{
		{"wrong secret", post("POST", hookPath, []string{json, SecretHeader + ": wh-SECRET_9f8e7d6c5b4a3210_zyxwvutsrQ"}, body)},
		{"missing secret", post("POST", hookPath, []string{json}, body)},
		{"empty secret", post("POST", hookPath, []string{json, SecretHeader + ":"}, body)},
		{"secret prefix", post("POST", hookPath, []string{json, SecretHeader + ": " + testSecret[:10]}, body)},
		{"secret twice", post("POST", hookPath, []string{json, good, good}, body)},
		{"wrong path", post("POST", "/tg/other", []string{json, good}, body)},
		{"query", post("POST", hookPath+"?x=1", []string{json, good}, body)},
		{"GET", post("GET", hookPath, []string{good}, "")},
		{"PUT", post("PUT", hookPath, []string{json, good}, body)},
		{"form", post("POST", hookPath, []string{"Content-Type: application/x-www-form-urlencoded", good}, body)},
		{"no type", post("POST", hookPath, []string{good}, body)},
		{"oversized", post("POST", hookPath, []string{json, good}, body+strings.Repeat(" ", maxWebhookBody+1-len(body)))},
		// Answered by net/http itself unless told otherwise.
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: hook.example\r\nConnection: close\r\n\r\n"},
		{"malformed request line", "GARBAGE\r\n\r\n"},
		{"malformed header", "POST " + hookPath + " HTTP/1.1\r\nHost: hook.example\r\nNo colon here\r\n\r\n"},
		{"no Host", "POST " + hookPath + " HTTP/1.1\r\nConnection: close\r\n\r\n"},
		{"unknown version", "POST " + hookPath + " HTTP/9.9\r\nHost: hook.example\r\n\r\n"},
		{"bad transfer encoding", "POST " + hookPath + " HTTP/1.1\r\nHost: hook.example\r\nTransfer-Encoding: gzip, chunked, x\r\n\r\n"},
		{"headers too large", "POST " + hookPath + " HTTP/1.1\r\nHost: hook.example\r\nX-Big: " + strings.Repeat("a", 20<<10) + "\r\n\r\n"},
	}
	want := "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 19\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n\r\n404 page not found\n"
	for _, c := range cases {
		if got := raw(t, addr, c.request); string(got) != want {
			t.Errorf("%s: response\n%q\nwant the same bytes as every rejection:\n%q", c.name, got, want)
		}
	}
	if got := sink.ingestCalls(); len(got) != 0 {
		t.Fatalf("rejected requests reached the sink: %+v", got)
	}

	// The same request with the right secret is taken.
	got := raw(t, addr, post("POST", hookPath, []string{json + "; charset=utf-8", good}, body))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || bytes.Contains(got, []byte("Date:")) {
		t.Errorf("correct delivery answered %q, want 200 without Date", got)
	}
	if msgs := sink.storedMsgs(); len(msgs) != 1 || msgs[0].Text != "!rm -rf ~" {
		t.Errorf("stored %+v after the correct delivery, want its message", msgs)
	}
}

func TestWebhookRepeatedUpdateStoredOnce(t *testing.T) {
	srv := hookFake(t)
	addr := freeAddr(t)
	sink := &memSink{}
	_, logs, _ := startHook(t, srv, addr, sink)

	// Telegram sends the update again when our 200 is lost on the way.
	srv.LoseWebhookResponses(1)
	id := srv.SendText(telegramtest.Private(alice), alice, "once")
	waitFake(t, srv, "the update delivered", func() bool { return srv.Pending() == 0 })
	var attempts []telegramtest.WebhookDelivery
	for _, d := range srv.WebhookDeliveries() {
		if d.UpdateID == id {
			attempts = append(attempts, d)
		}
	}
	if len(attempts) != 2 || !attempts[0].Lost || attempts[1].Status != http.StatusOK {
		t.Fatalf("deliveries of %d = %+v, want a lost 200 then a 200", id, attempts)
	}
	// And an old delivery replayed by hand, later, is acknowledged too.
	upd := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":1,"date":1,"chat":{"id":1111,"type":"private"},"from":{"id":1111,"first_name":"A"},"text":"once"}}`, id)
	resp := raw(t, addr, post("POST", hookPath, []string{"Content-Type: application/json", SecretHeader + ": " + testSecret}, upd))
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 200 ")) {
		t.Errorf("replay answered %q, want 200 so Telegram stops repeating it", resp)
	}
	if msgs := sink.storedMsgs(); len(msgs) != 1 {
		t.Errorf("stored %d messages for one update delivered three times: %+v", len(msgs), msgs)
	}
	if n := len(sink.ingestCalls()); n != 1 {
		t.Errorf("Ingest called %d times, want 1", n)
	}
	if n := len(logs.lines("repeated delivery")); n != 2 {
		t.Errorf("%d repeats logged, want 2; logs:\n%s", n, logs)
	}
}

func TestWebhookStoreErrorIsRepeated(t *testing.T) {
	srv := hookFake(t)
	addr := freeAddr(t)
	// Run reads the cursor first for the forum topics (see Restore), then
	// the first delivery for the update ids: both fail once.
	sink := &memSink{cursorErrs: 2, ingestErrs: 1}
	startHook(t, srv, addr, sink)

	id := srv.SendText(telegramtest.Private(alice), alice, "durable")
	eventually(t, "the update stored", func() bool { return len(sink.storedMsgs()) == 1 })
	waitFake(t, srv, "the delivery acknowledged", func() bool { return srv.Pending() == 0 })
	var statuses []int
	for _, d := range srv.WebhookDeliveries() {
		statuses = append(statuses, d.Status)
	}
	// Cursor unreadable, then Ingest failing: 503 each, so Telegram repeats.
	if want := []int{503, 503, 200}; !slices.Equal(statuses, want) {
		t.Errorf("delivery statuses = %v, want %v", statuses, want)
	}
	if got := sink.storedCursor(); got != fmt.Sprintf("%d;%d", id+1, id) {
		t.Errorf("cursor = %q", got)
	}
	if msgs := sink.storedMsgs(); len(msgs) != 1 || msgs[0].Text != "durable" {
		t.Errorf("stored %+v, want the update once", msgs)
	}
}

// doubtfulSink stores the first batch but reports a failure, as a store
// whose commit failed after the data reached the disk might.
type doubtfulSink struct {
	*memSink
	failed bool
}

func (s *doubtfulSink) Ingest(ctx context.Context, gateway, cursor string, msgs []gateways.Message) error {
	err := s.memSink.Ingest(ctx, gateway, cursor, msgs)
	if err == nil && !s.failed {
		s.failed = true
		return errors.New("commit: i/o error")
	}
	return err
}

func TestWebhookRereadsCursorAfterStoreError(t *testing.T) {
	srv := hookFake(t)
	sink := &doubtfulSink{memSink: &memSink{}}
	startHook(t, srv, freeAddr(t), sink)
	srv.SendText(telegramtest.Private(alice), alice, "stored despite the error")
	waitFake(t, srv, "the delivery acknowledged", func() bool { return srv.Pending() == 0 })
	if msgs := sink.storedMsgs(); len(msgs) != 1 {
		t.Errorf("stored %d messages, want 1: after a failed Ingest the stored cursor decides", len(msgs))
	}
}

func TestWebhookRestartKeepsQueuedUpdates(t *testing.T) {
	srv := hookFake(t)
	addr := freeAddr(t)
	sink := &memSink{}
	_, _, stop := startHook(t, srv, addr, sink)
	srv.SendText(telegramtest.Private(alice), alice, "before")
	eventually(t, "the first update", func() bool { return len(sink.storedMsgs()) == 1 })
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Error("the webhook listener still accepts connections after Run returned")
	}
	if got, want := srv.Webhook(), "http://"+addr+hookPath; got != want {
		t.Errorf("webhook after stop = %q, want it left set (%q) so Telegram keeps updates", got, want)
	}

	// latch is down: Telegram queues and keeps trying.
	srv.SendText(telegramtest.Private(alice), alice, "while down 1")
	srv.SendText(telegramtest.Private(alice), alice, "while down 2")
	waitFake(t, srv, "a failed delivery", func() bool {
		return slices.ContainsFunc(srv.WebhookDeliveries(), func(d telegramtest.WebhookDelivery) bool {
			return d.Err == "Connection refused"
		})
	})
	if n := len(sink.storedMsgs()); n != 1 {
		t.Fatalf("stored %d messages while down", n)
	}

	startHook(t, srv, addr, sink)
	eventually(t, "the queued updates", func() bool { return len(sink.storedMsgs()) == 3 })
	waitFake(t, srv, "nothing pending", func() bool { return srv.Pending() == 0 })
	var texts []string
	for _, m := range sink.storedMsgs() {
		texts = append(texts, m.Text)
	}
	if want := []string{"before", "while down 1", "while down 2"}; !slices.Equal(texts, want) {
		t.Errorf("stored %q, want %q: each once, in order", texts, want)
	}
}

func TestWebhookSetAgainWhenRemoved(t *testing.T) {
	srv := hookFake(t)
	addr := freeAddr(t)
	sink := &memSink{}
	_, logs, _ := startHook(t, srv, addr, sink, func(c *Config) { c.WebhookCheck = 10 * time.Millisecond })
	srv.SetWebhook("https://elsewhere.example/hook") // another program took over
	url := "http://" + addr + hookPath
	waitFake(t, srv, "the webhook set again", func() bool { return srv.Webhook() == url && srv.Count("setWebhook") == 2 })
	srv.SendText(telegramtest.Private(alice), alice, "still here")
	eventually(t, "delivery to the webhook set again", func() bool { return len(sink.storedMsgs()) == 1 })
	if len(logs.lines("level=WARN", "changed or removed", "https://elsewhere.example/…")) == 0 {
		t.Errorf("takeover not logged (host only); logs:\n%s", logs)
	}
}

func TestWebhookStartErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"refused by Telegram", func(c *Config) { c.WebhookURL = "https://hook.example:1234/x" }, "refused the webhook"},
		{"plain http", func(c *Config) { c.WebhookURL = "http://hook.example/x" }, "must be an https:// URL"},
		{"bad secret", func(c *Config) { c.WebhookSecret = "has space" }, "webhook_secret must be"},
		{"no secret", func(c *Config) { c.WebhookSecret = "" }, "webhook_secret must be"},
		{"busy port", nil, "webhook listener on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := hookFake(t)
			addr := freeAddr(t)
			if tt.mutate == nil {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
			}
			mutate := []func(*Config){withWebhook(addr)}
			if tt.mutate != nil {
				mutate = append(mutate, tt.mutate)
			}
			g, _ := newGateway(t, srv, mutate...)
			err := g.Start(testContext(t))
			// Release a listener Start may have bound.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = g.Run(ctx, &memSink{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start = %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), strings.Split(testToken, ":")[1]) {
				t.Errorf("Start error shows a secret: %v", err)
			}
			if errors.Is(err, ErrUnauthorized) {
				t.Errorf("Start = %v, not a token problem", err)
			}
		})
	}
}

func TestWebhookUnauthorized(t *testing.T) {
	srv := hookFake(t)
	srv.Inject("setWebhook", telegramtest.Fault{Status: 401})
	g, _ := newGateway(t, srv, withWebhook(freeAddr(t)))
	err := g.Start(testContext(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.Run(ctx, &memSink{})
	if !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Start = %v, want ErrUnauthorized", err)
	}
}

func TestSeenCursor(t *testing.T) {
	var s seen
	for _, id := range []int{10, 11, 12, 14, 3, 4} { // 3 and 4: ids chosen anew after a quiet week
		if s.has(id) {
			t.Fatalf("%d seen before it was added", id)
		}
		s = s.with(id)
	}
	if got, want := s.encode(), "5;10-12,14,3-4"; got != want {
		t.Errorf("encode = %q, want %q", got, want)
	}
	back, ok := parseSeen(s.encode())
	if !ok || !slices.Equal(back.ids, s.ids) {
		t.Errorf("parseSeen(%q) = %v, %t; want %v", s.encode(), back.ids, ok, s.ids)
	}
	for _, id := range []int{13, 15, 2, 9} {
		if s.has(id) {
			t.Errorf("%d counts as seen: it would be dropped", id)
		}
	}

	// A polling cursor: only its last batch may still be pending.
	p, ok := parseSeen("1101")
	if !ok || !p.has(1001) || !p.has(1100) || p.has(1000) || p.has(1101) {
		t.Errorf("polling cursor 1101 = %v…, want 1001-1100 seen", p.ids[:min(3, len(p.ids))])
	}
	if p, ok := parseSeen("5"); !ok || !slices.Equal(p.ids, []int{1, 2, 3, 4}) {
		t.Errorf("polling cursor 5 = %v", p.ids)
	}

	// Bounded: the window keeps the most recent maxSeen ids.
	big := seen{}
	for id := 1; id <= 3*maxSeen; id++ {
		big = big.with(id)
	}
	if len(big.ids) != maxSeen || big.has(2*maxSeen) || !big.has(3*maxSeen) {
		t.Errorf("window holds %d ids from %d, want the last %d", len(big.ids), big.ids[0], maxSeen)
	}
	if h, ok := parseSeen("9;1-" + strconv.Itoa(maxUpdateID)); !ok || len(h.ids) != maxSeen {
		t.Errorf("a huge range parses to %d ids, want %d", len(h.ids), maxSeen)
	}

	for _, bad := range []string{"x", "0", "-1", "5;", "5;a", "5;3-2", "5;1-x", "5;0", "5;1,,2",
		"5;1-" + strconv.Itoa(maxUpdateID+1), strconv.Itoa(maxUpdateID + 2)} {
		if _, ok := parseSeen(bad); ok {
			t.Errorf("parseSeen(%q) accepted", bad)
		}
	}
}

func TestPollingReadsWebhookCursor(t *testing.T) {
	srv := newFake(t)
	first := srv.SendText(telegramtest.Private(alice), alice, "already stored")
	second := srv.SendText(telegramtest.Private(alice), alice, "new")
	g, _ := started(t, srv)
	sink := &memSink{cursor: fmt.Sprintf("%d;%d", first+1, first)}
	run(t, g, sink)
	eventually(t, "the new update", func() bool { return sink.storedNext() == strconv.Itoa(second+1) })
	if msgs := sink.storedMsgs(); len(msgs) != 1 || msgs[0].Text != "new" {
		t.Errorf("stored %+v, want only the update after the webhook cursor", msgs)
	}
}

// TestWebhookSecretScrubbed: a Bot API answer that echoes the secret (a
// proxy's error page, a future API message) does not carry it into the
// error Start returns, the status or the logs.
func TestWebhookSecretScrubbed(t *testing.T) {
	srv := hookFake(t)
	srv.Inject("setWebhook", telegramtest.Fault{Status: 400, Description: "Bad Request: bad secret_token " + testSecret})
	g, logs := newGateway(t, srv, withWebhook(freeAddr(t)))
	err := g.Start(testContext(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.Run(ctx, &memSink{})
	if err == nil {
		t.Fatal("Start succeeded")
	}
	for _, out := range []string{err.Error(), fmt.Sprintf("%+v", err), g.Info().LastError, logs.String()} {
		if strings.Contains(out, testSecret) {
			t.Errorf("the webhook secret leaks: %s", out)
		}
	}
	if !strings.Contains(err.Error(), "<redacted>") {
		t.Errorf("Start = %v, want the secret replaced", err)
	}
}
