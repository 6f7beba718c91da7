// Package adapter holds what the provider adapters (anthropic, openai)
// share beneath their protocols: their settings, checked and printed
// without the key; the frame of a streamed call (pick the model, encode
// once, attempt under the retry policy); and the building of a
// provider.Error from what an API or the network sent back, scrubbed of
// the key and sorted into a kind.
//
// What a protocol says — paths, headers, the shape of its errors and of
// its stream — stays in the adapter that speaks it.
package adapter

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/retry"
)

// Config is the settings every adapter takes. anthropic.Config and
// openai.Config have exactly these fields, in this order, so either
// converts to it (adapter.Config(cfg)); their docs say what each field
// means for that API. A field added to one must be added to all three.
type Config struct {
	APIKey, BaseURL, Model string
	Timeout                time.Duration
	MaxRetries             int
	HTTPClient             *http.Client
	Logger                 *slog.Logger
}

// Core is the part of a client that does not depend on its protocol. It
// does not change once made, so a client holding one is safe for
// concurrent use.
type Core struct {
	Name     string       // the adapter's name ("anthropic"), for errors and logs
	BaseURL  string       // Config.BaseURL, or the adapter's default
	Model    string       // used when a request names none
	Key      string       // the API key; "" for none
	Endpoint string       // scheme://host[:port] of BaseURL: the part safe to show
	HTTP     *http.Client // a copy of Config.HTTPClient whose responses count as signs of life
	Policy   retry.Policy
}

// New checks cfg and makes the Core of the adapter name, with defaultBase
// for an empty BaseURL. It fails only for a base URL that is not an http
// or https URL.
func New(name, defaultBase string, cfg Config) (Core, error) {
	base := cmp.Or(cfg.BaseURL, defaultBase)
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Core{}, fmt.Errorf("%s: base_url must be an http:// or https:// URL", name)
	}
	return Core{
		Name:     name,
		BaseURL:  base,
		Model:    cfg.Model,
		Key:      cfg.APIKey,
		Endpoint: provider.Endpoint(base),
		HTTP:     retry.HTTPClient(cfg.HTTPClient),
		Policy: retry.Policy{
			Provider:   name,
			MaxRetries: cfg.MaxRetries,
			Idle:       cfg.Timeout,
			Logger:     cfg.Logger,
		},
	}, nil
}

// String describes the client without its API key or anything of its base
// URL beyond scheme and host: "anthropic.Client{Endpoint: …, Model: …}".
func (c *Core) String() string {
	return fmt.Sprintf("%s.Client{Endpoint: %q, Model: %q}", c.Name, c.Endpoint, c.Model)
}

// Stream is the frame of an adapter's Stream: it asks for the request's
// model, else the configured one, encodes req once with encode, and makes
// attempts with attempt under the retry policy. See provider.Provider.
func Stream[B any](ctx context.Context, c *Core, req provider.Request, onText func(string),
	encode func(req provider.Request, model string) (B, error),
	attempt func(ctx context.Context, body B, model string, a *retry.Attempt) (provider.Response, error),
) (provider.Response, error) {
	model := cmp.Or(req.Model, c.Model)
	if model == "" {
		return provider.Response{}, c.NoModel()
	}
	body, err := encode(req, model)
	if err != nil {
		return provider.Response{}, fmt.Errorf("%s: %w", c.Name, err)
	}
	return retry.Do(ctx, c.Policy, onText, func(ctx context.Context, a *retry.Attempt) (provider.Response, error) {
		return attempt(ctx, body, model, a)
	})
}
