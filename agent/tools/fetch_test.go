package tools

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// loopbackServer is an httptest server listening on a chosen loopback
// address (127.0.0.2 is loopback on Linux too, but a different address for
// the guard).
type loopbackServer struct {
	*httptest.Server
	port  string
	conns atomic.Int32 // TCP connections accepted: a refusal must leave it 0
}

func startLoopback(t *testing.T, ip string, h http.Handler, useTLS bool) *loopbackServer {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused TLS handshakes are expected noise
	_, port, _ := net.SplitHostPort(l.Addr().String())
	ls := &loopbackServer{Server: srv, port: port}
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			ls.conns.Add(1)
		}
	}
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return ls
}

func newLoopbackServer(t *testing.T, ip string, h http.Handler) *loopbackServer {
	return startLoopback(t, ip, h, false)
}

// newTestFetcher returns a Fetcher that resolves names through dns (a fake
// DNS server on loopback; nil answers NXDOMAIN for everything but
// /etc/hosts) and that, as a last line behind the guard, refuses and
// reports any connection off loopback: a test that goes wrong must still
// send nothing off the machine.
func newTestFetcher(t *testing.T, opts FetchOptions, dns *fakeDNS) *Fetcher {
	t.Helper()
	if dns == nil {
		dns = newFakeDNS(t, nil)
	}
	f := NewFetcher(opts)
	f.resolver = dns.resolver()
	f.test.afterGuard = func(network, address string) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			t.Errorf("a %s connection to %s got past the guard (blocked by the test)", network, address)
			return errors.New("test: connection off loopback blocked")
		}
		return nil
	}
	return f
}

func allow(prefixes ...string) []netip.Prefix {
	var ps []netip.Prefix
	for _, p := range prefixes {
		ps = append(ps, netip.MustParsePrefix(p))
	}
	return ps
}

// fetchOK fetches a and fails the test on an error.
func fetchOK(t *testing.T, f *Fetcher, a FetchArgs) string {
	t.Helper()
	out, err := f.Fetch(t.Context(), a)
	if err != nil {
		t.Fatalf("Fetch(%s): %v", a.URL, err)
	}
	return out
}

// requireOneSentence checks that err is short, single-line text for the
// model, not a dump.
func requireOneSentence(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "\n") || len(msg) > 300 || strings.Contains(msg, "goroutine") {
		t.Errorf("error is not one short line: %q", msg)
	}
}

// textHandler answers body to every request.
func textHandler(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	})
}

