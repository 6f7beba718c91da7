package config

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"github.com/BurntSushi/toml"
)

// DefaultTelegramWebhookListen is where the webhook listener binds when
// telegram.webhook_listen is unset: loopback, behind a reverse proxy that
// terminates TLS.
const DefaultTelegramWebhookListen = "127.0.0.1:8443"

// maxWebhookSecret is Telegram's limit on a webhook's secret_token.
const maxWebhookSecret = 256

// applyTelegramWebhook checks and copies telegram.webhook_url,
// webhook_listen and webhook_secret. The secret is never repeated in an
// error; it is whoever knows it who can post updates as if from Telegram.
func applyTelegramWebhook(cfg *Config, t fileTelegram, bad func(key, format string, args ...any)) {
	if t.WebhookListen != "" {
		if err := checkListen(t.WebhookListen); err != nil {
			bad("telegram.webhook_listen", "%v", err)
		}
		cfg.Telegram.WebhookListen = t.WebhookListen
	}
	if t.WebhookSecret != "" {
		if !validWebhookSecret(t.WebhookSecret) {
			bad("telegram.webhook_secret", "must be 1 to %d characters of A-Z, a-z, 0-9, _ and - "+
				"(Telegram's rule for secret_token); the value is not shown", maxWebhookSecret)
		}
		cfg.Telegram.WebhookSecret = t.WebhookSecret
	}
	if t.WebhookURL == "" {
		return
	}
	u, err := validateWebhookURL(t.WebhookURL)
	if err != nil {
		bad("telegram.webhook_url", "%v", err)
	}
	cfg.Telegram.WebhookURL = u
	if t.WebhookSecret == "" {
		bad("telegram.webhook_secret", "is required when webhook_url is set, so that only Telegram can post "+
			"updates; run `latch init` to add a random one")
	}
}

// validateWebhookURL checks the URL Telegram is to deliver to. Telegram
// delivers only over HTTPS to ports 443, 80, 88 and 8443; plain HTTP (and
// any port) is allowed on loopback only, which Telegram cannot reach but a
// test or a proxy on the same machine can.
func validateWebhookURL(raw string) (string, error) {
	shown := quoteURL(raw)
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s is not a valid URL", shown)
	case u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return "", fmt.Errorf("%s must be an absolute https:// URL", shown)
	case u.User != nil:
		return "", fmt.Errorf("%s must not contain a user name or password", shown)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		u.RawQuery, u.ForceQuery, u.Fragment = "", false, ""
		return "", fmt.Errorf("%q must not have a query or fragment: the secret goes in webhook_secret", u.String()+"?…")
	}
	if isLoopbackHost(u.Hostname()) {
		return raw, nil
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("%s must be https://: Telegram delivers to HTTPS only "+
			"(put a reverse proxy that terminates TLS in front of webhook_listen)", shown)
	}
	switch u.Port() {
	case "", "443", "80", "88", "8443":
		return raw, nil
	}
	return "", fmt.Errorf("%s: Telegram delivers only to ports 443, 80, 88 and 8443", shown)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkListen checks a host:port to bind (the host may be empty: every
// interface).
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port, e.g. %q", addr, DefaultTelegramWebhookListen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", addr)
	}
	return nil
}

func validWebhookSecret(s string) bool {
	if s == "" || len(s) > maxWebhookSecret {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// NewWebhookSecret returns 32 random bytes as unpadded base64url: 43
// characters, all of them allowed in Telegram's secret_token.
func NewWebhookSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // never returns an error; it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}

// telegramHeader matches the [telegram] table header on a line of its own.
var telegramHeader = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^[ \t]*\[[ \t]*telegram[ \t]*\][ \t]*(#.*)?\r?\n`)
})

// ErrNoTelegramTable is returned by EnsureWebhookSecret when config.toml
// sets telegram.webhook_url other than under a [telegram] header, so there
// is no safe place to add the secret.
var ErrNoTelegramTable = errors.New("config.toml has no [telegram] header line to add webhook_secret under")

// EnsureWebhookSecret adds a random telegram.webhook_secret to an existing
// config.toml that sets telegram.webhook_url without one, and reports
// whether it did. Any other config.toml, including one that does not
// parse, is left alone. The new line goes
// right under the [telegram] header; the rest of the file is kept byte for
// byte, and the file is replaced atomically with the same mode. A file that
// others can read is refused, since it would then hold a secret.
func EnsureWebhookSecret(home string) (bool, error) {
	path := filepath.Join(home, ConfigFile)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // a config.toml that links elsewhere is changed where it lives
	}
	data, fi, err := readFile(path, maxConfigSize)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read config: %w", err)
	}
	var fc fileConfig
	md, err := toml.Decode(string(data), &fc)
	if err != nil || fc.Telegram.WebhookURL == "" || md.IsDefined("telegram", "webhook_secret") {
		// A file that does not parse is Load's to report.
		return false, nil
	}
	if err := checkOwner(path, fi); err != nil {
		return false, err
	}
	perm := fi.Mode().Perm()
	if perm&0o077 != 0 {
		return false, insecuref("%s is open to other users (mode %04o) and would hold the webhook secret; "+
			"fix it with: chmod 600 %s", path, perm, path)
	}
	loc := telegramHeader().FindIndex(data)
	if loc == nil {
		return false, fmt.Errorf("%s: %w; add webhook_secret to the [telegram] settings yourself", path, ErrNoTelegramTable)
	}
	secret := NewWebhookSecret()
	line := fmt.Appendf(nil, "# Added by latch init: Telegram sends it with every webhook delivery.\nwebhook_secret = %q\n", secret)
	out := make([]byte, 0, len(data)+len(line))
	out = append(append(append(out, data[:loc[1]]...), line...), data[loc[1]:]...)
	// The header could sit inside a multi-line string: make sure the line
	// landed where it means what it should.
	var check fileConfig
	if _, err := toml.Decode(string(out), &check); err != nil || check.Telegram.WebhookSecret != secret {
		return false, fmt.Errorf("%s: %w; add webhook_secret to the [telegram] settings yourself", path, ErrNoTelegramTable)
	}
	return true, replaceFile(path, out, perm)
}

// replaceFile writes data to a new file next to path and renames it over
// path, so a crash leaves either the old file or the new one.
func replaceFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
