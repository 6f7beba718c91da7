package config

import (
	"fmt"
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
	l.applySection(cfg, "telegram", sectionFile{t.Token, t.TokenFile, t.APIURL, t.AllowGroups, t.Verbosity},
		cfg.Telegram.fields(), bad)
	applyTelegramWebhook(cfg, t, bad)
	return errs
}

// applyTelegramEnv applies LATCH_TELEGRAM_*, reads the token file if the
// environment did not supply the token, and checks the token.
func (l Loader) applyTelegramEnv(cfg *Config, secrets *[]string) []error {
	var errs []error
	if err := l.sectionToken("telegram", EnvTelegramToken, cfg.Telegram.fields(), secrets); err != nil {
		errs = append(errs, err)
	}
	if cfg.Telegram.TokenSource == SourceEnv && cfg.Telegram.Token == "" {
		errs = append(errs, fmt.Errorf("%s: is only whitespace", EnvTelegramToken))
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
	if err := l.sectionAPIURL(EnvTelegramAPIURL, cfg.Telegram.fields()); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func (t *TelegramConfig) fields() sectionTo {
	return sectionTo{&t.Token, &t.TokenSource, &t.TokenFile, &t.APIURL, &t.Verbosity, &t.AllowGroups}
}
