package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, nil, nil)
	c := NewClient(ts.path)
	ctx := t.Context()

	t.Run("mint", func(t *testing.T) {
		for _, ttl := range []time.Duration{10 * time.Minute, 90 * time.Second, 0} {
			got, err := c.Mint(ctx, MintRequest{Gateway: "telegram", TTL: ttl})
			if err != nil {
				t.Fatalf("Mint(ttl %v): %v", ttl, err)
			}
			want := MintResult{
				Gateway:   "telegram",
				Code:      "K7Q2-9XMP",
				ExpiresAt: epoch.Add(ttl),
				Link:      "https://t.me/latch_bot?start=K7Q2-9XMP",
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Mint(ttl %v) = %+v, want %+v", ttl, got, want)
			}
		}
	})
	t.Run("status", func(t *testing.T) {
		got, err := c.Status(ctx)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if want := fakeStatus(); !reflect.DeepEqual(got, want) {
			t.Errorf("Status = %+v\nwant %+v", got, want)
		}
	})
	t.Run("unpair", func(t *testing.T) {
		if err := c.Unpair(ctx, "telegram"); err != nil {
			t.Fatalf("Unpair: %v", err)
		}
		// The fake keeps state, so a second unpair finds nothing latched.
		if err := c.Unpair(ctx, "telegram"); !errors.Is(err, ErrNotLatched) {
			t.Errorf("second Unpair = %v, want ErrNotLatched", err)
		}
	})
}

func TestMintRequestJSON(t *testing.T) {
	for _, tc := range []struct {
		req  MintRequest
		wire string
	}{
		{MintRequest{Gateway: "telegram", TTL: 10 * time.Minute}, `{"gateway":"telegram","ttl":"10m0s"}`},
		{MintRequest{Gateway: "telegram", TTL: 90 * time.Second}, `{"gateway":"telegram","ttl":"1m30s"}`},
		{MintRequest{Gateway: "discord"}, `{"gateway":"discord"}`},
	} {
		b, err := json.Marshal(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.wire {
			t.Errorf("Marshal(%+v) = %s, want %s", tc.req, b, tc.wire)
		}
		var back MintRequest
		if err := json.Unmarshal(b, &back); err != nil || back != tc.req {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", b, back, err, tc.req)
		}
	}
	for _, bad := range []string{
		`{"gateway":"telegram","ttl":"soon"}`,
		`{"gateway":"telegram","ttl":600}`,
		`{"gateway":"telegram","scope":"all"}`,
	} {
		var r MintRequest
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", bad, r)
		}
	}
}

// TestBackendErrorMapping shows each backend error's HTTP status and code
// on the wire, and the sentinel and message the Client turns it back into.
func TestBackendErrorMapping(t *testing.T) {
	const secret = "bot123456:AAF-token"
	for _, tc := range []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
		sentinel   error // nil: none of ours may match
	}{
		{"unknown gateway", wrap("gateway \"irc\"", ErrUnknownGateway), http.StatusNotFound, codeUnknownGateway, ErrUnknownGateway},
		{"not latched", wrap("gateway \"discord\"", ErrNotLatched), http.StatusConflict, codeNotLatched, ErrNotLatched},
		{"refused", wrap("caller descends from the daemon", ErrRefused), http.StatusForbidden, codeRefused, ErrRefused},
		{"internal", errors.New("GET https://api.telegram.org/" + secret + "/getMe: EOF"), http.StatusInternalServerError, codeInternal, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newFakeBackend()
			b.fail = tc.err
			ts := startServer(t, b, nil, nil)
			c := NewClient(ts.path)
			ops := []struct {
				method, url, body string
				call              func() error
			}{
				{"POST", "/v1/pair", `{"gateway":"telegram"}`, func() error {
					_, err := c.Mint(t.Context(), MintRequest{Gateway: "telegram"})
					return err
				}},
				{"POST", "/v1/unpair", `{"gateway":"telegram"}`, func() error {
					return c.Unpair(t.Context(), "telegram")
				}},
				{"GET", "/v1/status", ``, func() error {
					_, err := c.Status(t.Context())
					return err
				}},
			}
			for _, op := range ops {
				status, eb := rawDo(t, ts.path, op.method, op.url, op.body)
				if status != tc.wantStatus || eb.Code != tc.wantCode {
					t.Errorf("%s %s: got %d %q, want %d %q", op.method, op.url, status, eb.Code, tc.wantStatus, tc.wantCode)
				}
				err := op.call()
				if err == nil {
					t.Fatalf("%s via Client: no error", op.url)
				}
				for _, s := range []error{ErrUnknownGateway, ErrNotLatched, ErrRefused, ErrNoDaemon} {
					if got, want := errors.Is(err, s), s == tc.sentinel; got != want {
						t.Errorf("%s via Client: errors.Is(%v, %v) = %v, want %v", op.url, err, s, got, want)
					}
				}
				if tc.sentinel != nil && !strings.Contains(err.Error(), tc.err.Error()) {
					t.Errorf("%s via Client: error %q does not carry the backend's message %q", op.url, err, tc.err)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(eb.Error, secret) {
					t.Errorf("%s: internal error leaked to the caller: %q", op.url, err)
				}
			}
		})
	}
}