func TestFetchRefusesClosedDestinations(t *testing.T) {
	t.Parallel()
	srv4 := newLoopbackServer(t, "127.0.0.1", textHandler("reached v4"))
	srv6 := newLoopbackServer(t, "::1", textHandler("reached v6"))
	expand := strings.NewReplacer("PORT4", srv4.port, "PORT6", srv6.port).Replace

	tests := []struct{ name, url, want string }{
		{"loopback", "http://127.0.0.1:PORT4/", "127.0.0.1 is a loopback address"},
		{"loopback v6", "http://[::1]:PORT6/", "::1 is a loopback address"},
		{"localhost", "http://localhost:PORT4/", "127.0.0.1 is a loopback address"},
		{"mapped loopback", "http://[::ffff:127.0.0.1]:PORT4/", "127.0.0.1 is a loopback address"},
		{"NAT64 loopback", "http://[64:ff9b::7f00:1]:PORT4/", "leads to 127.0.0.1, a loopback address"},
		{"unspecified", "http://0.0.0.0:PORT4/", "0.0.0.0 is an unspecified address"},
		{"unspecified v6", "http://[::]:PORT6/", ":: is an unspecified address"},
		{"metadata", "http://169.254.169.254/latest/meta-data/", "169.254.169.254 is the cloud metadata service address"},
		{"metadata v6", "http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is the cloud metadata service address"},
		{"private", "http://10.0.0.1/", `10.0.0.1 is a private address (allow it with [agent.fetch] allow = ["10.0.0.1/32"])`},
		{"private 192.168", "http://192.168.1.1:8080/", "192.168.1.1 is a private address"},
		{"mapped private", "http://[::ffff:10.0.0.1]/", "10.0.0.1 is a private address"},
		{"6to4 private", "http://[2002:a00:1::1]/", "leads to 10.0.0.1, a private address"},
		{"CGNAT", "http://100.64.0.1/", "100.64.0.1 is a shared (carrier-grade NAT) address"},
		{"ULA", "http://[fd12::1]/", "fd12::1 is a private (unique local) address"},
		{"link-local v6", "http://[fe80::1%25lo]/", "is a link-local address"},
		{"multicast", "http://224.0.0.1/", "224.0.0.1 is a multicast address"},
		{"broadcast", "http://255.255.255.255/", "255.255.255.255 is the broadcast address"},
	}
	// Each address is refused by the upfront check and, with that check
	// switched off, by the socket check on its own.
	for _, layer := range []struct {
		name       string
		noUpfront  bool
		socketOnly bool
	}{{"both checks", false, false}, {"socket check only", true, true}} {
		for _, tt := range tests {
			t.Run(layer.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				f := newTestFetcher(t, FetchOptions{}, nil)
				f.test.noUpfrontCheck = layer.noUpfront
				out, err := f.Fetch(t.Context(), FetchArgs{URL: expand(tt.url)})
				if !errors.Is(err, ErrFetchRefused) {
					t.Fatalf("Fetch(%s) = %q, %v; want a refusal", tt.url, out, err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q, want it to contain %q", err, tt.want)
				}
				requireOneSentence(t, err)
			})
		}
	}
	t.Cleanup(func() {
		if n := srv4.conns.Load() + srv6.conns.Load(); n != 0 {
			t.Errorf("the loopback servers accepted %d connections, want 0", n)
		}
	})
}

func TestFetchAllowOpensLoopback(t *testing.T) {
	t.Parallel()
	srv := newLoopbackServer(t, "127.0.0.1", textHandler("hello"))
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.0/8")}, nil)
	for _, u := range []string{"http://127.0.0.1:" + srv.port + "/", "http://localhost:" + srv.port + "/"} {
		if out := fetchOK(t, f, FetchArgs{URL: u}); !strings.HasSuffix(out, "\n\nhello") {
			t.Errorf("Fetch(%s) = %q, want the body hello", u, out)
		}
		f.Close() // drops idle connections; the Fetcher stays usable
	}
}

func TestFetchRefusesSchemes(t *testing.T) {
	t.Parallel()
	f := newTestFetcher(t, FetchOptions{}, nil)
	for _, u := range []string{"ftp://example.com/", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)", "unix:///run/docker.sock"} {
		_, err := f.Fetch(t.Context(), FetchArgs{URL: u})
		if !errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), "only http and https") {
			t.Errorf("Fetch(%s) error %v, want a refusal naming http and https", u, err)
		}
	}
}

func TestFetchRedirectIntoClosedRange(t *testing.T) {
	t.Parallel()
	inner := newLoopbackServer(t, "127.0.0.2", textHandler("internal service"))
	outer := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.TrimPrefix(r.URL.Path, "/to/")
		http.Redirect(w, r, "http://"+net.JoinHostPort(host, inner.port)+"/", http.StatusFound)
	}))
	dns := newFakeDNS(t, func(name string, _ uint16) ([]netip.Addr, bool) {
		if name == "internal.test" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, true
		}
		return nil, false
	})
	for _, noUpfront := range []bool{false, true} {
		for _, target := range []string{"127.0.0.2", "internal.test"} {
			t.Run(fmt.Sprintf("%s/upfront=%v", target, !noUpfront), func(t *testing.T) {
				t.Parallel()
				// Only the outer server's address is opened.
				f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32")}, dns)
				f.test.noUpfrontCheck = noUpfront
				out, err := f.Fetch(t.Context(), FetchArgs{URL: outer.URL + "/to/" + target})
				if !errors.Is(err, ErrFetchRefused) {
					t.Fatalf("Fetch = %q, %v; want a refusal", out, err)
				}
				if !strings.Contains(err.Error(), "127.0.0.2 is a loopback address") {
					t.Errorf("error %q, want it to name 127.0.0.2", err)
				}
				requireOneSentence(t, err)
			})
		}
	}
	t.Cleanup(func() {
		if n := inner.conns.Load(); n != 0 {
			t.Errorf("the 127.0.0.2 server accepted %d connections, want 0", n)
		}
	})
}

