package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways"
)

// maxResponseBytes bounds a Bot API answer. 100 updates of maximal messages
// stay far below it; anything larger is not the Bot API.
const maxResponseBytes = 32 << 20

var errResponseTooLarge = errors.New("Bot API response too large")

// httpClient is the tgbotapi.HTTPClient latch hands the library. The library
// takes no contexts, so each call gets a client bound to the caller's ctx
// (cancelling it aborts an in-flight long poll at once). It also bounds each
// request with a timeout and scrubs the token from every error, since the
// library returns *url.Error values that quote the request URL.
type httpClient struct {
	ctx     context.Context
	base    *http.Client
	timeout time.Duration
	token   string
}

func (c *httpClient) Do(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	resp, err := c.base.Do(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, scrub(err, c.token)
	}
	if resp.StatusCode != http.StatusOK && !isJSON(resp.Header.Get("Content-Type")) {
		// A proxy's error page: report the status, not a JSON syntax error.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		cancel()
		return nil, &statusError{code: resp.StatusCode, status: resp.Status}
	}
	resp.Body = &limitedBody{rc: resp.Body, left: maxResponseBytes, cancel: cancel}
	return resp, nil
}

func isJSON(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// statusError is an HTTP error answer that is not Bot API JSON.
type statusError struct {
	code   int
	status string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("Bot API answered HTTP %s without a JSON body", e.status)
}

// limitedBody caps a response body and releases the request's context when
// the library closes it.
type limitedBody struct {
	rc     io.ReadCloser
	left   int64
	cancel context.CancelFunc
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}

// redacted replaces the token in scrubbed text.
const redacted = "<redacted>"

// scrub returns err with every occurrence of the token removed. URL and API
// errors are rebuilt field by field so callers can still inspect them; any
// other error that mentions the token anywhere in its chain is replaced by an
// opaque one that keeps only its text (scrubbed) and whether it was a
// cancellation or a timeout.
func scrub(err error, token string) error {
	if err == nil || token == "" {
		return err
	}
	switch e := err.(type) {
	case *url.Error:
		return &url.Error{Op: e.Op, URL: scrubString(e.URL, token), Err: scrub(e.Err, token)}
	case *tgbotapi.Error:
		c := *e
		c.Message = scrubString(c.Message, token)
		return &c
	}
	if !leaks(err, token) {
		return err
	}
	s := &scrubbedError{msg: scrubString(err.Error(), token)}
	for _, kind := range []error{context.Canceled, context.DeadlineExceeded, ErrUnauthorized, gateways.ErrUnauthorized} {
		if errors.Is(err, kind) {
			s.kinds = append(s.kinds, kind)
		}
	}
	return s
}

// leaks reports whether any error in err's chain mentions the token.
func leaks(err error, token string) bool {
	if err == nil {
		return false
	}
	if scrubString(err.Error(), token) != err.Error() {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return leaks(u.Unwrap(), token)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if leaks(e, token) {
				return true
			}
		}
	}
	return false
}

// scrubString removes the token, in the forms a URL may carry it, and its
// secret half on its own.
func scrubString(s, token string) string {
	if token == "" {
		return s
	}
	forms := []string{token, url.PathEscape(token), url.QueryEscape(token)}
	if _, secret, ok := strings.Cut(token, ":"); ok && len(secret) >= 8 {
		forms = append(forms, secret)
	}
	for _, f := range forms {
		s = strings.ReplaceAll(s, f, redacted)
	}
	return s
}

// scrubbedError is an error whose original mentioned the token.
type scrubbedError struct {
	msg   string
	kinds []error
}

func (e *scrubbedError) Error() string { return e.msg }

// Is keeps errors.Is working for cancellation, timeouts and ErrUnauthorized.
func (e *scrubbedError) Is(target error) bool {
	for _, k := range e.kinds {
		if k == target {
			return true
		}
	}
	return false
}
