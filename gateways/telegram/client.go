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

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/redact"
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
const redacted = redact.Placeholder

// scrub returns err with every occurrence of the token removed. URL and API
// errors are rebuilt field by field so callers can still inspect them; any
// other error that mentions the token anywhere in its chain is replaced by an
// opaque one that keeps only its text (scrubbed) and whether it was a
// cancellation, a timeout or ErrUnauthorized.
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
	return redact.Opaque(err, tokenForms(token), ErrUnauthorized, adapter.ErrUnauthorized)
}

// scrubString removes the token from s.
func scrubString(s, token string) string { return redact.String(s, tokenForms(token)) }

// tokenForms are the forms of the token to remove: those a URL may carry,
// and its secret half on its own.
func tokenForms(token string) []string {
	forms := redact.URLForms(token)
	if _, secret, ok := strings.Cut(token, ":"); ok && len(secret) >= 8 {
		forms = append(forms, secret)
	}
	return forms
}