func TestFetchRedirectLimit(t *testing.T) {
	t.Parallel()
	srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
		if n == 0 {
			io.WriteString(w, "arrived")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/r/%d", n-1), http.StatusFound)
	}))
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32")}, nil)
	out := fetchOK(t, f, FetchArgs{URL: srv.URL + "/r/5"})
	if !strings.Contains(out, "(redirected to "+srv.URL+"/r/0)") || !strings.HasSuffix(out, "arrived") {
		t.Errorf("5 redirects: got %q, want the final page and its URL", out)
	}
	_, err := f.Fetch(t.Context(), FetchArgs{URL: srv.URL + "/r/6"})
	if err == nil || err.Error() != "fetch stopped: more than 5 redirects" {
		t.Errorf("6 redirects: error %v, want %q", err, "fetch stopped: more than 5 redirects")
	}
}

func TestFetchRefusesHTTPSDowngrade(t *testing.T) {
	t.Parallel()
	plain := newLoopbackServer(t, "127.0.0.1", textHandler("plain"))
	secure := startLoopback(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down":
			http.Redirect(w, r, plain.URL+"/", http.StatusFound)
		case "/up":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			io.WriteString(w, "secure")
		}
	}), true)
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32")}, nil)
	pool := x509.NewCertPool()
	pool.AddCert(secure.Certificate())
	f.transport.TLSClientConfig = &tls.Config{RootCAs: pool}

	if out := fetchOK(t, f, FetchArgs{URL: secure.URL + "/up"}); !strings.HasSuffix(out, "secure") {
		t.Errorf("https → https redirect: got %q, want it followed", out)
	}
	_, err := f.Fetch(t.Context(), FetchArgs{URL: secure.URL + "/down"})
	if !errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), "may not drop TLS") {
		t.Errorf("https → http redirect: error %v, want a refusal", err)
	}
	if n := plain.conns.Load(); n != 0 {
		t.Errorf("the plain server accepted %d connections, want 0", n)
	}
}

// headerRecorder keeps the headers of the last request to each path.
type headerRecorder struct {
	mu   sync.Mutex
	seen map[string]http.Header
}

func (h *headerRecorder) record(r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]http.Header{}
	}
	h.seen[r.URL.Path] = r.Header.Clone()
}

func (h *headerRecorder) get(path string) http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[path]
}

func TestFetchRedirectDropsCredentialHeaders(t *testing.T) {
	t.Parallel()
	var rec headerRecorder
	other := newLoopbackServer(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		io.WriteString(w, "other host")
	}))
	origin := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		switch r.URL.Path {
		case "/cross":
			http.Redirect(w, r, other.URL+"/landed-cross", http.StatusFound)
		case "/same":
			http.Redirect(w, r, "/landed-same", http.StatusFound)
		default:
			io.WriteString(w, "same host")
		}
	}))
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.0/8")}, nil)
	headers := map[string]string{
		"Authorization": "Bearer sk-model-0123456789",
		"X-Api-Key":     "key-abcdef0123456789",
		"Cookie":        "sid=cookie-0123456789",
		"X-Trace":       "trace-1",
	}
	fetchOK(t, f, FetchArgs{URL: origin.URL + "/cross", Headers: headers})
	fetchOK(t, f, FetchArgs{URL: origin.URL + "/same", Headers: headers})

	cross, same := rec.get("/landed-cross"), rec.get("/landed-same")
	for _, name := range []string{"Authorization", "X-Api-Key", "Cookie"} {
		if v := cross.Get(name); v != "" {
			t.Errorf("redirect to another host sent %s: %q, want it dropped", name, v)
		}
		if v := same.Get(name); v != headers[name] {
			t.Errorf("redirect on the same host sent %s: %q, want %q", name, v, headers[name])
		}
	}
	if cross.Get("X-Trace") != "trace-1" {
		t.Errorf("redirect to another host dropped X-Trace, want ordinary headers kept")
	}
}

