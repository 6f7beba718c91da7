// Package anthropic is the provider adapter for Anthropic's Messages API,
// built on the official SDK (github.com/anthropics/anthropic-sdk-go/v2). It
// streams every call, passes text deltas on as they arrive, and accumulates
// tool_use blocks from their input_json_delta pieces.
//
// Config is the only source of settings. The SDK on its own would also read
// ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL,
// ANTHROPIC_CUSTOM_HEADERS, ANTHROPIC_PROFILE and credential files under
// ~/.config/anthropic; New switches all of that off
// (option.WithoutEnvironmentDefaults), so an explicit setting always wins
// and nothing reaches the provider that the owner did not configure.
// Falling back to an environment variable is the config layer's decision,
// made before New is called.
package anthropic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/retry"
)

// Name is the adapter's name, as Client.Name returns it.
const Name = "anthropic"

// DefaultBaseURL is the API used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is max_tokens for a request that does not set MaxTokens:
// the Messages API requires one.
const DefaultMaxTokens = 8192

// Config configures a Client. Only APIKey and Model are usually set.
type Config struct {
	// APIKey is sent as "Authorization: Bearer <key>" (what the SDK does).
	// Empty sends no credential; the API will then answer 401.
	APIKey string
	// BaseURL is the API root, without /v1: "https://api.anthropic.com" when
	// empty. Set it for a proxy or gateway that speaks the Messages API.
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
	// is used, its transport wrapped to watch for signs of life. Its
	// Timeout, if any, must leave room for a whole streamed reply.
	HTTPClient *http.Client
	// Logger gets a line for each retry; nil means no logs. The API key is
	// never logged.
	Logger *slog.Logger
}

// String describes c without its API key or anything in BaseURL beyond
// scheme and host, so a Config that ends up in a log carries no secret.
// GoString and LogValue say the same.
func (c Config) String() string {
	return provider.DescribeConfig("anthropic", cmp.Or(c.BaseURL, DefaultBaseURL), c.Model, c.APIKey)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Client calls the Messages API. It is safe for concurrent use.
type Client struct {
	sdk      sdk.Client
	model    string
	key      string
	endpoint string
	policy   retry.Policy
}

var _ provider.Provider = (*Client)(nil)

// New returns a Client for cfg. It fails only for a BaseURL that is not an
// http or https URL.
func New(cfg Config) (*Client, error) {
	base := cmp.Or(cfg.BaseURL, DefaultBaseURL)
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("anthropic: base_url must be an http:// or https:// URL")
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithHTTPClient(retry.HTTPClient(cfg.HTTPClient)),
		option.WithMaxRetries(0), // retry.Do retries, and knows when it must not
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &Client{
		sdk:      sdk.NewClient(opts...),
		model:    cfg.Model,
		key:      cfg.APIKey,
		endpoint: provider.Endpoint(base),
		policy: retry.Policy{
			Provider:   Name,
			MaxRetries: cfg.MaxRetries,
			Idle:       cfg.Timeout,
			Logger:     cfg.Logger,
		},
	}, nil
}

// String describes c without its API key; GoString and LogValue say the
// same.
func (c *Client) String() string {
	return fmt.Sprintf("anthropic.Client{Endpoint: %q, Model: %q}", c.endpoint, c.model)
}

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Name returns "anthropic".
func (c *Client) Name() string { return Name }

// Stream sends req as a streaming Messages request. See provider.Provider.
func (c *Client) Stream(ctx context.Context, req provider.Request, onText func(string)) (provider.Response, error) {
	model := cmp.Or(req.Model, c.model)
	if model == "" {
		e := c.newError("")
		e.Kind = provider.ErrModel
		e.Message = "no model configured"
		return provider.Response{}, e
	}
	params, err := encode(req, model)
	if err != nil {
		return provider.Response{}, fmt.Errorf("anthropic: %w", err)
	}
	return retry.Do(ctx, c.policy, onText, func(ctx context.Context, a *retry.Attempt) (provider.Response, error) {
		return c.attempt(ctx, params, model, a)
	})
}

// attempt makes one streaming request and reads it to the end.
func (c *Client) attempt(ctx context.Context, params sdk.MessageNewParams, model string, a *retry.Attempt) (provider.Response, error) {
	stream := c.sdk.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg sdk.Message
	stopped := false
	for stream.Next() {
		a.Alive()
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return partial(&msg), c.streamBroken(model, err.Error())
		}
		switch ev.Type {
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" {
				a.Text(ev.Delta.Text)
			}
		case "message_stop":
			stopped = true
		}
	}
	// Once message_stop has arrived the message is whole; what happens to
	// the connection after it does not matter.
	if stopped {
		return complete(&msg), nil
	}
	if err := stream.Err(); err != nil {
		return partial(&msg), c.classify(err, model)
	}
	return partial(&msg), c.streamBroken(model, "the stream ended before message_stop")
}
