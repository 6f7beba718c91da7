package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Slack settings and their environment overrides.
const (
	// EnvSlackAppToken and EnvSlackBotToken supply the Slack tokens; each
	// wins over its key and _file twin in [slack].
	EnvSlackAppToken = "LATCH_SLACK_APP_TOKEN"
	EnvSlackBotToken = "LATCH_SLACK_BOT_TOKEN"
	// EnvSlackAPIURL overrides slack.api_url.
	EnvSlackAPIURL = "LATCH_SLACK_API_URL"
	// DefaultSlackAPIURL is Slack's Web API base.
	DefaultSlackAPIURL = "https://slack.com/api"
)

// SlackConfig configures the Slack gateway (Socket Mode).
type SlackConfig struct {
	AppToken       string `json:"-"` // xapp-…, Socket Mode
	BotToken       string `json:"-"` // xoxb-…, the Web API
	AppTokenFile   string // absolute paths of the _file keys, or ""
	BotTokenFile   string
	AppTokenSource string // EnvSlackAppToken, "slack.app_token" or "slack.app_token_file"; "" if unset
	BotTokenSource string
	APIURL         string // the Web API base, without a trailing slash
	AllowGroups    bool   // channels count where the bot is mentioned
	Verbosity      string // tool progress in the chat: quiet, normal (default) or verbose
}

type fileSlack struct {
	AppToken     string `toml:"app_token"`
	AppTokenFile string `toml:"app_token_file"`
	BotToken     string `toml:"bot_token"`
	BotTokenFile string `toml:"bot_token_file"`
	APIURL       string `toml:"api_url"`
	AllowGroups  bool   `toml:"allow_groups"`
	Verbosity    string `toml:"verbosity"`
}

// Enabled reports whether both Slack tokens are set.
func (s SlackConfig) Enabled() bool { return s.AppToken != "" && s.BotToken != "" }

// Secrets are the tokens, for the scrubbers.
func (s SlackConfig) Secrets() []string { return []string{s.AppToken, s.BotToken} }

// String describes s without the tokens.
func (s SlackConfig) String() string {
	return fmt.Sprintf("{AppToken:%s BotToken:%s AppTokenSource:%q BotTokenSource:%q APIURL:%q AllowGroups:%t}",
		redactedToken(s.AppToken), redactedToken(s.BotToken), s.AppTokenSource, s.BotTokenSource, s.APIURL, s.AllowGroups)
}

// GoString is String for %#v.
func (s SlackConfig) GoString() string { return "config.SlackConfig" + s.String() }

// LogValue keeps the tokens out of structured logs.
func (s SlackConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("app_token", redactedToken(s.AppToken)), slog.String("bot_token", redactedToken(s.BotToken)),
		slog.String("api_url", s.APIURL), slog.Bool("allow_groups", s.AllowGroups))
}

// SlackPlatform is Slack's row of [Platforms]. It has two secrets, the
// app-level token (Socket Mode) and the bot token (the Web API); the
// gateway is on only with both, so its settings name a token only then.
var SlackPlatform = Platform{
	Name: "slack", Title: "Slack", APIName: "the Slack Web API",
	TokenEnv: EnvSlackBotToken, APIURLEnv: EnvSlackAPIURL, DefaultAPIURL: DefaultSlackAPIURL,
	Secrets: []PlatformSecret{
		{Key: "bot_token", Env: EnvSlackBotToken, What: "the Slack bot token", FileKey: "[slack] bot_token_file", Prefix: "xoxb-",
			file:  func(fc *fileConfig) string { return fc.Slack.BotToken },
			value: func(c *Config) string { return c.Slack.BotToken }},
		{Key: "app_token", Env: EnvSlackAppToken, What: "the Slack app-level token", FileKey: "[slack] app_token_file", Prefix: "xapp-",
			file:  func(fc *fileConfig) string { return fc.Slack.AppToken },
			value: func(c *Config) string { return c.Slack.AppToken }},
	},
	Settings: func(c *Config) PlatformSettings {
		s := c.Slack
		ps := PlatformSettings{TokenFile: s.BotTokenFile, TokenSource: s.BotTokenSource, APIURL: s.APIURL,
			AllowGroups: s.AllowGroups, Verbosity: s.Verbosity}
		if s.Enabled() {
			ps.Token = s.BotToken
		}
		return ps
	},
	defaults:  func(c *Config) { c.Slack = SlackConfig{APIURL: DefaultSlackAPIURL, Verbosity: "normal"} },
	applyFile: func(l Loader, c *Config, fc *fileConfig) []error { return l.applySlackFile(c, fc.Slack) },
	applyEnv:  Loader.applySlackEnv,
}