// TestFetchIgnoresProxyEnvironment: a proxy would make the socket check
// vet the proxy's address instead of the destination's. Go reads the proxy
// variables once per process, so the request is made in a fresh process
// that sets HTTP_PROXY before anything reads it.
func TestFetchIgnoresProxyEnvironment(t *testing.T) {
	const childEnv = "LATCH_FETCH_PROXY_CHILD"
	if os.Getenv(childEnv) == "" {
		t.Parallel()
		if NewFetcher(FetchOptions{}).transport.Proxy != nil {
			t.Errorf("transport.Proxy is set, want nil")
		}
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestFetchIgnoresProxyEnvironment$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestFetchIgnoresProxyEnvironment")) {
			t.Fatalf("child process: %v\n%s", err, out)
		}
		return
	}
	proxy := newLoopbackServer(t, "127.0.0.1", textHandler("via proxy"))
	direct := newLoopbackServer(t, "127.0.0.1", textHandler("direct"))
	for _, name := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		t.Setenv(name, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	// Go never proxies requests to loopback addresses, so the URL names a
	// host, which the fake DNS points at the direct server.
	dns := newFakeDNS(t, func(name string, _ uint16) ([]netip.Addr, bool) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, name == "example.test"
	})
	url := "http://example.test:" + direct.port + "/"
	if p, _ := http.ProxyFromEnvironment(httptest.NewRequest("GET", url, nil)); p == nil {
		t.Fatal("test setup: the environment does not name a proxy for " + url)
	}
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.0/8")}, dns)
	out := fetchOK(t, f, FetchArgs{URL: url})
	if !strings.HasSuffix(out, "direct") || proxy.conns.Load() != 0 {
		t.Errorf("got %q with %d connections to the proxy, want the direct server and no proxy", out, proxy.conns.Load())
	}
}

func TestFetchRedactsResponseCredentials(t *testing.T) {
	t.Parallel()
	credentials := map[string]string{
		"Set-Cookie":           "sid=SECRET-cookie; HttpOnly",
		"Authorization":        "Bearer SECRET-authz",
		"Proxy-Authorization":  "Basic SECRET-proxy",
		"Cookie":               "a=SECRET-cookie2",
		"X-Amz-Security-Token": "SECRET-amz",
		"X-Api-Key":            "SECRET-apikey",
		"X-Auth-Token":         "SECRET-auth-token",
		"X-Csrf-Token":         "SECRET-csrf",
		"X-Session-Id":         "SECRET-session",
	}
	srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for name, v := range credentials {
			w.Header().Set(name, v)
		}
		w.Header().Add("Set-Cookie", "theme=SECRET-second-cookie")
		w.Header().Set("Www-Authenticate", `Bearer realm="api"`)
		w.Header().Set("X-Request-Id", "req-42")
		io.WriteString(w, "ok")
	}))
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32")}, nil)
	out := fetchOK(t, f, FetchArgs{URL: srv.URL})
	if strings.Contains(out, "SECRET") {
		t.Errorf("result contains a credential:\n%s", out)
	}
	for name := range credentials {
		if !strings.Contains(out, "\n"+name+": [redacted]\n") {
			t.Errorf("result lacks %q:\n%s", name+": [redacted]", out)
		}
	}
	if n := strings.Count(out, "Set-Cookie: [redacted]"); n != 2 {
		t.Errorf("Set-Cookie redacted %d times, want 2", n)
	}
	for _, want := range []string{"\nWww-Authenticate: Bearer realm=\"api\"\n", "\nX-Request-Id: req-42\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("result lacks %q:\n%s", want, out)
		}
	}
}

