package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

const (
	maxConfigSize    = 1 << 20
	maxTokenFileSize = 64 << 10
	// minRedactLen keeps redaction from mangling messages around a
	// placeholder token of a few letters; real tokens are ~46 characters.
	minRedactLen = 8
)

// Load loads $LATCH_HOME/config.toml using the process environment; see
// [Loader.Load].
func Load(home string) (*Config, error) { return Loader{}.Load(home) }

// Load reads home/config.toml, applies the environment overrides and
// validates the result. A missing config.toml means all defaults (the
// environment still applies).
//
// Load refuses, with an error that names the file and the chmod that fixes
// it: a config.toml that belongs to another user or that group or others
// may write; a config.toml that holds telegram.token or agent.api_key and
// that group or others may read; a token_file or api_key_file that group or
// others may access. Unknown keys are errors. No error contains the token
// or the API key.
//
// Load does not check home itself; callers that keep state there call
// [CheckHome] first.
func (l Loader) Load(home string) (*Config, error) {
	var secrets []string
	cfg, err := l.load(home, "", &secrets)
	if err != nil {
		return nil, redact(err, secrets)
	}
	return cfg, nil
}

// load is Load; path, if not "", is read in place of home/config.toml.
func (l Loader) load(home, path string, secrets *[]string) (*Config, error) {
	if home == "" {
		return nil, errors.New("load config: no latch home directory given")
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	cfg := &Config{
		Home:       home,
		Path:       filepath.Join(home, ConfigFile),
		Telegram:   TelegramConfig{APIURL: DefaultTelegramAPIURL, Verbosity: "normal", WebhookListen: DefaultTelegramWebhookListen},
		Discord:    DiscordConfig{APIURL: DefaultDiscordAPIURL, Verbosity: "normal"},
		Slack:      SlackConfig{APIURL: DefaultSlackAPIURL, Verbosity: "normal"},
		Agent:      defaultAgent(home),
		Schedule:   defaultSchedule(),
		Transcribe: defaultTranscribe(),
	}
	if path == "" {
		path = cfg.Path
	}
	fc, err := readConfigFile(path, secrets)
	if err != nil {
		return nil, err
	}
	var errs []error
	if fc != nil {
		errs = l.applyFile(cfg, fc)
		errs = append(errs, l.applyMCPFile(cfg, fc.MCP, secrets)...)
	}
	errs = append(errs, l.applyEnv(cfg, secrets)...)
	errs = append(errs, readTranscribeKey(cfg, secrets)...)
	errs = append(errs, checkWorkspace(cfg)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// readConfigFile reads and decodes path; it returns nil, nil when the file
// does not exist.
func readConfigFile(path string, secrets *[]string) (*fileConfig, error) {
	data, fi, err := readFile(path, maxConfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(path); lerr == nil {
			return nil, fmt.Errorf("%s is a symbolic link to a missing file", path)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if err := checkOwner(path, fi); err != nil {
		return nil, err
	}
	perm := fi.Mode().Perm()
	// Whoever can write the file can point api_url at their own server and
	// collect the token from the environment, so this holds with or
	// without a token in the file.
	if perm&0o022 != 0 {
		return nil, insecuref("%s can be changed by other users (mode %04o); fix it with: chmod 600 %s",
			path, perm, path)
	}

	var fc fileConfig
	md, err := toml.Decode(string(data), &fc)
	// Whatever part of a secret was decoded must not show up in an error.
	*secrets = append(*secrets, fc.Telegram.Token, strings.TrimSpace(fc.Telegram.Token),
		fc.Agent.APIKey, strings.TrimSpace(fc.Agent.APIKey),
		fc.Discord.Token, strings.TrimSpace(fc.Discord.Token), fc.Telegram.WebhookSecret,
		fc.Transcribe.APIKey, strings.TrimSpace(fc.Transcribe.APIKey))
	*secrets = append(*secrets, mcpFileSecrets(fc.MCP)...)
	*secrets = append(*secrets, fc.Slack.fileSecrets()...)
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return nil, syntaxError(path, pe)
	}
	// Checked before type errors and unknown keys so that a file that
	// exposes a secret is refused as such even when it has other faults.
	if held := secretsHeld(md, &fc); perm&0o077 != 0 && len(held) > 0 {
		return nil, insecuref("%s holds %s and is open to other users (mode %04o); fix it with: chmod 600 %s",
			path, strings.Join(held, " and "), perm, path)
	}
	if err != nil {
		return nil, typeError(path, err)
	}
	if err := checkKeys(path, md); err != nil {
		return nil, err
	}
	if err := checkTables(path, md); err != nil {
		return nil, err
	}
	return &fc, nil
}

// secretsHeld names the secret keys config.toml sets, even to "". The
// decoded value catches a case-folded "Token" too.
func secretsHeld(md toml.MetaData, fc *fileConfig) []string {
	var held []string
	if md.IsDefined("telegram", "token") || fc.Telegram.Token != "" {
		held = append(held, "telegram.token")
	}
	if md.IsDefined("agent", "api_key") || fc.Agent.APIKey != "" {
		held = append(held, "agent.api_key")
	}
	if md.IsDefined("transcribe", "api_key") || fc.Transcribe.APIKey != "" {
		held = append(held, "transcribe.api_key")
	}
	if md.IsDefined("discord", "token") || fc.Discord.Token != "" {
		held = append(held, "discord.token")
	}
	if md.IsDefined("telegram", "webhook_secret") || fc.Telegram.WebhookSecret != "" {
		held = append(held, "telegram.webhook_secret")
	}
	held = append(held, fc.Slack.held(md.IsDefined)...)
	if mcpSecretsHeld(fc.MCP) {
		held = append(held, "mcp.servers headers or env")
	}
	return held
}

// applyFile copies the settings of config.toml into cfg. An empty string
// means the key's default. The token file is read later, in applyEnv, as the
// environment may make it unnecessary.
func (l Loader) applyFile(cfg *Config, fc *fileConfig) []error {
	var errs []error
	bad := func(key string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", cfg.Path, key, fmt.Sprintf(format, args...)))
	}
	t := fc.Telegram
	switch {
	case t.Token != "" && t.TokenFile != "":
		bad("telegram.token", "token and token_file are both set; keep one")
	case t.Token != "":
		cfg.Telegram.Token = strings.TrimSpace(t.Token)
		cfg.Telegram.TokenSource = SourceConfig
	case t.TokenFile != "":
		p, err := l.resolvePath(t.TokenFile, cfg.Home)
		if err != nil {
			bad("telegram.token_file", "%v", err)
		}
		cfg.Telegram.TokenFile = p
	}
	if t.APIURL != "" {
		u, err := validateAPIURL(t.APIURL)
		if err != nil {
			bad("telegram.api_url", "%v", err)
		}
		cfg.Telegram.APIURL = u
	}
	cfg.Telegram.AllowGroups = t.AllowGroups
	switch t.Verbosity {
	case "":
	case "quiet", "normal", "verbose":
		cfg.Telegram.Verbosity = t.Verbosity
	default:
		bad("telegram.verbosity", "must be quiet, normal or verbose")
	}
	applyTelegramWebhook(cfg, t, bad)
	applySchedule(cfg, fc.Schedule, bad)
	l.applyTranscribe(cfg, fc.Transcribe, bad)

	a := fc.Agent
	if a.Workspace != "" {
		p, err := l.resolvePath(a.Workspace, cfg.Home)
		if err != nil {
			bad("agent.workspace", "%v", err)
		}
		cfg.Agent.Workspace = p
	}
	if a.BashTimeout != "" {
		d, err := parseBashTimeout(a.BashTimeout)
		if err != nil {
			bad("agent.bash_timeout", "%v", err)
		}
		cfg.Agent.BashTimeout = d
	}
	errs = append(errs, l.applyDiscordFile(cfg, fc.Discord)...)
	errs = append(errs, l.applySlackFile(cfg, fc.Slack)...)
	return append(errs, l.applyAgentFile(cfg, &fc.Agent)...)
}

// applyEnv applies the environment overrides, reads the token file if the
// environment did not supply the token, and checks the token.
func (l Loader) applyEnv(cfg *Config, secrets *[]string) []error {
	var errs []error
	if v := l.getenv(EnvTelegramToken); v != "" {
		*secrets = append(*secrets, v, strings.TrimSpace(v))
		cfg.Telegram.Token = strings.TrimSpace(v)
		cfg.Telegram.TokenSource = SourceEnv
		if cfg.Telegram.Token == "" {
			errs = append(errs, fmt.Errorf("%s: is only whitespace", EnvTelegramToken))
		}
	} else if cfg.Telegram.TokenFile != "" {
		tok, err := readTokenFile(cfg.Telegram.TokenFile, secrets)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Telegram.Token = tok
		cfg.Telegram.TokenSource = SourceTokenFile
	}
	if err := checkToken(cfg.Telegram.Token); err != nil {
		where := EnvTelegramToken
		switch cfg.Telegram.TokenSource {
		case SourceConfig:
			where = cfg.Path + ": telegram.token"
		case SourceTokenFile:
			where = "token file " + cfg.Telegram.TokenFile
		}
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if v := l.getenv(EnvTelegramAPIURL); v != "" {
		u, err := validateAPIURL(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvTelegramAPIURL, err))
		}
		cfg.Telegram.APIURL = u
	}
	errs = append(errs, l.applyDiscordEnv(cfg, secrets)...)
	errs = append(errs, l.applySlackEnv(cfg, secrets)...)
	return append(errs, l.applyAgentEnv(cfg, secrets)...)
}

// readTokenFile returns the trimmed content of a token file that only its
// owner, the current user, can access.
func readTokenFile(path string, secrets *[]string) (string, error) {
	return readSecretFile(path, "telegram.token_file", "token file", secrets)
}

// readSecretFile returns the trimmed content of the file that key names,
// which only its owner, the current user, may access; what names the file
// in errors.
func readSecretFile(path, key, what string, secrets *[]string) (string, error) {
	data, fi, err := readFile(path, maxTokenFileSize)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	s := strings.TrimSpace(string(data))
	*secrets = append(*secrets, s)
	if err := checkPrivate(path, fi, what); err != nil {
		return "", err
	}
	if s == "" {
		return "", fmt.Errorf("%s %s is empty", what, path)
	}
	return s, nil
}

// checkToken refuses characters a Telegram bot token never has. The token
// becomes part of every request path (/bot<token>/method), so a stray '/',
// '?' or space would change which URL is requested. The value is never
// repeated in the error.
func checkToken(tok string) error {
	for _, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == ':' || r == '_' || r == '-') {
			return errors.New("has a character a bot token never has " +
				"(only letters, digits, ':', '_' and '-'); the value is not shown")
		}
	}
	return nil
}

// validateAPIURL checks that raw is an absolute http(s) URL a client can
// append a path to ("/bot<token>/<method>", "/v1/messages"), and returns it
// without trailing slashes.
func validateAPIURL(raw string) (string, error) {
	shown := quoteURL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			// The parser's detail quotes pieces of the user info.
			return "", fmt.Errorf("%s is not a valid URL", shown)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("%s is not a valid URL: %v", shown, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%s must be an absolute http:// or https:// URL", shown)
	case u.Host == "":
		return "", fmt.Errorf("%s has no host", shown)
	case u.User != nil:
		return "", fmt.Errorf("%s must not contain a user name or password", shown)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		// A query may hold a key ("?key=…"): it is not repeated.
		u.RawQuery, u.ForceQuery, u.Fragment = "", false, ""
		return "", fmt.Errorf("%q must not have a query or fragment: the API path is appended to it", u.String()+"?…")
	}
	return strings.TrimRight(raw, "/"), nil
}

// quoteURL quotes a URL for an error without what comes before its last
// "@": user info may hold a password or an API key, and a URL that does not
// parse cannot be trusted to say where its user info ends.
func quoteURL(raw string) string {
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		return fmt.Sprintf("%q", "…"+raw[i:])
	}
	return fmt.Sprintf("%q", raw)
}

func parseBashTimeout(s string) (time.Duration, error) { return parseDuration(s, 0, MaxBashTimeout) }

// parseDuration parses a positive duration of at least lo and at most hi.
// A value that looks like a key is not repeated (see quoteValue).
func parseDuration(s string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s is not a duration; write it like \"60s\" or \"5m\"", quoteValue(s))
	case d <= 0:
		return 0, fmt.Errorf("%s must be positive", quoteValue(s))
	case d < lo:
		return 0, fmt.Errorf("%s is shorter than the minimum, %v", quoteValue(s), lo)
	case d > hi:
		return 0, fmt.Errorf("%s is longer than the maximum, %v", quoteValue(s), hi)
	}
	return d, nil
}

// redact replaces each secret in err's message. The result still unwraps to
// err, for errors.Is; only its message is safe to print.
func redact(err error, secrets []string) error {
	msg := err.Error()
	for _, s := range secrets {
		if len(s) >= minRedactLen {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
