package config

import (
	"errors"
	"fmt"
	"log/slog"
)

// Discord settings and their environment overrides.
const (
	// EnvDiscordToken supplies the Discord bot token; like the Telegram
	// token it wins over discord.token and discord.token_file.
	EnvDiscordToken = "LATCH_DISCORD_TOKEN"
	// EnvDiscordAPIURL overrides discord.api_url.
	EnvDiscordAPIURL = "LATCH_DISCORD_API_URL"
	// DefaultDiscordAPIURL is Discord's REST base (the gateway URL is asked
	// from it).
	DefaultDiscordAPIURL = "https://discord.com"
)

// DiscordConfig configures the Discord gateway.
type DiscordConfig struct {
	Token       string `json:"-"`
	TokenFile   string // absolute path of discord.token_file, or ""
	TokenSource string // EnvDiscordToken, "discord.token" or "discord.token_file"; "" if unset
	APIURL      string // REST and gateway base, without a trailing slash
	AllowGroups bool   // guild channels count (only the pairing user, only when the bot is mentioned)
	Verbosity   string // tool progress in the chat: quiet, normal (default) or verbose
}

type fileDiscord struct {
	Token       string `toml:"token"`
	TokenFile   string `toml:"token_file"`
	APIURL      string `toml:"api_url"`
	AllowGroups bool   `toml:"allow_groups"`
	Verbosity   string `toml:"verbosity"`
}

// Enabled reports whether a Discord token is set.
func (d DiscordConfig) Enabled() bool { return d.Token != "" }

// String describes d without the token.
func (d DiscordConfig) String() string {
	return fmt.Sprintf("{Token:%s TokenFile:%q TokenSource:%q APIURL:%q AllowGroups:%t}",
		redactedToken(d.Token), d.TokenFile, d.TokenSource, d.APIURL, d.AllowGroups)
}

// GoString is String for %#v.
func (d DiscordConfig) GoString() string { return "config.DiscordConfig" + d.String() }

// LogValue keeps the token out of structured logs.
func (d DiscordConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("token", redactedToken(d.Token)),
		slog.String("token_source", d.TokenSource), slog.String("api_url", d.APIURL),
		slog.Bool("allow_groups", d.AllowGroups))
}

// DiscordPlatform is Discord's row of [Platforms].
var DiscordPlatform = Platform{
	Name: "discord", Title: "Discord", APIName: "the Discord API",
	TokenEnv: EnvDiscordToken, APIURLEnv: EnvDiscordAPIURL, DefaultAPIURL: DefaultDiscordAPIURL,
	Secrets: []PlatformSecret{
		{Key: "token", Env: EnvDiscordToken, What: "the Discord bot token", FileKey: "[discord] token_file",
			file:  func(fc *fileConfig) string { return fc.Discord.Token },
			value: func(c *Config) string { return c.Discord.Token }},
	},
	Settings: func(c *Config) PlatformSettings {
		d := c.Discord
		return PlatformSettings{d.Token, d.TokenFile, d.TokenSource, d.APIURL, d.AllowGroups, d.Verbosity}
	},
	defaults:  func(c *Config) { c.Discord = DiscordConfig{APIURL: DefaultDiscordAPIURL, Verbosity: "normal"} },
	applyFile: func(l Loader, c *Config, fc *fileConfig) []error { return l.applyDiscordFile(c, fc.Discord) },
	applyEnv:  Loader.applyDiscordEnv,
}

// applyDiscordFile copies [discord] into cfg.
func (l Loader) applyDiscordFile(cfg *Config, d fileDiscord) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", cfg.Path, key, fmt.Sprintf(format, args...)))
	}
	l.applySection(cfg, "discord", sectionFile{d.Token, d.TokenFile, d.APIURL, d.AllowGroups, d.Verbosity},
		cfg.Discord.fields(), bad)
	return errs
}

// applyDiscordEnv applies LATCH_DISCORD_* and reads the token file.
func (l Loader) applyDiscordEnv(cfg *Config, secrets *[]string) []error {
	var errs []error
	if err := l.sectionToken("discord", EnvDiscordToken, cfg.Discord.fields(), secrets); err != nil {
		errs = append(errs, err)
	}
	if err := checkDiscordToken(cfg.Discord.Token); err != nil {
		errs = append(errs, fmt.Errorf("discord token (%s): %w", cfg.Discord.TokenSource, err))
	}
	if err := l.sectionAPIURL(EnvDiscordAPIURL, cfg.Discord.fields()); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkDiscordToken refuses characters a Discord bot token never has
// (base64url segments joined by dots). The token is never shown.
func checkDiscordToken(tok string) error {
	for _, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-') {
			return errors.New("has a character a Discord bot token never has; the value is not shown")
		}
	}
	return nil
}

func (d *DiscordConfig) fields() sectionTo {
	return sectionTo{&d.Token, &d.TokenSource, &d.TokenFile, &d.APIURL, &d.Verbosity, &d.AllowGroups}
}
