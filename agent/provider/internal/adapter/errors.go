package adapter

import (
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/internal/retry"
)

// Error starts an error of this client's about model; the caller fills in
// the kind and what happened.
func (c *Core) Error(model string) *provider.Error {
	return &provider.Error{
		Provider: c.Name,
		Model:    model,
		Endpoint: c.Endpoint,
		NoKey:    c.Key == "",
	}
}

// NoModel is the error for a call with no model to ask for.
func (c *Core) NoModel() *provider.Error {
	e := c.Error("")
	e.Kind = provider.ErrModel
	e.Message = "no model configured"
	return e
}

// StreamBroken is a stream that stopped making sense or ended before the
// message did. It came with a 200, and asking again may go better.
func (c *Core) StreamBroken(model, why string) *provider.Error {
	e := c.Error(model)
	e.Kind, e.Status, e.Temporary = provider.ErrUnavailable, http.StatusOK, true
	e.Message = provider.Scrub(why, c.Key)
	return e
}

// NetError is a request that got no answer, or whose answer broke off, from
// the error the HTTP client returned. A *url.Error starts with the whole
// request URL, whose path or query may hold a proxy's secret (Endpoint
// already says where), so only what it wraps is kept.
func (c *Core) NetError(model string, err error) *provider.Error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return c.Unreachable(model, err.Error())
}

// Unreachable is a request that got no answer, or whose answer broke off;
// msg is the network's explanation.
func (c *Core) Unreachable(model, msg string) *provider.Error {
	e := c.Error(model)
	e.Kind, e.Temporary = provider.ErrUnavailable, true
	e.Message = provider.Scrub(msg, c.Key)
	return e
}

// APIError is an error the API answered with: an error response, or an
// error inside a stream (status 200). typ is the API's error type or code
// and msg its explanation, as sent; kind sorts them, with the status, into
// a provider error kind and says whether trying again may help. The wait
// the API asked for is read from h.
func (c *Core) APIError(model string, status int, h http.Header, typ, msg string, kind func(typ string, status int) (error, bool)) *provider.Error {
	e := c.Error(model)
	e.Status = status
	e.Type = provider.Scrub(typ, c.Key)
	e.Message = provider.Scrub(msg, c.Key)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	e.RetryAfter = retry.After(h, time.Now())
	e.Kind, e.Temporary = kind(typ, status)
	return e
}

// StatusKind sorts an error by its HTTP status alone, for an error type or
// code the adapter does not know, and says whether trying again may help.
func StatusKind(status int) (error, bool) {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return provider.ErrAuth, false
	case status == http.StatusNotFound:
		return provider.ErrModel, false
	case status == http.StatusTooManyRequests:
		return provider.ErrRateLimited, true
	case status == http.StatusRequestTimeout || status >= 500 || status == http.StatusOK:
		// 200: an error sent inside the stream, of a type not known here.
		return provider.ErrUnavailable, true
	}
	return provider.ErrRequest, false
}