func wrap(msg string, err error) error { return fmt.Errorf("%s: %w", msg, err) }

func TestDecodeErrorWithoutJSON(t *testing.T) {
	err := decodeError(http.StatusBadGateway, strings.NewReader("<html>oops</html>"))
	if want := "daemon answered 502 Bad Gateway"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	for _, s := range []error{ErrUnknownGateway, ErrNotLatched, ErrRefused} {
		if errors.Is(err, s) {
			t.Errorf("errors.Is(%v, %v) = true for a body without a code", err, s)
		}
	}
}

func TestRoutes(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, nil, nil)
	for _, tc := range []struct {
		method, url string
		wantStatus  int
		wantAllow   string
	}{
		{"GET", "/v1/pair", http.StatusMethodNotAllowed, "POST"},
		{"PUT", "/v1/pair", http.StatusMethodNotAllowed, "POST"},
		{"GET", "/v1/unpair", http.StatusMethodNotAllowed, "POST"},
		{"POST", "/v1/status", http.StatusMethodNotAllowed, "GET"},
		{"DELETE", "/v1/status", http.StatusMethodNotAllowed, "GET"},
		{"GET", "/v1/codes", http.StatusNotFound, ""},
		{"GET", "/v1/status/", http.StatusNotFound, ""},
		{"GET", "/", http.StatusNotFound, ""},
	} {
		req, err := http.NewRequest(tc.method, "http://latch.sock"+tc.url, strings.NewReader(`{"gateway":"telegram"}`))
		if err != nil {
			t.Fatal(err)
		}
		c := rawClient(ts.path)
		resp, err := c.Do(req)
		c.CloseIdleConnections()
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.url, err)
		}
		var eb errorBody
		derr := json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus || derr != nil || eb.Error == "" {
			t.Errorf("%s %s: got %d, body %+v (%v); want %d with a JSON error", tc.method, tc.url, resp.StatusCode, eb, derr, tc.wantStatus)
		}
		if got := resp.Header.Get("Allow"); got != tc.wantAllow {
			t.Errorf("%s %s: Allow = %q, want %q", tc.method, tc.url, got, tc.wantAllow)
		}
	}
	if n := b.callCount(); n != 0 {
		t.Errorf("backend called %d times for bad routes, want 0", n)
	}
}

