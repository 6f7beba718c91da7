package config

import (
	"fmt"
	"strings"
)

// TelegramPlatform is Telegram's row of [Platforms].
var TelegramPlatform = Platform{
	Name: "telegram", Title: "Telegram", APIName: "the Telegram Bot API",
	TokenEnv: EnvTelegramToken, APIURLEnv: EnvTelegramAPIURL, DefaultAPIURL: DefaultTelegramAPIURL,
	Secrets: []PlatformSecret{
		{Key: "token", Env: EnvTelegramToken, What: "the Telegram bot token", FileKey: "[telegram] token_file",
			file:  func(fc *fileConfig) string { return fc.Telegram.Token },
			value: func(c *Config) string { return c.Telegram.Token }},
		{Key: "webhook_secret", What: "the Telegram webhook secret",
			file:  func(fc *fileConfig) string { return fc.Telegram.WebhookSecret },
			value: func(c *Config) string { return c.Telegram.WebhookSecret }},
	},
	Settings: func(c *Config) PlatformSettings {
		t := c.Telegram
		return PlatformSettings{t.Token, t.TokenFile, t.TokenSource, t.APIURL, t.AllowGroups, t.Verbosity}
	},
	defaults: func(c *Config) {
		c.Telegram = TelegramConfig{APIURL: DefaultTelegramAPIURL, Verbosity: "normal", WebhookListen: DefaultTelegramWebhookListen}
	},
	applyFile: Loader.applyTelegramFile,
	applyEnv:  Loader.applyTelegramEnv,
}

// applyTelegramFile copies [telegram] into cfg.
func (l Loader) applyTelegramFile(cfg *Config, fc *fileConfig) []error {
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
	return errs
}

// applyTelegramEnv applies LATCH_TELEGRAM_*, reads the token file if the
// environment did not supply the token, and checks the token.
func (l Loader) applyTelegramEnv(cfg *Config, secrets *[]string) []error {
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
	return errs
}