// applySlackFile copies [slack] into cfg.
func (l Loader) applySlackFile(cfg *Config, s fileSlack) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", cfg.Path, key, fmt.Sprintf(format, args...)))
	}
	token := func(key, v, file string, tok, path, source *string) {
		switch {
		case v != "" && file != "":
			bad("slack."+key, "%s and %s_file are both set; keep one", key, key)
		case v != "":
			*tok, *source = strings.TrimSpace(v), "slack."+key
		case file != "":
			p, err := l.resolvePath(file, cfg.Home)
			if err != nil {
				bad("slack."+key+"_file", "%v", err)
			}
			*path = p
		}
	}
	token("app_token", s.AppToken, s.AppTokenFile, &cfg.Slack.AppToken, &cfg.Slack.AppTokenFile, &cfg.Slack.AppTokenSource)
	token("bot_token", s.BotToken, s.BotTokenFile, &cfg.Slack.BotToken, &cfg.Slack.BotTokenFile, &cfg.Slack.BotTokenSource)
	if s.APIURL != "" {
		u, err := validateAPIURL(s.APIURL)
		if err != nil {
			bad("slack.api_url", "%v", err)
		}
		cfg.Slack.APIURL = u
	}
	cfg.Slack.AllowGroups = s.AllowGroups
	switch s.Verbosity {
	case "":
	case "quiet", "normal", "verbose":
		cfg.Slack.Verbosity = s.Verbosity
	default:
		bad("slack.verbosity", "must be quiet, normal or verbose")
	}
	return errs
}

// applySlackEnv applies LATCH_SLACK_*, reads the token files and checks
// the tokens.
func (l Loader) applySlackEnv(cfg *Config, secrets *[]string) []error {
	var errs []error
	token := func(env, key, prefix string, tok *string, path string, source *string) {
		if v := l.getenv(env); v != "" {
			*secrets = append(*secrets, v, strings.TrimSpace(v))
			*tok, *source = strings.TrimSpace(v), env
		} else if path != "" {
			t, err := readSecretFile(path, "slack."+key+"_file", "token file", secrets)
			if err != nil {
				errs = append(errs, err)
			}
			*tok, *source = t, "slack."+key+"_file"
		}
		if err := checkSlackToken(*tok, prefix); err != nil {
			errs = append(errs, fmt.Errorf("slack %s (%s): %w", key, *source, err))
		}
	}
	token(EnvSlackAppToken, "app_token", "xapp-", &cfg.Slack.AppToken, cfg.Slack.AppTokenFile, &cfg.Slack.AppTokenSource)
	token(EnvSlackBotToken, "bot_token", "xoxb-", &cfg.Slack.BotToken, cfg.Slack.BotTokenFile, &cfg.Slack.BotTokenSource)
	if (cfg.Slack.AppToken == "") != (cfg.Slack.BotToken == "") {
		errs = append(errs, errors.New("[slack] needs both app_token (xapp-…, Socket Mode) and bot_token (xoxb-…)"))
	}
	if v := l.getenv(EnvSlackAPIURL); v != "" {
		u, err := validateAPIURL(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvSlackAPIURL, err))
		}
		cfg.Slack.APIURL = u
	}
	return errs
}

// checkSlackToken wants the token's kind by its prefix and refuses
// characters a Slack token never has. The token is never shown.
func checkSlackToken(tok, prefix string) error {
	if tok == "" {
		return nil
	}
	if !strings.HasPrefix(tok, prefix) {
		return fmt.Errorf("does not start with %s; the value is not shown", prefix)
	}
	for _, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return errors.New("has a character a Slack token never has; the value is not shown")
		}
	}
	return nil
}