func TestBadRequestBodies(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, nil, nil)
	huge := `{"gateway":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	for _, tc := range []struct {
		name, url, body string
		wantStatus      int
	}{
		{"not json", "/v1/pair", `gateway=telegram`, http.StatusBadRequest},
		{"empty", "/v1/pair", ``, http.StatusBadRequest},
		{"unknown field", "/v1/pair", `{"gateway":"telegram","scope":"all"}`, http.StatusBadRequest},
		{"no gateway", "/v1/pair", `{"ttl":"10m"}`, http.StatusBadRequest},
		{"negative ttl", "/v1/pair", `{"gateway":"telegram","ttl":"-1m"}`, http.StatusBadRequest},
		{"bad ttl", "/v1/pair", `{"gateway":"telegram","ttl":"soon"}`, http.StatusBadRequest},
		{"two values", "/v1/pair", `{"gateway":"telegram"}{"gateway":"discord"}`, http.StatusBadRequest},
		{"unpair no gateway", "/v1/unpair", `{}`, http.StatusBadRequest},
		{"unpair unknown field", "/v1/unpair", `{"gateway":"telegram","all":true}`, http.StatusBadRequest},
		{"pair over 64 KiB", "/v1/pair", huge, http.StatusRequestEntityTooLarge},
		{"unpair over 64 KiB", "/v1/unpair", huge, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, eb := rawDo(t, ts.path, "POST", tc.url, tc.body)
			if status != tc.wantStatus || eb.Error == "" {
				t.Errorf("got %d %+v, want %d with a JSON error", status, eb, tc.wantStatus)
			}
		})
	}
	if n := b.callCount(); n != 0 {
		t.Errorf("backend called %d times for bad requests, want 0", n)
	}
}

func TestCodeNeverLogged(t *testing.T) {
	var logs syncBuffer
	ts := startServer(t, newFakeBackend(), testLogger(t, &logs), nil)
	res, err := NewClient(ts.path).Mint(t.Context(), MintRequest{Gateway: "telegram"})
	if err != nil {
		t.Fatal(err)
	}
	ts.stop()
	ts.wait(t)
	if !strings.Contains(logs.String(), "pairing code minted") {
		t.Fatalf("the mint was not logged at all; log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), res.Code) {
		t.Errorf("log holds the pairing code %q:\n%s", res.Code, logs.String())
	}
}

func TestHTTPServerLimits(t *testing.T) {
	ts := startServer(t, newFakeBackend(), nil, nil)
	h := ts.srv.http
	for name, v := range map[string]time.Duration{
		"ReadHeaderTimeout": h.ReadHeaderTimeout,
		"ReadTimeout":       h.ReadTimeout,
		"WriteTimeout":      h.WriteTimeout,
		"IdleTimeout":       h.IdleTimeout,
	} {
		if v <= 0 {
			t.Errorf("%s = %v, want a positive timeout", name, v)
		}
	}
	if h.MaxHeaderBytes <= 0 || h.MaxHeaderBytes > 64<<10 {
		t.Errorf("MaxHeaderBytes = %d, want a small positive limit", h.MaxHeaderBytes)
	}
}

// TestNoTCP shows both ends use only the Unix socket: the server listens
// on nothing else, and the client dials the socket whatever network and
// address the HTTP layer asks for, so neither a URL nor HTTP_PROXY in the
// environment can send a request over TCP.
func TestNoTCP(t *testing.T) {
	ts := startServer(t, newFakeBackend(), nil, nil)
	if n := ts.srv.ln.Addr().Network(); n != "unix" {
		t.Errorf("server listens on %q, want unix", n)
	}
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:9")
	t.Setenv("http_proxy", "http://127.0.0.1:9")
	c := NewClient(ts.path)
	conn, err := c.dial(context.Background(), "tcp", "example.com:80")
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if n := conn.RemoteAddr().Network(); n != "unix" {
		t.Errorf("client dialed %q, want unix", n)
	}
	if tr := c.http.Transport.(*http.Transport); tr.Proxy != nil {
		t.Error("client transport has a proxy function; requests could leave the socket")
	}
	if _, err := c.Status(t.Context()); err != nil {
		t.Errorf("Status with HTTP_PROXY set: %v", err)
	}
}
