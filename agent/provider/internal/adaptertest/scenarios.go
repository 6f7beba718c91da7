package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/adapter"
)

// Run runs every scenario against the client of k, each as a parallel
// subtest named after it.
func Run[R Reply[R]](t *testing.T, k Kit[R]) {
	scenarios := []struct {
		name string
		run  func(*testing.T, Kit[R])
	}{
		{"StreamText", streamText[R]},
		{"AuthError", authError[R]},
		{"NoAPIKey", noAPIKey[R]},
		{"ModelNotFound", modelNotFound[R]},
		{"NoModelConfigured", noModelConfigured[R]},
		{"RateLimitHonoursRetryAfter", rateLimitHonoursRetryAfter[R]},
		{"RateLimitTooLongIsReturned", rateLimitTooLongIsReturned[R]},
		{"ServerErrorsRetried", serverErrorsRetried[R]},
		{"RetriesBounded", retriesBounded[R]},
		{"StreamErrorBeforeTextRetried", streamErrorBeforeTextRetried[R]},
		{"StreamErrorAfterTextNotRetried", streamErrorAfterTextNotRetried[R]},
		{"CutAfterTextNotRetried", cutAfterTextNotRetried[R]},
		{"CleanEndTooEarly", cleanEndTooEarly[R]},
		{"CutBeforeTextRetried", cutBeforeTextRetried[R]},
		{"CancelStopsStalledStream", cancelStopsStalledStream[R]},
		{"DeadlineDuringSlowFirstByte", deadlineDuringSlowFirstByte[R]},
		{"IdleBeforeFirstByte", idleBeforeFirstByte[R]},
		{"IdleAfterText", idleAfterText[R]},
		{"KeepAlivesHoldOffIdleTimeout", keepAlivesHoldOffIdleTimeout[R]},
		{"KeyScrubbedFromProviderMessages", keyScrubbedFromProviderMessages[R]},
		{"Unreachable", unreachable[R]},
		{"BadBaseURL", badBaseURL[R]},
		{"PrintingHidesKey", printingHidesKey[R]},
		{"ConnectionKeptAfterLateEnd", connectionKeptAfterLateEnd[R]},
		{"EndlessBodyDoesNotHoldReply", endlessBodyDoesNotHoldReply[R]},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.run(t, k)
		})
	}
}

// start is k.Start, with no edit when edit is nil.
func start[R Reply[R]](t *testing.T, k Kit[R], edit func(*adapter.Config)) (provider.Provider, Fake[R]) {
	if edit == nil {
		edit = func(*adapter.Config) {}
	}
	return k.Start(t, edit)
}

func streamText[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	const reply = "Hello! Here is a reply that arrives in several pieces."
	srv.Script(k.Text(reply).Usage(42, 17))

	var d Deltas
	resp, err := c.Stream(t.Context(), Ask("hi"), d.Add)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	got := d.All()
	if len(got) < 3 {
		t.Errorf("got %d deltas, want the reply in several pieces: %q", len(got), got)
	}
	if joined := strings.Join(got, ""); joined != reply {
		t.Errorf("deltas joined = %q, want %q", joined, reply)
	}
	if resp.Text() != reply || resp.StopReason != provider.StopEndTurn {
		t.Errorf("response = %q (%s), want the reply and end_turn", resp.Text(), resp.StopReason)
	}
	if resp.Usage != (provider.Usage{InputTokens: 42, OutputTokens: 17}) {
		t.Errorf("usage = %+v, want 42 in, 17 out", resp.Usage)
	}
	if n := len(srv.Headers()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

func authError[R Reply[R]](t *testing.T, k Kit[R]) {
	const wrong = "sk-WRONG-9876543210"
	c, srv := start(t, k, func(c *adapter.Config) { c.APIKey = wrong })
	srv.Script(k.Text("unreachable"))
	_, err := c.Stream(t.Context(), Ask("hi"), nil)
	if !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	msg := provider.Describe(err)
	for _, s := range []string{err.Error(), msg} {
		if strings.Contains(s, wrong) || strings.Contains(s, k.Key) {
			t.Errorf("key leaked: %q", s)
		}
	}
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "api_key") {
		t.Errorf("Describe = %q, want the status and the setting to check", msg)
	}
	if n := len(srv.Headers()); n != 1 {
		t.Errorf("fake got %d requests, want 1: a 401 is not retried", n)
	}
}

func noAPIKey[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, func(c *adapter.Config) { c.APIKey = "" })
	_, err := c.Stream(t.Context(), Ask("hi"), nil)
	if !errors.Is(err, provider.ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "needs an API key") {
		t.Errorf("Describe = %q, want it to ask for a key", msg)
	}
	h := srv.Headers()[0]
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Errorf("a credential was sent with no key configured: %v", h)
	}
}

