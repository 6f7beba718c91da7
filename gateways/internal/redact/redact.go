// Package redact keeps the chat adapters' secrets (bot tokens, webhook
// secrets, interaction tokens) out of the errors they return and the lines
// they log. Each adapter says in which forms its secrets may appear (a
// token's secret part on its own, say); this package cuts those forms out
// of text and of error chains.
package redact

import (
	"context"
	"errors"
	"net/url"
	"strings"
)

// Placeholder stands in for a secret in scrubbed text.
const Placeholder = "<redacted>"

// URLForms are the forms of secret a request URL may carry: as it is,
// path-escaped and query-escaped ("" has none).
func URLForms(secret string) []string {
	if secret == "" {
		return nil
	}
	return []string{secret, url.PathEscape(secret), url.QueryEscape(secret)}
}

// String replaces every one of forms in s with Placeholder.
func String(s string, forms []string) string {
	for _, f := range forms {
		if f != "" {
			s = strings.ReplaceAll(s, f, Placeholder)
		}
	}
	return s
}

// Leaks reports whether any error in err's chain mentions one of forms.
func Leaks(err error, forms []string) bool {
	if err == nil {
		return false
	}
	if String(err.Error(), forms) != err.Error() {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return Leaks(u.Unwrap(), forms)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if Leaks(e, forms) {
				return true
			}
		}
	}
	return false
}

// Opaque returns err itself if nothing in its chain mentions one of forms.
// Otherwise it returns an opaque error with err's scrubbed text, which
// still answers errors.Is for cancellation, timeouts and the given kinds
// (an adapter's ErrUnauthorized) where err did; nothing else of the chain
// survives, since any of it could hold the secret.
func Opaque(err error, forms []string, kinds ...error) error {
	if !Leaks(err, forms) {
		return err
	}
	s := &scrubbedError{msg: String(err.Error(), forms)}
	for _, kind := range append([]error{context.Canceled, context.DeadlineExceeded}, kinds...) {
		if errors.Is(err, kind) {
			s.kinds = append(s.kinds, kind)
		}
	}
	return s
}

// scrubbedError is an error whose original mentioned a secret.
type scrubbedError struct {
	msg   string
	kinds []error
}

func (e *scrubbedError) Error() string { return e.msg }

// Is keeps errors.Is working for the kinds the original was.
func (e *scrubbedError) Is(target error) bool {
	for _, k := range e.kinds {
		if k == target {
			return true
		}
	}
	return false
}
