package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/adapter"
)

// maxErrorBody bounds how much of an error response is read: the API's
// are a few hundred bytes, a proxy's HTML page may be more.
const maxErrorBody = 64 << 10

// netError is a request that got no answer from the API, or whose answer
// broke off.
func (c *Client) netError(err error, model string) *provider.Error {
	return c.core.NetError(model, err)
}

// responseError reads an error response:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}.
func (c *Client) responseError(resp *http.Response, model string) *provider.Error {
	var body struct {
		Error *wireError `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var typ, msg string
	if json.Unmarshal(b, &body) == nil && body.Error != nil {
		typ, msg = body.Error.Type, body.Error.Message
	}
	return c.apiError(model, resp.StatusCode, resp.Header, typ, msg)
}

// apiError is an error the API reported, in a response or in an error
// event of a stream (status 200).
func (c *Client) apiError(model string, status int, h http.Header, typ, msg string) *provider.Error {
	e := c.core.APIError(model, status, h, typ, msg, kind)
	if h.Get("X-Should-Retry") == "false" {
		e.Temporary = false
	}
	return e
}

// callError is a failed call other than a stream: when ctx ended, or the
// HTTP client's own timeout ran out, it says so in a way errors.Is can
// tell (the doctor reports "no answer within …").
func (c *Client) callError(ctx context.Context, err error, model string) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", Name, ctx.Err())
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: no answer in time: %w", Name, context.DeadlineExceeded)
	}
	return c.netError(err, model)
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
	return adapter.StatusKind(status)
}
