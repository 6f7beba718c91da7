package provider

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The kinds of failure. Every *Error matches exactly one of them with
// errors.Is.
var (
	// ErrAuth: the provider refused the credentials (401, 403).
	ErrAuth = errors.New("authentication failed")
	// ErrModel: the model does not exist, is not available to this key, or
	// none was configured (404, or refused before sending).
	ErrModel = errors.New("model not available")
	// ErrRateLimited: the provider asked us to slow down (429).
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: the provider could not be reached, failed (5xx, 529
	// overloaded), went quiet, or broke off the stream.
	ErrUnavailable = errors.New("unavailable")
	// ErrRequest: the provider refused this request as such (400, 413,
	// billing and quota errors): retrying it unchanged will not help.
	ErrRequest = errors.New("request refused")
)

// Error is a failed call to a provider. Its fields never hold the API key:
// the adapters scrub every text the provider or the network sent back
// before it gets here, and no underlying client-library error is kept (such an
// error can carry the request with its credential headers).
type Error struct {
	Kind     error  // ErrAuth, ErrModel, ErrRateLimited, ErrUnavailable or ErrRequest
	Provider string // the adapter's Name()
	Model    string // the model that was asked for
	Endpoint string // scheme://host[:port] of the API, without credentials or path
	// Status is the HTTP status of the response, 0 when none arrived. An
	// error reported inside a stream keeps the stream's status (200).
	Status int
	// Type is the provider's error type or code ("overloaded_error",
	// "model_not_found"), if it sent one.
	Type string
	// Message is the provider's own explanation, or the network error, on
	// one line and shortened.
	Message string
	// RetryAfter is how long the provider asked us to wait, if it did.
	RetryAfter time.Duration
	// Temporary means the same request may succeed later.
	Temporary bool
	// Partial means the stream broke off after text had reached the caller,
	// which is why it was not retried.
	Partial bool
	// Idle is how long the attempt went without hearing from the provider
	// before it was abandoned; 0 unless that is what happened.
	Idle time.Duration
	// NoKey means no API key was configured.
	NoKey bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	b.WriteString(": ")
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
	} else {
		b.WriteString("failed")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Idle > 0 {
		fmt.Fprintf(&b, ": nothing received for %s", e.Idle)
	}
	if e.Type != "" {
		b.WriteString(": ")
		b.WriteString(e.Type)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Partial {
		b.WriteString(" (after part of the reply was delivered)")
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrAuth) and the like work.
func (e *Error) Unwrap() error { return e.Kind }

// Describe turns an error from Provider.Stream into one sentence for the
// chat. It names the config setting to check where there is one, and never
// repeats a key, a header or a stack.
func Describe(err error) string {
	if err == nil {
		return ""
	}
	if errors.Is(err, context.Canceled) {
		return "The request to the model was stopped."
	}
	var e *Error
	if !errors.As(err, &e) {
		if errors.Is(err, context.DeadlineExceeded) {
			return "The model took too long to answer."
		}
		return "The call to the model failed."
	}
	switch {
	case errors.Is(e, ErrAuth):
		return describeAuth(e)
	case errors.Is(e, ErrModel):
		return describeModel(e)
	case errors.Is(e, ErrRateLimited):
		return describeRateLimit(e)
	case errors.Is(e, ErrUnavailable):
		return describeUnavailable(e)
	case errors.Is(e, ErrRequest):
		if e.Message != "" {
			return fmt.Sprintf("The model provider refused the request%s: %s", status(e), sentence(e.Message))
		}
		return fmt.Sprintf("The model provider refused the request%s.", status(e))
	}
	return "The call to the model failed."
}

func describeAuth(e *Error) string {
	switch {
	case e.NoKey:
		return fmt.Sprintf("The model provider needs an API key%s. Set [agent] api_key.", status(e))
	case e.Status == 403:
		return "The model provider refused this API key access (403). Check [agent] api_key and what the key is allowed to use."
	}
	return fmt.Sprintf("The model provider rejected the API key%s. Check [agent] api_key.", status(e))
}

func describeModel(e *Error) string {
	if e.Model == "" {
		return "No model is configured. Set [agent] model."
	}
	if e.Status == 0 && e.Message != "" {
		// Refused before sending: the client library knows this model
		// cannot be used this way.
		return fmt.Sprintf("The model %q cannot be used here: %s", e.Model, sentence(e.Message))
	}
	return fmt.Sprintf("The model provider does not offer the model %q%s. Check [agent] model and base_url.", e.Model, status(e))
}

func describeRateLimit(e *Error) string {
	wait := "in a minute"
	if e.RetryAfter > 0 {
		wait = "in " + humanDuration(e.RetryAfter)
	}
	return fmt.Sprintf("The model provider is rate-limiting requests%s. Try again %s.", status(e), wait)
}

func describeUnavailable(e *Error) string {
	switch {
	case e.Partial:
		return "The connection to the model provider broke off in the middle of the reply. Send the message again."
	case e.Idle > 0:
		return fmt.Sprintf("The model provider sent nothing for %s, so the request was abandoned. Try again.", humanDuration(e.Idle))
	case e.Status == 0:
		at := ""
		if e.Endpoint != "" {
			at = " at " + e.Endpoint
		}
		return fmt.Sprintf("Could not reach the model provider%s. Check that it is running and [agent] base_url.", at)
	case e.Status >= 500 || e.Type == "overloaded_error":
		return fmt.Sprintf("The model provider is overloaded or having trouble%s. Try again shortly.", status(e))
	}
	return "The model provider ended the reply before it was complete. Try again."
}

// status renders " (401)" for the sentences, or nothing for a stream error.
func status(e *Error) string {
	if e.Status == 0 || e.Status == 200 {
		return ""
	}
	return " (" + strconv.Itoa(e.Status) + ")"
}

// sentence ends a provider message with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return "a second"
	case d < time.Minute:
		n := int((d + time.Second - 1) / time.Second)
		if n == 1 {
			return "1 second"
		}
		return strconv.Itoa(n) + " seconds"
	default:
		n := int((d + time.Minute - 1) / time.Minute)
		if n == 1 {
			return "1 minute"
		}
		return strconv.Itoa(n) + " minutes"
	}
}

// maxMessage bounds Error.Message: enough for any real provider explanation,
// short enough for one chat line.
const maxMessage = 300

// Scrub prepares a text the provider or the network sent back for an
// Error: every occurrence of a secret becomes "[redacted]", line breaks
// become spaces and the result is cut to a few hundred characters.
// Secrets shorter than 4 bytes are ignored (they would redact every word).
func Scrub(s string, secrets ...string) string {
	for _, k := range secrets {
		if len(k) >= 4 {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// Endpoint reduces a base URL to scheme://host[:port], the part that is
// safe to show: no user info, path or query, where a credential could sit.
// It returns "" for a URL it cannot parse.
func Endpoint(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// DescribeConfig is how a client's Config prints: endpoint scheme and host,
// model, and only whether a key is set — never the key or a URL path.
func DescribeConfig(name, baseURL, model, apiKey string) string {
	key := "unset"
	if apiKey != "" {
		key = "set"
	}
	return fmt.Sprintf("%s.Config{Endpoint: %q, Model: %q, APIKey: %s}", name, Endpoint(baseURL), model, key)
}