func modelNotFound[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, func(c *adapter.Config) { c.Model = "model-nope" })
	srv.Models(k.Model)
	_, err := c.Stream(t.Context(), Ask("hi"), nil)
	if !errors.Is(err, provider.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, `"model-nope"`) || !strings.Contains(msg, "404") {
		t.Errorf("Describe = %q, want the model and the status", msg)
	}
	if n := len(srv.Headers()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

func noModelConfigured[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, func(c *adapter.Config) { c.Model = "" })
	_, err := c.Stream(t.Context(), Ask("hi"), nil)
	if !errors.Is(err, provider.ErrModel) {
		t.Fatalf("err = %v, want ErrModel", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "[agent] model") {
		t.Errorf("Describe = %q, want the setting", msg)
	}
	if n := len(srv.Headers()); n != 0 {
		t.Errorf("fake got %d requests, want none", n)
	}
}

func rateLimitHonoursRetryAfter[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	srv.Script(k.RateLimited(time.Second), k.Text("ok"))
	start := time.Now()
	resp, err := c.Stream(t.Context(), Ask("hi"), nil)
	if err != nil || resp.Text() != "ok" {
		t.Fatalf("Stream = %q, %v; want ok", resp.Text(), err)
	}
	if waited := time.Since(start); waited < 950*time.Millisecond {
		t.Errorf("retried after %v, want at least the 1s Retry-After", waited)
	}
	if n := len(srv.Headers()); n != 2 {
		t.Errorf("fake got %d requests, want 2", n)
	}
}

func rateLimitTooLongIsReturned[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	srv.Script(k.RateLimited(5*time.Minute), k.Text("later"))
	_, err := c.Stream(t.Context(), Ask("hi"), nil)
	if !errors.Is(err, provider.ErrRateLimited) {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "5 minutes") {
		t.Errorf("Describe = %q, want when to try again", msg)
	}
	if n := len(srv.Headers()); n != 1 {
		t.Errorf("fake got %d requests, want 1: a 5-minute wait is not waited out", n)
	}
}

func serverErrorsRetried[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	srv.Script(k.ServerError(), k.Overloaded(), k.Text("ok"))
	resp, err := c.Stream(t.Context(), Ask("hi"), nil)
	if err != nil || resp.Text() != "ok" || len(srv.Headers()) != 3 {
		t.Errorf("Stream = %q, %v after %d requests; want ok after 3", resp.Text(), err, len(srv.Headers()))
	}
}

func retriesBounded[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, func(c *adapter.Config) { c.MaxRetries = 1 })
	srv.Script(k.Overloaded(), k.Overloaded(), k.Text("too late"))
	_, err := c.Stream(t.Context(), Ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, strconv.Itoa(k.OverloadedStatus)) {
		t.Errorf("Describe = %q, want the status %d", msg, k.OverloadedStatus)
	}
	if n := len(srv.Headers()); n != 2 {
		t.Errorf("fake got %d requests, want 2 (one retry)", n)
	}
}

func streamErrorBeforeTextRetried[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	srv.Script(k.Text("never seen").ErrorAfter(0, k.StreamErrType, k.StreamErrMessage), k.Text("second try"))
	var d Deltas
	resp, err := c.Stream(t.Context(), Ask("hi"), d.Add)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got := strings.Join(d.All(), ""); got != "second try" || resp.Text() != "second try" {
		t.Errorf("deltas %q, text %q, want only the second try", got, resp.Text())
	}
}

func streamErrorAfterTextNotRetried[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	typ, msg := k.StreamErrType, k.StreamErrMessage
	srv.Script(k.Text("Hello there, friend.").ErrorAfter(2, typ, msg), k.Text("again"))
	var d Deltas
	resp, err := c.Stream(t.Context(), Ask("hi"), d.Add)
	var pe *provider.Error
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if pe.Type != typ || pe.Message != msg || pe.Status != 200 || !pe.Partial {
		t.Errorf("err = %+v, want the event's type and message, status 200, partial", pe)
	}
	if got := strings.Join(d.All(), ""); got != "Hello ther" || resp.Text() != got {
		t.Errorf("deltas %q, partial text %q, want the two pieces sent", got, resp.Text())
	}
	if n := len(srv.Headers()); n != 1 {
		t.Errorf("fake got %d requests, want 1: text had been delivered", n)
	}
}

