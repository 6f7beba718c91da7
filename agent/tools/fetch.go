package tools

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Fetch defaults, used when the matching FetchOptions field is zero.
const (
	DefaultFetchMaxBytes  = 1 << 20
	DefaultFetchTimeout   = 30 * time.Second
	DefaultFetchUserAgent = "latch-fetch/1"
)

const (
	fetchMaxText        = 100 << 10 // body text handed to the model
	fetchMaxRedirects   = 5
	fetchMaxHeaderLines = 64
	fetchMaxHeaderValue = 512
	fetchMaxErrorText   = 200
)

// errFetchTimeout is the cancellation cause of FetchOptions.Timeout, which
// tells a timeout apart from the caller canceling ctx.
var errFetchTimeout = errors.New("fetch: timeout")

// FetchOptions configures a Fetcher.
type FetchOptions struct {
	// Allow lists the ranges the owner deliberately opened, such as a
	// service on the home LAN. Everything that is not the public internet
	// (loopback, private, link-local, …) is refused unless listed here. A
	// cloud metadata address, or an address of this machine other than
	// loopback (a public one too), is opened only by an entry naming
	// exactly it.
	Allow     []netip.Prefix
	MaxBytes  int64         // body bytes read, after decompression; 0 = DefaultFetchMaxBytes
	Timeout   time.Duration // whole fetch, body and redirects included; 0 = DefaultFetchTimeout
	UserAgent string        // "" = DefaultFetchUserAgent
}

// FetchArgs are the arguments of the fetch tool, as the model sends them.
type FetchArgs struct {
	URL    string `json:"url"`
	Method string `json:"method"` // GET (default) or POST
	Body   string `json:"body"`   // POST only
	// ContentType of Body; when empty, application/json for a body that
	// is valid JSON and text/plain otherwise.
	ContentType string `json:"content_type"`
	// Headers are sent as given, except the ones the HTTP client manages
	// (Host, Content-Length, Accept-Encoding, …), which are refused.
	// Credential-looking ones are never repeated in the result and are
	// dropped when a redirect leaves the original host.
	Headers map[string]string `json:"headers"`
}

// Fetcher runs the agent's fetch tool: one HTTP request (plus up to five
// redirects) to the public internet, rendered as text for the model.
//
// A fetch runs with the owner's network position: on their LAN, next to
// their router's admin page and, on a cloud machine, next to the metadata
// service that hands out the machine's credentials. So every connection is
// checked where it is made, in the dialer's Control hook, against the
// address the socket is about to connect to (see addrGuard.checkSocket),
// and once more when it is made (addrGuard.checkConn). An address of the
// machine itself is closed like loopback even when it is public: the kernel
// delivers the connection locally, past any firewall.
// Checking the URL's host before the request is not enough: DNS can answer
// differently a moment later (rebinding) and a redirect can name any host.
// The upfront check stays, for a clearer message. For the same reason the
// proxy settings of the environment are ignored: through a proxy the socket
// would connect to the proxy, and the check would see only its address.
//
// Redirects are followed up to five times, each connection checked by the
// dialer like the first. A redirect from https to http is refused rather
// than followed, and once a redirect leaves the original host the
// credential headers the model gave are no longer sent.
//
// A Fetcher is safe for concurrent use.
type Fetcher struct {
	opts      FetchOptions
	guard     addrGuard
	resolver  *net.Resolver // nil = net.DefaultResolver
	transport *http.Transport
	client    *http.Client
	test      fetchTestHooks
}

// fetchTestHooks are knobs that only tests set, before the first Fetch.
type fetchTestHooks struct {
	noSocketCheck  bool // the Control hook's check; see the two below
	noConnCheck    bool // with noSocketCheck: what the upfront check alone lets through
	noUpfrontCheck bool // shows the socket checks hold on their own
	// afterGuard runs in the Control hook once the guard let an address
	// through; tests use it to make sure nothing leaves loopback.
	afterGuard func(network, address string) error
}

// NewFetcher returns a Fetcher with opts, defaults filled in.
func NewFetcher(opts FetchOptions) *Fetcher {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultFetchMaxBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultFetchTimeout
	}
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultFetchUserAgent
	}
	f := &Fetcher{opts: opts, guard: newAddrGuard(opts.Allow)}
	f.transport = &http.Transport{
		// Never a proxy, and above all not ProxyFromEnvironment: the socket
		// check would then vet the proxy's address, not the destination's.
		Proxy:                  nil,
		DialContext:            f.dial,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           4,
		IdleConnTimeout:        30 * time.Second,
	}
	// No cookie jar: nothing one fetch received is sent by the next.
	f.client = &http.Client{Transport: f.transport, CheckRedirect: f.checkRedirect}
	return f
}