func TestFetchDoesNotEchoRequestCredentials(t *testing.T) {
	t.Parallel()
	var rec headerRecorder
	// Like httpbin's /headers: the request comes back in the body, and in
	// headers whose names do not look like credentials.
	srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set("X-Debug", "key="+r.Header.Get("X-Api-Key"))
		r.Header.Write(w)
	}))
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32")}, nil)
	secrets := []string{"sk-model-0123456789", "key-abcdef0123456789", "hunter2-password", "dXNlcjpodW50ZXIyLXBhc3N3b3Jk"}
	out := fetchOK(t, f, FetchArgs{
		URL: "http://user:hunter2-password@127.0.0.1:" + srv.port + "/",
		Headers: map[string]string{
			"Authorization": "Bearer sk-model-0123456789",
			"X-Api-Key":     "key-abcdef0123456789",
			"X-Trace":       "trace-visible-1",
		},
	})
	got := rec.get("/")
	if got.Get("X-Api-Key") != "key-abcdef0123456789" || got.Get("Authorization") != "Bearer sk-model-0123456789" {
		t.Fatalf("server got headers %v, want the credentials sent", got)
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("result echoes %q:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "trace-visible-1") {
		t.Errorf("result lacks the echoed X-Trace; the echo did not happen:\n%s", out)
	}

	_, err := f.Fetch(t.Context(), FetchArgs{URL: srv.URL, Headers: map[string]string{
		"Authorization": "Bearer sk-model-0123456789\r\nX-Injected: 1",
	}})
	if err == nil || strings.Contains(err.Error(), "sk-model") {
		t.Errorf("bad header value: error %v, want an error that does not repeat the value", err)
	}
}

func TestFetchPost(t *testing.T) {
	t.Parallel()
	srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s|%s|%s", r.Method, r.Header.Get("Content-Type"), body)
	}))
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32")}, nil)
	tests := []struct {
		name string
		args FetchArgs
		want string
	}{
		{"GET default", FetchArgs{}, "GET||"},
		{"JSON body", FetchArgs{Method: "post", Body: `{"a":1}`}, `POST|application/json|{"a":1}`},
		{"text body", FetchArgs{Method: "POST", Body: "hello"}, "POST|text/plain; charset=utf-8|hello"},
		{"content_type", FetchArgs{Method: "POST", Body: "a=1&b=2", ContentType: "application/x-www-form-urlencoded"}, "POST|application/x-www-form-urlencoded|a=1&b=2"},
		{"header", FetchArgs{Method: "POST", Body: "x", Headers: map[string]string{"content-type": "text/csv"}}, "POST|text/csv|x"},
	}
	for _, tt := range tests {
		tt.args.URL = srv.URL
		if out := fetchOK(t, f, tt.args); !strings.HasSuffix(out, "\n\n"+tt.want) {
			t.Errorf("%s: got %q, want the body %q", tt.name, out, tt.want)
		}
	}
}

func TestFetchArgumentErrors(t *testing.T) {
	t.Parallel()
	f := newTestFetcher(t, FetchOptions{}, nil)
	tests := []struct {
		args FetchArgs
		want string
	}{
		{FetchArgs{}, "fetch: url is required"},
		{FetchArgs{URL: "example.com/page"}, "fetch: url needs a scheme"},
		{FetchArgs{URL: "http:///path"}, "fetch: url has no host"},
		{FetchArgs{URL: "http://exa mple.com/"}, "fetch: url is not valid"},
		{FetchArgs{URL: "http://8.8.8.8/", Body: "x"}, "only with method POST"},
		{FetchArgs{URL: "http://8.8.8.8/", Method: "DELETE"}, `method "DELETE" is not supported`},
		{FetchArgs{URL: "http://8.8.8.8/", Headers: map[string]string{"Bad Name": "x"}}, "is not a valid header name"},
		{FetchArgs{URL: "http://8.8.8.8/", Headers: map[string]string{"host": "10.0.0.1"}}, "header Host is set by the HTTP client"},
		{FetchArgs{URL: "http://8.8.8.8/", Headers: map[string]string{"Accept-Encoding": "br"}}, "header Accept-Encoding is set by the HTTP client"},
	}
	for _, tt := range tests {
		_, err := f.Fetch(t.Context(), tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Fetch(%+v) error %v, want %q", tt.args, err, tt.want)
			continue
		}
		requireOneSentence(t, err)
	}
}