func cutAfterTextNotRetried[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	srv.Script(k.Text("Hello, this reply is cut short.").CutAfter(2), k.Text("duplicate"))
	var d Deltas
	resp, err := c.Stream(t.Context(), Ask("hi"), d.Add)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	var pe *provider.Error
	if !errors.As(err, &pe) || !pe.Partial {
		t.Errorf("err = %#v, want a partial-reply error", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "broke off") {
		t.Errorf("Describe = %q", msg)
	}
	if got := strings.Join(d.All(), ""); got != "Hello, thi" || resp.Text() != got {
		t.Errorf("deltas %q, partial text %q, want the two pieces sent", got, resp.Text())
	}
	if n := len(srv.Headers()); n != 1 {
		t.Errorf("fake got %d requests, want 1: text had been delivered", n)
	}
}

// A stream that ends cleanly before the message does (no message_stop, no
// finish_reason) is broken, and retried as nothing had been delivered.
func cleanEndTooEarly[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	for range 3 {
		srv.Script(k.ToolUse("toolu_1", "bash", `{"command":"ls"}`).EndAfter(2))
	}
	resp, err := c.Stream(t.Context(), Ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable for a stream that did not finish", err)
	}
	if len(resp.ToolUses()) != 0 {
		t.Errorf("unfinished tool call returned: %+v", resp.Content)
	}
	if n := len(srv.Headers()); n != 3 {
		t.Errorf("fake got %d requests, want 3: nothing had been delivered, so it was retried", n)
	}
}

func cutBeforeTextRetried[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	srv.Script(k.Text("lost").CutAfter(0), k.Text("ok"))
	resp, err := c.Stream(t.Context(), Ask("hi"), nil)
	if err != nil || resp.Text() != "ok" {
		t.Fatalf("Stream = %q, %v; want ok", resp.Text(), err)
	}
}

func cancelStopsStalledStream[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	srv.Script(k.Text("First words, then nothing.").StallAfter(1))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var d Deltas
	done := make(chan struct{})
	var (
		resp provider.Response
		err  error
	)
	go func() {
		defer close(done)
		resp, err = c.Stream(ctx, Ask("hi"), func(s string) { d.Add(s); cancel() })
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stream did not return after its context was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if resp.Text() != "First" || strings.Join(d.All(), "") != "First" {
		t.Errorf("partial text = %q, deltas %q; want the piece that arrived", resp.Text(), d.All())
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "stopped") {
		t.Errorf("Describe = %q", msg)
	}
}

func deadlineDuringSlowFirstByte[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, nil)
	srv.Script(k.Text("late").Delay(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Stream(ctx, Ask("hi"), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Stream took %v to give up", took)
	}
}

// A provider that says nothing at all is abandoned, and not asked again.
func idleBeforeFirstByte[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, func(c *adapter.Config) { c.Timeout = 300 * time.Millisecond })
	srv.Script(k.Text("late").Delay(time.Minute), k.Text("not asked for"))
	_, err := c.Stream(t.Context(), Ask("hi"), nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrUnavailable) || pe.Idle != 300*time.Millisecond {
		t.Fatalf("err = %v, want ErrUnavailable after 300ms idle", err)
	}
	if msg := provider.Describe(err); !strings.Contains(msg, "sent nothing") {
		t.Errorf("Describe = %q", msg)
	}
	if n := len(srv.Headers()); n != 1 {
		t.Errorf("fake got %d requests, want 1: a silent provider is not asked again", n)
	}
}

// A provider that goes quiet part-way is abandoned; the text that arrived
// makes the error partial.
func idleAfterText[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, func(c *adapter.Config) { c.Timeout = 300 * time.Millisecond })
	srv.Script(k.Text("first, then silence").StallAfter(1), k.Text("not asked for"))
	var d Deltas
	_, err := c.Stream(t.Context(), Ask("hi"), d.Add)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Idle != 300*time.Millisecond {
		t.Fatalf("err = %v, want an idle timeout", err)
	}
	if !pe.Partial {
		t.Errorf("err = %v, want it marked partial: text had arrived", err)
	}
	if n := len(srv.Headers()); n != 1 {
		t.Errorf("fake got %d requests, want 1", n)
	}
}

// Keep-alives, which the clients swallow, still show that the provider is
// there.
func keepAlivesHoldOffIdleTimeout[R Reply[R]](t *testing.T, k Kit[R]) {
	c, srv := start(t, k, func(c *adapter.Config) { c.Timeout = 300 * time.Millisecond })
	srv.Script(k.Text("Hello, after a long think.").PauseAfter(1, time.Second))
	resp, err := c.Stream(t.Context(), Ask("hi"), nil)
	if err != nil || resp.Text() != "Hello, after a long think." {
		t.Fatalf("Stream = %q, %v; want the whole reply", resp.Text(), err)
	}
}

// A provider or proxy that echoes the key must not get it into the error.
func keyScrubbedFromProviderMessages[R Reply[R]](t *testing.T, k Kit[R]) {
	for _, echo := range []string{"header x-api-key: " + k.Key + " is malformed", "proxy saw Authorization: Bearer " + k.Key} {
		c, srv := start(t, k, nil)
		srv.Script(k.APIError(400, "invalid_request_error", echo))
		_, err := c.Stream(t.Context(), Ask("hi"), nil)
		if !errors.Is(err, provider.ErrRequest) {
			t.Fatalf("err = %v, want ErrRequest", err)
		}
		for _, s := range []string{err.Error(), provider.Describe(err)} {
			if strings.Contains(s, k.Key) {
				t.Errorf("key leaked: %q", s)
			}
			if !strings.Contains(s, "[redacted]") {
				t.Errorf("%q: want the provider's message with the key redacted", s)
			}
		}
	}
}

func unreachable[R Reply[R]](t *testing.T, k Kit[R]) {
	_, srv := start(t, k, nil)
	url := srv.URL
	srv.Close()
	// A proxy's secret in the base URL's query must not come back in the
	// error, as Go's *url.Error would have it (the whole request URL).
	const proxySecret = "PROXYsecretQ"
	_, c, err := k.New(adapter.Config{APIKey: k.Key, BaseURL: url + "?key=" + proxySecret, Model: k.Model, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Stream(t.Context(), Ask("hi"), nil)
	if !errors.Is(err, provider.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), proxySecret) || strings.Contains(provider.Describe(err), proxySecret) {
		t.Errorf("the base URL's query leaked: %v", err)
	}
	msg := provider.Describe(err)
	if !strings.Contains(msg, provider.Endpoint(url)) || !strings.Contains(msg, "base_url") {
		t.Errorf("Describe = %q, want where it tried and the setting", msg)
	}
	if strings.Contains(err.Error(), k.Key) {
		t.Errorf("key leaked: %v", err)
	}
}

func badBaseURL[R Reply[R]](t *testing.T, k Kit[R]) {
	for _, u := range []string{"api.example.com", "ftp://example.com", "http://"} {
		if _, _, err := k.New(adapter.Config{BaseURL: u}); err == nil {
			t.Errorf("New(BaseURL %q) = nil error", u)
		}
	}
}

// A Config or Client that ends up in a log must not carry the key.
func printingHidesKey[R Reply[R]](t *testing.T, k Kit[R]) {
	cfg, c, err := k.New(adapter.Config{APIKey: k.Key, BaseURL: "https://user:pass@proxy.example/v1?key=" + k.Key, Model: k.Model})
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("provider", "config", cfg, "client", c)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg),
		fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), buf.String()} {
		if strings.Contains(s, k.Key) || strings.Contains(s, "pass") {
			t.Errorf("secret printed: %s", s)
		}
		if !strings.Contains(s, "proxy.example") {
			t.Errorf("%s: want the endpoint", s)
		}
	}
}