// Close closes the connections kept open for reuse. The Fetcher remains
// usable.
func (f *Fetcher) Close() {
	f.transport.CloseIdleConnections()
}

func (f *Fetcher) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, Resolver: f.resolver, Control: f.control}
	conn, err := d.DialContext(ctx, network, address)
	if err != nil || f.test.noConnCheck {
		return conn, err
	}
	// Control sees only the address being connected to; whether the
	// kernel delivered the connection locally shows in the finished one.
	if err := f.guard.checkConn(conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (f *Fetcher) control(network, address string, c syscall.RawConn) error {
	if !f.test.noSocketCheck {
		if err := f.guard.checkSocket(network, address, c); err != nil {
			return err
		}
	}
	if f.test.afterGuard != nil {
		return f.test.afterGuard(network, address)
	}
	return nil
}

// Fetch makes the request a describes and returns the response as text: the
// status line, the response headers (credentials replaced by [redacted]),
// a blank line, then the body if it is text, or a line describing it if not.
// A non-2xx status is a result, not an error. The error, when there is one,
// is a single sentence meant for the model; refusals wrap ErrFetchRefused.
func (f *Fetcher) Fetch(ctx context.Context, a FetchArgs) (string, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, f.opts.Timeout, errFetchTimeout)
	defer cancel()
	req, secrets, err := f.newRequest(ctx, a)
	if err != nil {
		return "", err
	}
	if !f.test.noUpfrontCheck {
		if err := f.checkHost(ctx, req.URL, ""); err != nil {
			return "", err
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return "", f.explain(ctx, err)
	}
	defer resp.Body.Close()
	return f.render(ctx, req.URL, resp, secrets), nil
}

// fetchError is a failure told in one sentence; the cause stays reachable
// for errors.Is without being printed.
type fetchError struct {
	msg   string
	cause error
}

func (e *fetchError) Error() string { return e.msg }
func (e *fetchError) Unwrap() error { return e.cause }

func failf(cause error, format string, args ...any) error {
	return &fetchError{msg: fmt.Sprintf(format, args...), cause: cause}
}

// newRequest validates a and builds the request. secrets are the credential
// values it carries, to be scrubbed from anything the server echoes back.
func (f *Fetcher) newRequest(ctx context.Context, a FetchArgs) (*http.Request, []string, error) {
	u, err := parseFetchURL(a.URL)
	if err != nil {
		return nil, nil, err
	}
	method := strings.ToUpper(strings.TrimSpace(a.Method))
	var body io.Reader
	switch method {
	case "", http.MethodGet:
		method = http.MethodGet
		if a.Body != "" {
			return nil, nil, failf(nil, "fetch: a body is sent only with method POST")
		}
	case http.MethodPost:
		body = strings.NewReader(a.Body)
	default:
		return nil, nil, failf(nil, "fetch: method %.20q is not supported (use GET or POST)", method)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, nil, failf(err, "fetch: cannot build the request")
	}
	var secrets []string
	if pw, ok := u.User.Password(); ok {
		basic := base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw))
		secrets = appendSecret(secrets, pw)
		secrets = appendSecret(secrets, basic)
	}
	for name, value := range a.Headers {
		if !validHeaderName(name) {
			return nil, nil, failf(nil, "fetch: %.60q is not a valid header name", name)
		}
		if !validHeaderValue(value) {
			// The value is not repeated: it may be a credential.
			return nil, nil, failf(nil, "fetch: the value of header %s contains a line break or control character", name)
		}
		if managedHeaders[http.CanonicalHeaderKey(name)] {
			return nil, nil, failf(nil, "fetch: header %s is set by the HTTP client and cannot be given", http.CanonicalHeaderKey(name))
		}
		req.Header.Set(name, value)
		if isCredentialHeader(name) {
			secrets = appendSecret(secrets, value)
		}
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", f.opts.UserAgent)
	}
	if method == http.MethodPost && (a.ContentType != "" || req.Header.Get("Content-Type") == "") {
		req.Header.Set("Content-Type", postContentType(a))
	}
	return req, secrets, nil
}

func parseFetchURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, failf(nil, "fetch: url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, failf(err, "fetch: url is not valid (%s)", oneLine(err.Error()))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch u.Scheme {
	case "http", "https":
	case "":
		return nil, failf(nil, "fetch: url needs a scheme, http:// or https://")
	default:
		return nil, refusef("only http and https URLs are fetched, not %.20s", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, failf(nil, "fetch: url has no host")
	}
	return u, nil
}

func postContentType(a FetchArgs) string {
	switch {
	case a.ContentType != "":
		return a.ContentType
	case json.Valid([]byte(a.Body)):
		return "application/json"
	default:
		return "text/plain; charset=utf-8"
	}
}

// checkHost is the upfront check of u's host: the literal address, or every
// address the name resolves to now. It exists for the message ("localhost:
// 127.0.0.1 is a loopback address"); the socket check is what holds when
// DNS changes its answer. prefix starts the message ("redirect to …: ").
func (f *Fetcher) checkHost(ctx context.Context, u *url.URL, prefix string) error {
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if err := f.guard.check(a); err != nil {
			return &refusedError{detail: prefix + err.(*refusedError).detail}
		}
		return nil
	}
	r := f.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		// Not this check's to report: the request looks the name up again
		// (in punycode, for an IDN host, which this lookup cannot do) and
		// says why it failed, and the socket check still applies.
		return nil
	}
	for _, a := range addrs {
		if err := f.guard.check(a); err != nil {
			return &refusedError{detail: prefix + host + ": " + err.(*refusedError).detail}
		}
	}
	return nil
}

// checkRedirect is the client's CheckRedirect. The dialer checks where each
// redirect connects; this adds the rules about the chain itself.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > fetchMaxRedirects {
		return failf(nil, "fetch stopped: more than %d redirects", fetchMaxRedirects)
	}
	target := req.URL.Scheme + "://" + req.URL.Host
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return refusef("redirect to %.80s: only http and https URLs are fetched", target)
	}
	for _, v := range via {
		// Refused, not followed: content fetched over plain HTTP after an
		// https URL could be anybody's, yet the model would take it for
		// the https site's.
		if v.URL.Scheme == "https" && req.URL.Scheme == "http" {
			return refusef("redirect from https to %.80s: a redirect may not drop TLS", target)
		}
	}
	// Go's client drops only Authorization, Cookie and a few others when a
	// redirect leaves the host; X-Api-Key and friends would follow to any
	// host. Once the chain has left the original host, no credential
	// header the model gave is sent again.
	if leftHost(req, via) {
		for name := range req.Header {
			if isCredentialHeader(name) {
				req.Header.Del(name)
			}
		}
	}
	if f.test.noUpfrontCheck {
		return nil
	}
	return f.checkHost(req.Context(), req.URL, "redirect to "+target+": ")
}

// leftHost reports whether the redirect chain via, req has been anywhere
// but the original host.
func leftHost(req *http.Request, via []*http.Request) bool {
	origin := via[0].URL.Host
	if !strings.EqualFold(req.URL.Host, origin) {
		return true
	}
	for _, v := range via[1:] {
		if !strings.EqualFold(v.URL.Host, origin) {
			return true
		}
	}
	return false
}

// explain turns an error from the client into one sentence for the model.
func (f *Fetcher) explain(ctx context.Context, err error) error {
	var refused *refusedError
	var failed *fetchError
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &refused):
		return refused
	case errors.As(err, &failed):
		return failed
	case errors.Is(context.Cause(ctx), errFetchTimeout):
		return failf(err, "fetch failed: no complete response within %s", f.opts.Timeout)
	case ctx.Err() != nil:
		return failf(err, "fetch canceled")
	case errors.As(err, &dnsErr):
		return failf(err, "fetch failed: cannot resolve %.100s (%s)", dnsErr.Name, oneLine(dnsErr.Err))
	case errors.As(err, &certErr):
		return failf(err, "fetch failed: the server's TLS certificate is not trusted (%s)", oneLine(certErr.Err.Error()))
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return failf(err, "fetch failed: cannot connect to %v (%s)", opErr.Addr, oneLine(innermost(err).Error()))
	}
	return failf(err, "fetch failed: %s", oneLine(innermost(err).Error()))
}

// innermost skips the wrappers that repeat the URL and the operation.
func innermost(err error) error {
	for {
		var ue *url.Error
		var oe *net.OpError
		switch {
		case errors.As(err, &ue) && ue.Err != nil:
			err = ue.Err
		case errors.As(err, &oe) && oe.Err != nil:
			err = oe.Err
		default:
			return err
		}
	}
}

