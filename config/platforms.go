package config

import (
	"fmt"
	"strings"
)

// Platform is what the config layer knows of one chat platform: its section
// of config.toml, its variables, and which of its settings are secrets.
// It holds no code of the platform's: config imports nothing of latch, so
// the constructor and the rest of a platform's row are in daemon.Platforms,
// which embeds this. Everything that must know "every platform's secrets"
// (the redaction of load errors, the refusal of a world-readable
// config.toml, configSecrets, tools.SafeEnv, daemon.Harden, service
// install) loops over [Platforms], so a new platform cannot be forgotten by
// one of them.
type Platform struct {
	Name          string // gateway name, config section and `latch pair` argument
	Title         string // for messages: "Telegram"
	APIName       string // what api_url points at, for messages: "the Telegram Bot API"
	TokenEnv      string // the variable that supplies the token
	APIURLEnv     string // the variable that overrides api_url
	DefaultAPIURL string
	Secrets       []PlatformSecret // the token first
	// Settings returns the section's loaded settings in the form every
	// platform shares.
	Settings func(*Config) PlatformSettings

	defaults  func(*Config)                              // the section's defaults, before config.toml
	applyFile func(Loader, *Config, *fileConfig) []error // config.toml's section into cfg
	applyEnv  func(Loader, *Config, *[]string) []error   // the variables, then the token file; adds what it reads to secrets
}

// PlatformSecret is one setting of a platform's section that must never be shown.
type PlatformSecret struct {
	Key     string // in the section: "token"
	Env     string // the variable that supplies it, or "" if none does
	What    string // for messages: "the Telegram bot token"
	FileKey string // the setting that reads it from a file instead, or ""
	Prefix  string // what a well-formed value starts with ("xoxb-"), or "" for no rule
	file    func(*fileConfig) string
	value   func(*Config) string
}

// Value returns the secret's loaded value in cfg.
func (s PlatformSecret) Value(cfg *Config) string { return s.value(cfg) }

// PlatformSettings is a platform's section, loaded, in the form every
// platform shares.
type PlatformSettings struct {
	Token       string `json:"-"`
	TokenFile   string
	TokenSource string // the token variable, "<name>.token" or "<name>.token_file"; "" if unset
	APIURL      string
	AllowGroups bool
	Verbosity   string
}

// Enabled reports whether a token is set, i.e. whether the gateway runs.
func (s PlatformSettings) Enabled() bool { return s.Token != "" }

// Platforms lists every chat platform latch has, in the order the gateways
// start and are listed. A new platform adds its row here.
var Platforms = []Platform{TelegramPlatform, DiscordPlatform, SlackPlatform, MatrixPlatform}

// PlatformNamed returns the row of [Platforms] called name.
func PlatformNamed(name string) (Platform, bool) {
	for _, p := range Platforms {
		if p.Name == name {
			return p, true
		}
	}
	return Platform{}, false
}

// PlatformSecrets returns the value of every platform's secrets in cfg,
// for the redaction of logs and errors.
func PlatformSecrets(cfg *Config) []string {
	var out []string
	for _, p := range Platforms {
		for _, s := range p.Secrets {
			out = append(out, s.value(cfg))
		}
	}
	return out
}

// IsPlatformSecretEnv reports whether name is a variable that supplies a
// platform's secret. Names are compared upper-cased, so that an odd
// spelling errs on the side of hiding.
func IsPlatformSecretEnv(name string) bool {
	for _, p := range Platforms {
		for _, s := range p.Secrets {
			if s.Env != "" && strings.EqualFold(s.Env, name) {
				return true
			}
		}
	}
	return false
}

// fileSecrets returns what config.toml set for every platform's secrets,
// as decoded and trimmed, so that no part of one shows up in an error.
func fileSecrets(fc *fileConfig) []string {
	var out []string
	for _, p := range Platforms {
		for _, s := range p.Secrets {
			v := s.file(fc)
			out = append(out, v, strings.TrimSpace(v))
		}
	}
	return out
}

// platformSecretsHeld names the platform secrets config.toml sets, even
// to "".
func platformSecretsHeld(defined func(section, key string) bool, fc *fileConfig) []string {
	var held []string
	for _, p := range Platforms {
		for _, s := range p.Secrets {
			if defined(p.Name, s.Key) || s.file(fc) != "" {
				held = append(held, p.Name+"."+s.Key)
			}
		}
	}
	return held
}

// sectionFile is what every platform's section of config.toml holds.
type sectionFile struct {
	Token, TokenFile, APIURL string
	AllowGroups              bool
	Verbosity                string
}

// sectionTo points at where a platform's loaded section keeps them.
type sectionTo struct {
	Token, TokenSource, TokenFile, APIURL, Verbosity *string
	AllowGroups                                      *bool
}

// applySection checks and copies the settings every platform's section
// has; the token file is read later, with the environment.
func (l Loader) applySection(cfg *Config, name string, f sectionFile, to sectionTo, bad func(key, format string, args ...any)) {
	switch {
	case f.Token != "" && f.TokenFile != "":
		bad(name+".token", "token and token_file are both set; keep one")
	case f.Token != "":
		*to.Token = strings.TrimSpace(f.Token)
		*to.TokenSource = name + ".token"
	case f.TokenFile != "":
		p, err := l.resolvePath(f.TokenFile, cfg.Home)
		if err != nil {
			bad(name+".token_file", "%v", err)
		}
		*to.TokenFile = p
	}
	if f.APIURL != "" {
		u, err := validateAPIURL(f.APIURL)
		if err != nil {
			bad(name+".api_url", "%v", err)
		}
		*to.APIURL = u
	}
	*to.AllowGroups = f.AllowGroups
	switch f.Verbosity {
	case "":
	case "quiet", "normal", "verbose":
		*to.Verbosity = f.Verbosity
	default:
		bad(name+".verbosity", "must be quiet, normal or verbose")
	}
}

// sectionToken takes a platform's token from env, or else from the token
// file the section names; what it reads is added to secrets.
func (l Loader) sectionToken(name, env string, to sectionTo, secrets *[]string) error {
	if v := l.getenv(env); v != "" {
		*secrets = append(*secrets, v, strings.TrimSpace(v))
		*to.Token = strings.TrimSpace(v)
		*to.TokenSource = env
		return nil
	}
	if *to.TokenFile == "" {
		return nil
	}
	tok, err := readSecretFile(*to.TokenFile, name+".token_file", "token file", secrets)
	*to.Token = tok
	*to.TokenSource = name + ".token_file"
	return err
}

// sectionAPIURL applies env, the variable that overrides a platform's
// api_url.
func (l Loader) sectionAPIURL(env string, to sectionTo) error {
	v := l.getenv(env)
	if v == "" {
		return nil
	}
	u, err := validateAPIURL(v)
	if err != nil {
		return fmt.Errorf("%s: %w", env, err)
	}
	*to.APIURL = u
	return nil
}