// dialCounting configures a client whose connections are counted in n.
func dialCounting(n *atomic.Int32) func(*adapter.Config) {
	return func(c *adapter.Config) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			n.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		c.HTTPClient = &http.Client{Transport: tr}
	}
}

// A body whose end comes in a write of its own, after the last event,
// is read to that end once the message is whole, so HTTP/1.1 keeps the
// connection: the next call does not pay for a new one (with a remote
// server, a TCP and TLS handshake).
func connectionKeptAfterLateEnd[R Reply[R]](t *testing.T, k Kit[R]) {
	var dials atomic.Int32
	c, srv := start(t, k, dialCounting(&dials))
	srv.Script(k.Text("one").LingerEnd(30*time.Millisecond), k.Text("two").LingerEnd(30*time.Millisecond))
	for _, want := range []string{"one", "two"} {
		resp, err := c.Stream(t.Context(), Ask("hi"), nil)
		if err != nil || resp.Text() != want {
			t.Fatalf("Stream = %q, %v; want %q", resp.Text(), err, want)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("two calls opened %d connections, want 1: the first was closed before the end of its body", n)
	}
}

// A server that never ends the body after the last event does not hold
// the reply back: the message is whole, the wait for the end is bounded,
// and that connection is given up.
func endlessBodyDoesNotHoldReply[R Reply[R]](t *testing.T, k Kit[R]) {
	var dials atomic.Int32
	c, srv := start(t, k, dialCounting(&dials))
	srv.Script(k.Text("one").LingerEnd(-1), k.Text("two"))
	for _, want := range []string{"one", "two"} {
		resp, err := c.Stream(t.Context(), Ask("hi"), nil)
		if err != nil || resp.Text() != want || resp.StopReason != provider.StopEndTurn {
			t.Fatalf("Stream = %q (%s), %v; want %q, end_turn", resp.Text(), resp.StopReason, err, want)
		}
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the endless body's is not reusable", n)
	}
}