// oneLine makes s fit a one-sentence error: one line, valid UTF-8, short.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "")), " ")
	if len(s) > fetchMaxErrorText {
		s = cutText(s, fetchMaxErrorText) + "…"
	}
	return s
}

// render is the response as the model sees it.
func (f *Fetcher) render(ctx context.Context, asked *url.URL, resp *http.Response, secrets []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", resp.Proto, oneLine(resp.Status))
	if final := resp.Request.URL; final.String() != asked.String() {
		fmt.Fprintf(&b, "(redirected to %s)\n", oneLine(scrub(final.Redacted(), secrets)))
	}
	writeHeaders(&b, resp.Header, secrets)
	b.WriteByte('\n')
	b.WriteString(f.renderBody(ctx, resp, secrets))
	return b.String()
}

// writeHeaders writes h sorted by name, credentials as [redacted] (DESIGN.md,
// invariant 7): their presence may matter to the model, their value must
// not reach it.
func writeHeaders(b *strings.Builder, h http.Header, secrets []string) {
	total := 0
	for _, vv := range h {
		total += len(vv)
	}
	lines := 0
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			if lines == fetchMaxHeaderLines {
				fmt.Fprintf(b, "[%d more header lines not shown]\n", total-lines)
				return
			}
			if isCredentialHeader(name) {
				v = "[redacted]"
			} else {
				v = cutText(strings.ToValidUTF8(scrub(v, secrets), ""), fetchMaxHeaderValue)
			}
			fmt.Fprintf(b, "%s: %s\n", name, v)
			lines++
		}
	}
}

// renderBody reads at most MaxBytes of the decoded body (a gzip bomb costs
// MaxBytes, not what it inflates to) and returns it if it is text, or a
// line describing it if not.
func (f *Fetcher) renderBody(ctx context.Context, resp *http.Response, secrets []string) string {
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	// Still set only when the transport did not decode the body itself.
	encoding := resp.Header.Get("Content-Encoding")
	if mediaType != "" && !isTextual(mediaType) && resp.ContentLength >= 0 {
		return describeBody(mediaType, encoding, resp.ContentLength, false)
	}
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	cut := int64(len(data)) > f.opts.MaxBytes
	if cut {
		data = data[:f.opts.MaxBytes]
	}
	if len(data) == 0 && readErr == nil {
		return "[empty body]\n"
	}
	if mediaType == "" {
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(data))
	}
	if encoding != "" || !isTextual(mediaType) {
		return describeBody(mediaType, encoding, int64(len(data)), cut)
	}
	text := scrub(strings.ToValidUTF8(string(data), ""), secrets)
	var notes []string
	if len(text) > fetchMaxText {
		notes = append(notes, fmt.Sprintf("[showing the first %d of %d bytes of text]", fetchMaxText, len(text)))
		text = cutText(text, fetchMaxText)
	}
	if cut {
		notes = append(notes, fmt.Sprintf("[body truncated at %d bytes, the fetch limit; the rest was not read]", f.opts.MaxBytes))
	}
	if readErr != nil {
		msg := strings.TrimPrefix(f.explain(ctx, readErr).Error(), "fetch failed: ")
		notes = append(notes, "[body incomplete: "+msg+"]")
	}
	if len(notes) == 0 {
		return text
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + strings.Join(notes, "\n") + "\n"
}

func describeBody(mediaType, encoding string, size int64, cut bool) string {
	if mediaType == "" {
		mediaType = "unknown type"
	}
	if encoding != "" {
		mediaType += " encoded as " + oneLine(encoding)
	}
	what := fmt.Sprintf("%d bytes", size)
	if cut {
		what = "more than " + what
	}
	return fmt.Sprintf("[body not shown: %s, %s]\n", oneLine(mediaType), what)
}

// isTextual reports whether a body of mediaType (lower case, no
// parameters) is text the model can read.
func isTextual(mediaType string) bool {
	typ, sub, _ := strings.Cut(mediaType, "/")
	if typ == "text" {
		return true
	}
	for _, w := range []string{"json", "xml", "javascript", "ecmascript", "x-www-form-urlencoded", "yaml"} {
		if strings.Contains(sub, w) {
			return true
		}
	}
	return false
}

// cutText returns at most the first n bytes of s, not splitting a rune.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
