// Package openai is the provider adapter for the OpenAI Chat Completions
// API and the servers that copy it — OpenAI, Ollama, vLLM, llama.cpp's
// server, OpenRouter — built on github.com/sashabaranov/go-openai. It
// streams every call (CreateChatCompletionStream), passes content deltas on
// as they arrive, and assembles tool calls from their pieces.
//
// To work with any compatible server it sends only the widely implemented
// fields (model, messages, tools, stream, stream_options.include_usage —
// dropped for good if the server refuses it — and, when set, max_tokens),
// allows an empty API key (no Authorization header is sent then), and does
// not rely on a server sending everything OpenAI does: tool calls without
// an index or an id, whole tool calls in one chunk, and a finish_reason of
// "stop" on a turn that calls tools are all understood.
//
// Config is the only source of settings: neither this package nor the SDK
// reads OPENAI_API_KEY or any other environment variable.
package openai

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/adapter"
	"github.com/latchd/latch/agent/provider/internal/retry"
)

// Name is the adapter's name, as Client.Name returns it.
const Name = "openai"

// DefaultBaseURL is the API used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// emptyLineLimit is how many non-data lines in a row the SDK's stream reader
// tolerates. Its default (300) is low for servers that send keep-alive
// comments while a model loads.
const emptyLineLimit = 100_000

// Config configures a Client.
type Config struct {
	// APIKey is sent as "Authorization: Bearer <key>". Empty is allowed, for
	// local servers that need none: no Authorization header is sent.
	APIKey string
	// BaseURL is the API root including /v1: "https://api.openai.com/v1"
	// when empty; "http://localhost:11434/v1" for Ollama,
	// "http://localhost:8000/v1" for vLLM, "https://openrouter.ai/api/v1".
	BaseURL string
	// Model is used when a Request names none.
	Model string
	// Timeout is how long one attempt may go without a byte from the
	// server — while waiting for the response, or between two pieces of the
	// stream, keep-alives included — before it is abandoned. It does not
	// cap a reply that keeps streaming. 0 means 5 minutes; a local server
	// loading a large model may need more.
	Timeout time.Duration
	// MaxRetries is how many times a temporary failure (429, 5xx, a dropped
	// connection) is retried before any text has been streamed. 0 means 2;
	// negative means never.
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
	return provider.DescribeConfig(Name, cmp.Or(c.BaseURL, DefaultBaseURL), c.Model, c.APIKey)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Client calls a Chat Completions API. It is safe for concurrent use.
type Client struct {
	core adapter.Core
	conf goopenai.ClientConfig
	// noStreamOptions is set once the server has refused
	// stream_options.include_usage.
	noStreamOptions atomic.Bool
}

var _ provider.Provider = (*Client)(nil)

// New returns a Client for cfg. It fails only for a BaseURL that is not an
// http or https URL.
func New(cfg Config) (*Client, error) {
	core, err := adapter.New(Name, DefaultBaseURL, adapter.Config(cfg))
	if err != nil {
		return nil, err
	}
	conf := goopenai.DefaultConfig(cfg.APIKey)
	conf.BaseURL = core.BaseURL
	conf.EmptyMessagesLimit = emptyLineLimit
	return &Client{core: core, conf: conf}, nil
}

// String describes c without its API key; GoString and LogValue say the
// same.
func (c *Client) String() string { return c.core.String() }

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// LogValue is String, for slog.
func (c *Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Name returns "openai".
func (c *Client) Name() string { return Name }

// Stream sends req as a streaming chat completion. See provider.Provider.
func (c *Client) Stream(ctx context.Context, req provider.Request, onText func(string)) (provider.Response, error) {
	return adapter.Stream(ctx, &c.core, req, onText, encode, c.attempt)
}

// attempt makes one streaming request and reads it to the end.
func (c *Client) attempt(ctx context.Context, creq goopenai.ChatCompletionRequest, model string, a *retry.Attempt) (provider.Response, error) {
	// The SDK keeps the response headers of a failed request to itself; a
	// recorder per attempt keeps them for Retry-After.
	rec := &recorder{inner: c.core.HTTP}
	defer rec.close()
	ctx, cancel := context.WithCancel(ctx) // Drain's bound
	defer cancel()
	conf := c.conf
	conf.HTTPClient = rec
	if c.noStreamOptions.Load() {
		creq.StreamOptions = nil
	}
	stream, err := goopenai.NewClientWithConfig(conf).CreateChatCompletionStream(ctx, creq)
	if err != nil {
		e := c.classify(err, model, rec)
		if creq.StreamOptions != nil && refusesStreamOptions(e) {
			// A server that takes only the oldest fields: ask again
			// without usage, and from now on never with it.
			c.noStreamOptions.Store(true)
			return c.attempt(ctx, creq, model, a)
		}
		return provider.Response{}, e
	}
	defer stream.Close()
	acc := newAccumulator()
	for {
		chunk, err := recv(stream)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if acc.finished {
				// The message is whole; only the usage chunk or [DONE]
				// went missing.
				break
			}
			return acc.partial(), c.classify(err, model, rec)
		}
		a.Alive()
		acc.add(chunk.ChatCompletionStreamResponse, a.Text)
		if e := c.failed(chunk, acc, model, rec); e != nil {
			return acc.partial(), e
		}
	}
	if !acc.finished {
		return acc.partial(), c.core.StreamBroken(model, "the stream ended without a finish_reason")
	}
	adapter.Drain(rec.resp.Body, cancel) // the connection stays for the next call
	return acc.response(), nil
}

// refusesStreamOptions recognises a server refusing the stream_options
// field (Azure: "Unrecognized request argument supplied: stream_options";
// strict servers: 422 "extra fields not permitted").
func refusesStreamOptions(e *provider.Error) bool {
	return (e.Status == http.StatusBadRequest || e.Status == http.StatusUnprocessableEntity) &&
		strings.Contains(e.Message, "stream_options")
}

// recorder is the HTTP client of one attempt: it notes what came back.
type recorder struct {
	inner  *http.Client
	called bool
	resp   *http.Response
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.called = true
	resp, err := r.inner.Do(req)
	r.resp = resp
	return resp, err
}

func (r *recorder) status() int {
	if r.resp == nil {
		return 0
	}
	return r.resp.StatusCode
}

func (r *recorder) header() http.Header {
	if r.resp == nil {
		return nil
	}
	return r.resp.Header
}

// close closes the response body, which the SDK leaves open after reading
// an error response.
func (r *recorder) close() {
	if r.resp != nil {
		_ = r.resp.Body.Close()
	}
}
