// Package config owns latch's state directory ($LATCH_HOME, default
// ~/.latch): finding it, creating it (latch init), loading and validating
// config.toml with environment overrides, the HMAC key file, and the
// ownership and permission checks that keep the bot token and the key private
// to the user latch runs as. The model provider's API key is held to the
// same rules as the bot token.
//
// Loading is strict on purpose: an unknown or misspelt key is an error, not a
// silently ignored line, because a typo in a security setting must not turn
// it off without anyone noticing.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Environment variables read by [Loader]. An empty variable counts as unset.
const (
	// EnvHome overrides the state directory (default ~/.latch).
	EnvHome = "LATCH_HOME"
	// EnvTelegramToken supplies the Telegram bot token; it wins over
	// telegram.token and telegram.token_file in config.toml.
	EnvTelegramToken = "LATCH_TELEGRAM_TOKEN"
	// EnvTelegramAPIURL overrides telegram.api_url.
	EnvTelegramAPIURL = "LATCH_TELEGRAM_API_URL"
)

// Defaults for settings missing from config.toml.
const (
	DefaultTelegramAPIURL = "https://api.telegram.org"
	DefaultWorkspace      = "workspace" // relative to $LATCH_HOME
	DefaultBashTimeout    = 60 * time.Second
	// MaxBashTimeout bounds agent.bash_timeout: a command that may run for
	// days is a runaway, not a setting.
	MaxBashTimeout = 24 * time.Hour
)

// Names of the files inside $LATCH_HOME.
const (
	ConfigFile = "config.toml"
	SecretFile = "secret"
	DBFile     = "latch.db"
	SocketFile = "latch.sock"
)

// Token sources, as reported by [TelegramConfig.TokenSource]: where to look
// when Telegram rejects the token.
const (
	SourceEnv       = EnvTelegramToken
	SourceConfig    = "telegram.token"
	SourceTokenFile = "telegram.token_file"
)

// Config is the resolved configuration: defaults, then config.toml, then the
// environment. All paths in it are absolute.
type Config struct {
	Home       string // resolved $LATCH_HOME
	Path       string // config file path ($LATCH_HOME/config.toml)
	Telegram   TelegramConfig
	Discord    DiscordConfig
	Slack      SlackConfig
	Matrix     MatrixConfig
	Agent      AgentConfig
	MCP        MCPConfig
	Schedule   ScheduleConfig
	Transcribe TranscribeConfig
}

// TelegramConfig configures the Telegram gateway.
//
// The token comes from, in order of precedence: LATCH_TELEGRAM_TOKEN, then
// telegram.token or telegram.token_file (setting both in the file is an
// error). When the environment supplies the token, token_file is not read.
type TelegramConfig struct {
	Token       string `json:"-"` // never serialised; see String and LogValue
	TokenFile   string // absolute path of telegram.token_file, or ""
	TokenSource string // where Token came from (SourceEnv, …), or "" if unset
	APIURL      string // Bot API server, without a trailing slash
	AllowGroups bool   // a group chat may be latched, not only a private chat
	Verbosity   string // tool progress in the chat: quiet, normal (default) or verbose
	// WebhookURL, if set, makes Telegram deliver updates to this HTTPS URL
	// instead of latch polling; WebhookListen is the host:port latch serves
	// it on (behind a TLS-terminating proxy) and WebhookSecret the
	// secret_token Telegram sends with every delivery. The secret is as
	// sensitive as the token: it lets anyone post updates as if from the
	// latched chat.
	WebhookURL    string
	WebhookListen string
	WebhookSecret string `json:"-"` // never serialised; see String and LogValue
}

// Enabled reports whether a token is set, i.e. whether the Telegram gateway
// should run.
func (t TelegramConfig) Enabled() bool { return t.Token != "" }

// String describes t without the token, so that printing a config with %v or
// %+v cannot leak it.
func (t TelegramConfig) String() string {
	return fmt.Sprintf("{Token:%s TokenFile:%q TokenSource:%q APIURL:%q AllowGroups:%t Verbosity:%q "+
		"WebhookURL:%q WebhookListen:%q WebhookSecret:%s}",
		redactedToken(t.Token), t.TokenFile, t.TokenSource, t.APIURL, t.AllowGroups, t.Verbosity,
		t.WebhookURL, t.WebhookListen, redactedToken(t.WebhookSecret))
}

// GoString is String for %#v.
func (t TelegramConfig) GoString() string { return "config.TelegramConfig" + t.String() }

// LogValue keeps the token out of structured logs.
func (t TelegramConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("token", redactedToken(t.Token)),
		slog.String("token_source", t.TokenSource),
		slog.String("token_file", t.TokenFile),
		slog.String("api_url", t.APIURL),
		slog.Bool("allow_groups", t.AllowGroups),
		slog.String("webhook_url", t.WebhookURL),
		slog.String("webhook_listen", t.WebhookListen),
		slog.String("webhook_secret", redactedToken(t.WebhookSecret)),
	)
}

func redactedToken(tok string) string {
	if tok == "" {
		return "unset"
	}
	return "[redacted]"
}

// SocketPath is the local control API socket inside home.
func SocketPath(home string) string { return filepath.Join(home, SocketFile) }

// DBPath is the bbolt store inside home.
func DBPath(home string) string { return filepath.Join(home, DBFile) }

// Loader finds and loads the configuration. Its fields let tests supply the
// environment; the zero Loader uses the real process environment.
type Loader struct {
	// Getenv looks up an environment variable; nil means os.Getenv.
	Getenv func(key string) string
	// UserHomeDir returns the user's home directory, used for the default
	// $LATCH_HOME and for "~/" in paths; nil means os.UserHomeDir.
	UserHomeDir func() (string, error)
}

func (l Loader) getenv(key string) string {
	if l.Getenv == nil {
		return os.Getenv(key)
	}
	return l.Getenv(key)
}

func (l Loader) userHomeDir() (string, error) {
	f := l.UserHomeDir
	if f == nil {
		f = os.UserHomeDir
	}
	dir, err := f()
	if err != nil {
		return "", fmt.Errorf("find your home directory: %w", err)
	}
	if dir == "" {
		return "", errors.New("find your home directory: it is empty")
	}
	return dir, nil
}

// HomeDir returns $LATCH_HOME, or ~/.latch when it is unset, as an absolute
// path, using the process environment.
func HomeDir() (string, error) { return Loader{}.HomeDir() }

// HomeDir returns $LATCH_HOME, or ~/.latch when it is unset, as an absolute
// path. A leading "~/" in LATCH_HOME is expanded, since service managers pass
// the variable through without a shell.
func (l Loader) HomeDir() (string, error) {
	if v := l.getenv(EnvHome); v != "" {
		p, err := l.expandHome(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", EnvHome, err)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", EnvHome, err)
		}
		return abs, nil
	}
	dir, err := l.userHomeDir()
	if err != nil {
		return "", fmt.Errorf("%w (or set %s)", err, EnvHome)
	}
	return filepath.Abs(filepath.Join(dir, ".latch"))
}

// expandHome replaces a leading "~" or "~/" with the user's home directory.
// "~user" is refused rather than taken as a relative path named "~user".
func (l Loader) expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		if strings.HasPrefix(p, "~") {
			return "", fmt.Errorf("%q: only ~/ is supported, not ~user", p)
		}
		return p, nil
	}
	dir, err := l.userHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, p[1:]), nil
}

// resolvePath expands "~/" and makes a relative path relative to home.
func (l Loader) resolvePath(p, home string) (string, error) {
	p, err := l.expandHome(p)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(home, p)
	}
	return filepath.Clean(p), nil
}
