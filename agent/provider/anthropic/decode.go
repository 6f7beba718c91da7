package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/retry"
)

// complete converts a message whose message_stop has arrived.
func complete(m *sdk.Message) provider.Response {
	r := provider.Response{
		StopReason: string(m.StopReason),
		Usage: provider.Usage{
			// Cached input is billed apart but is input all the same.
			InputTokens:  int(m.Usage.InputTokens + m.Usage.CacheCreationInputTokens + m.Usage.CacheReadInputTokens),
			OutputTokens: int(m.Usage.OutputTokens),
		},
	}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				r.Content = append(r.Content, provider.Block{Type: provider.BlockText, Text: b.Text})
			}
		case "tool_use":
			input := json.RawMessage(`{}`)
			if len(b.Input) > 0 && json.Valid(b.Input) {
				input = append(json.RawMessage(nil), b.Input...)
			}
			r.Content = append(r.Content, provider.Block{
				Type:  provider.BlockToolUse,
				ID:    b.ID,
				Name:  b.Name,
				Input: input,
			})
		}
		// Other block types (thinking, server tools) are not requested.
	}
	return r
}

// partial keeps the text of a message that did not finish: the caller has
// seen it already. Tool calls are dropped, their input may be cut short.
func partial(m *sdk.Message) provider.Response {
	var r provider.Response
	for _, b := range m.Content {
		if b.Type == "text" && b.Text != "" {
			r.Content = append(r.Content, provider.Block{Type: provider.BlockText, Text: b.Text})
		}
	}
	return r
}

func (c *Client) newError(model string) *provider.Error {
	return &provider.Error{
		Provider: Name,
		Model:    model,
		Endpoint: c.endpoint,
		NoKey:    c.key == "",
	}
}

// streamBroken is a stream that stopped making sense or ended early.
func (c *Client) streamBroken(model, why string) *provider.Error {
	e := c.newError(model)
	e.Kind, e.Status, e.Temporary = provider.ErrUnavailable, http.StatusOK, true
	e.Message = provider.Scrub(why, c.key)
	return e
}

// classify sorts an SDK or network error into a provider.Error. The SDK
// error itself is not kept: it holds the request, credential and all.
func (c *Client) classify(err error, model string) *provider.Error {
	e := c.newError(model)
	var ae *sdk.Error
	if !errors.As(err, &ae) {
		// No API answer: the connection failed or broke.
		e.Kind, e.Temporary = provider.ErrUnavailable, true
		e.Message = provider.Scrub(err.Error(), c.key)
		return e
	}
	e.Status = ae.StatusCode
	e.Type = string(ae.Type())
	e.Message = provider.Scrub(ae.Message, c.key)
	if e.Message == "" {
		e.Message = http.StatusText(e.Status)
	}
	var h http.Header
	if ae.Response != nil {
		h = ae.Response.Header
	}
	e.RetryAfter = retry.After(h, time.Now())
	e.Kind, e.Temporary = kind(e.Type, e.Status)
	if h.Get("X-Should-Retry") == "false" {
		e.Temporary = false
	}
	return e
}

// kind maps the API's error type, or failing that the HTTP status, to a
// provider error kind, and says whether trying again may help.
func kind(typ string, status int) (error, bool) {
	switch typ {
	case "authentication_error", "permission_error":
		return provider.ErrAuth, false
	case "not_found_error":
		return provider.ErrModel, false
	case "rate_limit_error":
		return provider.ErrRateLimited, true
	case "overloaded_error", "api_error", "timeout_error":
		return provider.ErrUnavailable, true
	case "invalid_request_error", "billing_error", "request_too_large":
		return provider.ErrRequest, false
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return provider.ErrAuth, false
	case status == http.StatusNotFound:
		return provider.ErrModel, false
	case status == http.StatusTooManyRequests:
		return provider.ErrRateLimited, true
	case status == http.StatusRequestTimeout || status >= 500 || status == http.StatusOK:
		// 200: an error event inside the stream that we do not know.
		return provider.ErrUnavailable, true
	}
	return provider.ErrRequest, false
}
