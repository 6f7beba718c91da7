package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/redact"
)

// redacted replaces a secret in scrubbed text.
const redacted = redact.Placeholder

// APIError is an error answer of Discord's REST API. Unlike discordgo's
// RESTError it keeps no *http.Request, whose Authorization header holds the
// bot token, and its message is scrubbed.
type APIError struct {
	Status  int    // HTTP status
	Code    int    // Discord's JSON error code (50035, 10062, …); 0 if none
	Message string // Discord's message; "" when the body was not JSON
	// RetryAfter is the wait a 429 asked for.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	switch {
	case e.Message == "":
		return fmt.Sprintf("Discord answered HTTP %d %s without a JSON body", e.Status, http.StatusText(e.Status))
	case e.Code != 0:
		return fmt.Sprintf("Discord answered HTTP %d: %s (code %d)", e.Status, e.Message, e.Code)
	}
	return fmt.Sprintf("Discord answered HTTP %d: %s", e.Status, e.Message)
}

// isAPI reports whether err is an APIError with the status (0: any) and
// the code (0: any).
func isAPI(err error, status, code int) bool {
	var e *APIError
	return errors.As(err, &e) && (status == 0 || e.Status == status) && (code == 0 || e.Code == code)
}

// secretForms lists the strings to remove for a secret: the forms a URL
// may carry it in and, for a bot token (id.timestamp.hmac), its HMAC part
// on its own.
func secretForms(secrets ...string) []string {
	var forms []string
	for _, s := range secrets {
		forms = append(forms, redact.URLForms(s)...)
		if parts := strings.Split(s, "."); len(parts) == 3 && len(parts[2]) >= 8 {
			forms = append(forms, parts[2])
		}
	}
	return forms
}

// scrubString removes every form of the secrets from s.
func scrubString(s string, secrets ...string) string {
	return redact.String(s, secretForms(secrets...))
}

// scrub returns err without the secrets. discordgo's REST and rate-limit
// errors become APIErrors; URL errors (an interaction callback's URL holds
// the interaction token) are rebuilt with the URL scrubbed; any other error
// that mentions a secret becomes an opaque one with its scrubbed text that
// still answers errors.Is for cancellation, timeouts and ErrUnauthorized.
func scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	var rest *discordgo.RESTError
	if errors.As(err, &rest) && rest.Response != nil {
		e := &APIError{Status: rest.Response.StatusCode}
		if rest.Message != nil {
			e.Code, e.Message = rest.Message.Code, scrubString(rest.Message.Message, secrets...)
		}
		return e
	}
	var limited *discordgo.RateLimitError
	if errors.As(err, &limited) && limited.RateLimit != nil && limited.TooManyRequests != nil {
		return &APIError{Status: http.StatusTooManyRequests, Message: scrubString(limited.Message, secrets...),
			RetryAfter: limited.RetryAfter}
	}
	if u, ok := err.(*url.Error); ok {
		return &url.Error{Op: u.Op, URL: scrubString(u.URL, secrets...), Err: scrub(u.Err, secrets...)}
	}
	return redact.Opaque(err, secretForms(secrets...), ErrUnauthorized, adapter.ErrUnauthorized)
}

// discordgo logs through one package-level function, discordgo.Logger, for
// every session in the process. latch installs a router once: each line is
// scrubbed of every running gateway's token and goes to those gateways'
// loggers. Sessions log at LogWarning and above only: discordgo's debug
// lines print the IDENTIFY payload, token included.
var libraryLog struct {
	once     sync.Once
	mu       sync.Mutex
	gateways map[*Gateway]bool
}

// maxLibraryLine bounds one discordgo log line (some quote whole payloads).
const maxLibraryLine = 1000

func attachLibraryLog(g *Gateway) {
	libraryLog.once.Do(func() { discordgo.Logger = routeLibraryLog })
	libraryLog.mu.Lock()
	defer libraryLog.mu.Unlock()
	if libraryLog.gateways == nil {
		libraryLog.gateways = map[*Gateway]bool{}
	}
	libraryLog.gateways[g] = true
}

func detachLibraryLog(g *Gateway) {
	libraryLog.mu.Lock()
	defer libraryLog.mu.Unlock()
	delete(libraryLog.gateways, g)
}

func routeLibraryLog(level, _ int, format string, a ...any) {
	libraryLog.mu.Lock()
	var targets []*Gateway
	var secrets []string
	for g := range libraryLog.gateways {
		targets = append(targets, g)
		secrets = append(secrets, g.cfg.Token)
	}
	libraryLog.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	// Scrub before clipping: a clip could cut a token in half.
	msg := scrubString(strings.TrimSpace(fmt.Sprintf(format, a...)), secrets...)
	if len(msg) > maxLibraryLine {
		msg = strings.ToValidUTF8(msg[:maxLibraryLine], "") + "…"
	}
	// Its errors are mostly transient (a failed reconnect attempt); its
	// warnings repeat what latch logs itself (a lost connection) or are
	// noise (a RESUME answered with replayed events before RESUMED).
	lvl := slog.LevelDebug
	if level == discordgo.LogError {
		lvl = slog.LevelWarn
	}
	for _, g := range targets {
		g.log.Log(context.Background(), lvl, "discordgo: "+msg)
	}
}