// countingTransport counts the body bytes read from each response, after
// the transport has decoded them: what a fetch pulls off the wire, or out
// of a decompressor.
type countingTransport struct {
	next http.RoundTripper
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func TestFetchBodyLimits(t *testing.T) {
	t.Parallel()
	// 16 gzip members of 1 MiB each: gzip readers decode concatenated
	// members as one stream, and compressing 1 MiB once is quick.
	var member, bomb bytes.Buffer
	zw := gzip.NewWriter(&member)
	zw.Write(bytes.Repeat([]byte("a"), 1<<20))
	zw.Close()
	for range 16 {
		bomb.Write(member.Bytes())
	}
	if bomb.Len() > 64<<10 {
		t.Fatalf("test setup: the gzip bomb is %d bytes compressed, want it under the cap", bomb.Len())
	}
	srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		switch r.URL.Path {
		case "/big":
			w.Write(bytes.Repeat([]byte("b"), 300<<10))
		case "/long":
			w.Write(bytes.Repeat([]byte("c"), 200<<10))
		case "/bomb":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb.Bytes())
		}
	}))
	tests := []struct {
		name     string
		maxBytes int64
		path     string
		want     string
		maxRead  int64 // decoded body bytes the fetch may read
		maxSize  int   // bytes of result
	}{
		{"MaxBytes", 64 << 10, "/big", "[body truncated at 65536 bytes, the fetch limit; the rest was not read]", 64<<10 + 1, 66 << 10},
		// 16 MiB inflating from ~16 KiB: the cap counts decoded bytes.
		{"gzip bomb", 64 << 10, "/bomb", "[body truncated at 65536 bytes, the fetch limit; the rest was not read]", 64<<10 + 1, 66 << 10},
		{"text cap", 0, "/long", "[showing the first 102400 of 204800 bytes of text]", 200 << 10, 101 << 10},
	}
	for _, tt := range tests {
		f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32"), MaxBytes: tt.maxBytes}, nil)
		counter := &countingTransport{next: f.transport}
		f.client.Transport = counter
		out := fetchOK(t, f, FetchArgs{URL: srv.URL + tt.path})
		if !strings.Contains(out, tt.want) {
			t.Errorf("%s: result lacks %q (%d bytes; ends %q)", tt.name, tt.want, len(out), out[max(0, len(out)-200):])
		}
		if len(out) > tt.maxSize {
			t.Errorf("%s: result is %d bytes, want at most %d", tt.name, len(out), tt.maxSize)
		}
		if n := counter.read.Load(); n > tt.maxRead {
			t.Errorf("%s: read %d body bytes, want at most %d", tt.name, n, tt.maxRead)
		}
	}
}

func TestFetchBodyTypes(t *testing.T) {
	t.Parallel()
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 1226)...)
	srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if ct := q.Get("ct"); ct == "none" {
			w.Header()["Content-Type"] = nil // no sniffing by the server
		} else {
			w.Header().Set("Content-Type", ct)
		}
		if ce := q.Get("ce"); ce != "" {
			w.Header().Set("Content-Encoding", ce)
		}
		switch q.Get("body") {
		case "png":
			w.Write(png)
		case "binary-stream": // no Content-Length
			w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
			w.Write(make([]byte, 70<<10))
		default:
			io.WriteString(w, q.Get("body"))
		}
	}))
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32"), MaxBytes: 64 << 10}, nil)
	tests := []struct{ query, want string }{
		{"ct=image/png&body=png", "[body not shown: image/png, 1234 bytes]\n"},
		{"ct=application/pdf&body=binary-stream", "[body not shown: application/pdf, more than 65536 bytes]\n"},
		{"ct=none&body=png", "[body not shown: image/png, 1234 bytes]\n"}, // sniffed
		{"ct=none&body=plain+words", "plain words"},
		{"ct=text/html&ce=br&body=xyz", "[body not shown: text/html encoded as br, 3 bytes]\n"},
		{"ct=text/html;+charset=utf-8&body=<p>hi</p>", "<p>hi</p>"},
		{"ct=application/json&body={}", "{}"},
		{"ct=application/problem%2Bjson&body={}", "{}"},
		{"ct=application/xml&body=<a/>", "<a/>"},
		{"ct=application/javascript&body=f()", "f()"},
		{"ct=application/x-www-form-urlencoded&body=a=1", "a=1"},
		{"ct=text/plain&body=caf%C3%A9+%FF%FEok+%C3", "café ok "},
		{"ct=text/plain", "[empty body]\n"},
	}
	for _, tt := range tests {
		out := fetchOK(t, f, FetchArgs{URL: srv.URL + "/?" + tt.query})
		_, body, _ := strings.Cut(out, "\n\n")
		if body != tt.want {
			t.Errorf("%s: body %q, want %q", tt.query, body, tt.want)
		}
	}
}

