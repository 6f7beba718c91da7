// Package anthropic is the provider adapter for Anthropic's Messages API,
// spoken directly over net/http: POST /v1/messages with "stream": true,
// read as server-sent events. It passes text deltas on as they arrive,
// accumulates tool_use blocks from their input_json_delta pieces, and
// sorts every failure into a provider.Error. It also reads the Models API
// (Model, Models), which `latch doctor` uses to check the configuration.
//
// It is its own client rather than the official SDK because the SDK and
// what it pulls in (OpenTelemetry, YAML, JSON Schema, webhooks) were most
// of the binary and more than doubled the daemon's idle memory, for the
// handful of request and event shapes latch uses.
//
// Config is the only source of settings: nothing is read from the
// environment (no ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL or credential
// files). Falling back to an environment variable is the config layer's
// decision, made before New is called. Only the HTTP client's transport
// may consult the environment: http.DefaultTransport honours HTTPS_PROXY.
package anthropic

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/adapter"
	"github.com/latchd/latch/agent/provider/internal/retry"
)

// Name is the adapter's name, as Client.Name returns it.
const Name = "anthropic"

// DefaultBaseURL is the API used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is max_tokens for a request that does not set MaxTokens:
// the Messages API requires one.
const DefaultMaxTokens = 8192

// apiVersion is the anthropic-version header every request carries: the
// version of the Messages API whose shapes this package speaks.
const apiVersion = "2023-06-01"

// maxRedirects is how many redirects a request follows, as net/http does
// by default.
const maxRedirects = 10

// Config configures a Client. Only APIKey and Model are usually set.
type Config struct {
	// APIKey is sent as "x-api-key: <key>", and only to the host of
	// BaseURL: a redirect elsewhere goes without it. Empty sends no
	// credential; the API will then answer 401.
	APIKey string
	// BaseURL is the API root, without /v1: "https://api.anthropic.com" when
	// empty. Set it for a proxy or gateway that speaks the Messages API; a
	// path in it is kept (requests go to <BaseURL>/v1/messages), a query is
	// not.
	BaseURL string
	// Model is used when a Request names none.
	Model string
	// Timeout is how long one attempt may go without a byte from the
	// API — while waiting for the response, or between two pieces of the
	// stream, keep-alives included — before it is abandoned. It does not
	// cap a reply that keeps streaming. 0 means 5 minutes.
	Timeout time.Duration
	// MaxRetries is how many times a temporary failure (429, 5xx, 529
	// overloaded, a dropped connection) is retried before any text has been
	// streamed. 0 means 2; negative means never.
	MaxRetries int
	// HTTPClient makes the requests; nil means http.DefaultClient. A copy
	// is used, its transport wrapped to watch for signs of life and its
	// redirect policy to keep the key from other hosts. Its Timeout, if
	// any, must leave room for a whole streamed reply.
	HTTPClient *http.Client
	// Logger gets a line for each retry; nil means no logs. The API key is
	// never logged.
	Logger *slog.Logger
}

// String describes c without its API key or anything in BaseURL beyond
// scheme and host, so a Config that ends up in a log carries no secret.
// GoString and LogValue say the same.
func (c Config) String() string {
	return provider.DescribeConfig(Name, cmp.Or(c.BaseURL, DefaultBaseURL), c.Model, c.APIKey)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Client calls the Messages API. It is safe for concurrent use.
type Client struct {
	core adapter.Core
	base *url.URL // BaseURL without query or fragment
}

var _ provider.Provider = (*Client)(nil)

// New returns a Client for cfg. It fails only for a BaseURL that is not an
// http or https URL.
func New(cfg Config) (*Client, error) {
	core, err := adapter.New(Name, DefaultBaseURL, adapter.Config(cfg))
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(core.BaseURL) // adapter.New has checked that it parses
	base.RawQuery, base.ForceQuery, base.Fragment, base.RawFragment = "", false, "", ""
	core.HTTP.CheckRedirect = keepKeyHome(core.HTTP.CheckRedirect)
	return &Client{core: core, base: base}, nil
}

// keepKeyHome wraps a redirect policy (nil: net/http's) so that the API
// key goes only where the first request went. net/http drops
// Authorization on a redirect to another host, but not x-api-key.
func keepKeyHome(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			req.Header.Del("X-Api-Key")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
}

// String describes c without its API key; GoString and LogValue say the
// same.
func (c *Client) String() string { return c.core.String() }

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Name returns "anthropic".
func (c *Client) Name() string { return Name }

// Stream sends req as a streaming Messages request. See provider.Provider.
func (c *Client) Stream(ctx context.Context, req provider.Request, onText func(string)) (provider.Response, error) {
	return adapter.Stream(ctx, &c.core, req, onText, encode, c.attempt)
}

// attempt makes one streaming request and reads it until message_stop.
func (c *Client) attempt(ctx context.Context, body []byte, model string, a *retry.Attempt) (provider.Response, error) {
	ctx, cancel := context.WithCancel(ctx) // Drain's bound
	defer cancel()
	req, err := c.newRequest(ctx, http.MethodPost, c.base.JoinPath("v1", "messages"), bytes.NewReader(body))
	if err != nil {
		return provider.Response{}, c.netError(err, model)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.core.HTTP.Do(req)
	if err != nil {
		return provider.Response{}, c.netError(err, model)
	}
	// Once message_stop has arrived the message is whole: what is left of
	// the body is read (Drain) only so that the connection stays.
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return provider.Response{}, c.responseError(resp, model)
	}
	var r reply
	events := newSSEReader(resp.Body)
	for {
		ev, err := events.next()
		switch {
		case errors.Is(err, io.EOF):
			return r.partial(), c.core.StreamBroken(model, "the stream ended before message_stop")
		case errors.Is(err, errEventTooLarge):
			return r.partial(), c.core.StreamBroken(model, err.Error())
		case err != nil:
			return r.partial(), c.netError(err, model)
		}
		a.Alive()
		done, err := r.apply(ev, a.Text)
		var se *streamError
		switch {
		case errors.As(err, &se):
			return r.partial(), c.apiError(model, resp.StatusCode, resp.Header, se.Type, se.Message)
		case err != nil:
			return r.partial(), c.core.StreamBroken(model, err.Error())
		case done:
			adapter.Drain(resp.Body, cancel) // the connection stays for the next call
			return r.complete(), nil
		}
	}
}

// newRequest is a request to the API with the headers every request
// carries.
func (c *Client) newRequest(ctx context.Context, method string, u *url.URL, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Anthropic-Version", apiVersion)
	if c.core.Key != "" {
		req.Header.Set("X-Api-Key", c.core.Key)
	}
	return req, nil
}