func TestFetchResultFormat(t *testing.T) {
	t.Parallel()
	srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/many" {
			for i := range 100 {
				w.Header().Set(fmt.Sprintf("X-H%03d", i), "v")
			}
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Long", strings.Repeat("x", 2000))
		w.Header().Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "not here")
	}))
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32")}, nil)
	out := fetchOK(t, f, FetchArgs{URL: srv.URL + "/missing"})
	want := "HTTP/1.1 404 Not Found\n" +
		"Content-Length: 8\n" +
		"Content-Type: text/plain\n" +
		"Date: Mon, 02 Jan 2006 15:04:05 GMT\n" +
		"X-Long: " + strings.Repeat("x", fetchMaxHeaderValue) + "\n" +
		"\n" +
		"not here"
	if out != want {
		t.Errorf("result:\n%s\nwant:\n%s", out, want)
	}
	out = fetchOK(t, f, FetchArgs{URL: srv.URL + "/many"})
	if !strings.Contains(out, "[40 more header lines not shown]\n") {
		t.Errorf("104 headers: result lacks the cut note:\n%s", out)
	}
}

// refusingPort is a loopback port that refuses connections for the whole
// test: a socket bound to it and never listening holds it, so no other
// test's server can take it (a port listened on and closed can be, and
// then the connection is not refused).
func refusingPort(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}

func TestFetchErrors(t *testing.T) {
	t.Parallel()
	closedPort := refusingPort(t)
	srv := newLoopbackServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/partial" {
			io.WriteString(w, "first part\n")
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	}))
	untrusted := startLoopback(t, "127.0.0.1", http.NotFoundHandler(), true)
	f := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32")}, nil)
	// Short enough to wait for, long enough for a loopback request on a
	// busy machine.
	hasty := newTestFetcher(t, FetchOptions{Allow: allow("127.0.0.1/32"), Timeout: time.Second}, nil)
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		f    *Fetcher
		ctx  context.Context
		url  string
		want string
	}{
		{"connection refused", f, t.Context(), fmt.Sprintf("http://127.0.0.1:%d/", closedPort),
			fmt.Sprintf("fetch failed: cannot connect to 127.0.0.1:%d (connect: connection refused)", closedPort)},
		{"no such host", f, t.Context(), "http://nosuch.test/", "fetch failed: cannot resolve nosuch.test (no such host)"},
		{"timeout", hasty, t.Context(), srv.URL + "/hang", "fetch failed: no complete response within 1s"},
		{"canceled", f, canceled, srv.URL + "/hang", "fetch canceled"},
		{"untrusted certificate", f, t.Context(), untrusted.URL, "fetch failed: the server's TLS certificate is not trusted (x509: certificate signed by unknown authority)"},
	}
	for _, tt := range tests {
		out, err := tt.f.Fetch(tt.ctx, FetchArgs{URL: tt.url})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: Fetch = %q, %v; want error %q", tt.name, out, err, tt.want)
			continue
		}
		if errors.Is(err, ErrFetchRefused) {
			t.Errorf("%s: %v wraps ErrFetchRefused, want a plain failure", tt.name, err)
		}
	}
	// A body cut short by the timeout is still a result, with a note.
	out := fetchOK(t, hasty, FetchArgs{URL: srv.URL + "/partial"})
	if !strings.HasSuffix(out, "first part\n[body incomplete: no complete response within 1s]\n") {
		t.Errorf("partial body: got %q", out)
	}
}
