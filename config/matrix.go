package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Matrix settings and their environment overrides.
const (
	// EnvMatrixToken supplies the Matrix access token; it wins over
	// matrix.access_token and matrix.access_token_file.
	EnvMatrixToken = "LATCH_MATRIX_TOKEN"
	// EnvMatrixHomeserver overrides matrix.homeserver.
	EnvMatrixHomeserver = "LATCH_MATRIX_HOMESERVER"
)

// MatrixConfig configures the Matrix gateway (one account on a
// homeserver, end-to-end encrypted where rooms are).
type MatrixConfig struct {
	Homeserver  string // the client-server API's base, without a trailing slash
	UserID      string // @bot:example.org
	Token       string `json:"-"` // the access token
	TokenFile   string // absolute path of matrix.access_token_file, or ""
	TokenSource string // EnvMatrixToken, "matrix.access_token" or "matrix.access_token_file"; "" if unset
	DeviceID    string // the device the token belongs to; "" takes whoami's
	AllowGroups bool   // rooms that are not DMs may be joined and latched
	Verbosity   string // tool progress in the chat: quiet, normal (default) or verbose
}

type fileMatrix struct {
	Homeserver      string `toml:"homeserver"`
	UserID          string `toml:"user_id"`
	AccessToken     string `toml:"access_token"`
	AccessTokenFile string `toml:"access_token_file"`
	DeviceID        string `toml:"device_id"`
	AllowGroups     bool   `toml:"allow_groups"`
	Verbosity       string `toml:"verbosity"`
}

// Enabled reports whether an access token is set.
func (m MatrixConfig) Enabled() bool { return m.Token != "" }

// String describes m without the token.
func (m MatrixConfig) String() string {
	return fmt.Sprintf("{Homeserver:%q UserID:%q Token:%s TokenSource:%q DeviceID:%q AllowGroups:%t}",
		m.Homeserver, m.UserID, redactedToken(m.Token), m.TokenSource, m.DeviceID, m.AllowGroups)
}

// GoString is String for %#v.
func (m MatrixConfig) GoString() string { return "config.MatrixConfig" + m.String() }

// LogValue keeps the token out of structured logs.
func (m MatrixConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("homeserver", m.Homeserver), slog.String("user_id", m.UserID),
		slog.String("access_token", redactedToken(m.Token)), slog.String("device_id", m.DeviceID),
		slog.Bool("allow_groups", m.AllowGroups))
}

// MatrixPlatform is Matrix's row of [Platforms]. Its api_url is the
// homeserver.
var MatrixPlatform = Platform{
	Name: "matrix", Title: "Matrix", APIName: "the Matrix homeserver",
	TokenEnv: EnvMatrixToken, APIURLEnv: EnvMatrixHomeserver,
	Secrets: []PlatformSecret{
		{Key: "access_token", Env: EnvMatrixToken, What: "the Matrix access token", FileKey: "[matrix] access_token_file",
			file:  func(fc *fileConfig) string { return fc.Matrix.AccessToken },
			value: func(c *Config) string { return c.Matrix.Token }},
	},
	Settings: func(c *Config) PlatformSettings {
		m := c.Matrix
		return PlatformSettings{m.Token, m.TokenFile, m.TokenSource, m.Homeserver, m.AllowGroups, m.Verbosity}
	},
	defaults:  func(c *Config) { c.Matrix = MatrixConfig{Verbosity: "normal"} },
	applyFile: func(l Loader, c *Config, fc *fileConfig) []error { return l.applyMatrixFile(c, fc.Matrix) },
	applyEnv:  Loader.applyMatrixEnv,
}

// applyMatrixFile copies [matrix] into cfg.
func (l Loader) applyMatrixFile(cfg *Config, m fileMatrix) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", cfg.Path, key, fmt.Sprintf(format, args...)))
	}
	// The shared section's "api_url" is the homeserver here.
	to := cfg.Matrix.fields()
	l.applySection(cfg, "matrix", sectionFile{m.AccessToken, m.AccessTokenFile, m.Homeserver, m.AllowGroups, m.Verbosity}, to,
		func(key, format string, args ...any) {
			key = strings.NewReplacer("matrix.token_file", "matrix.access_token_file", "matrix.token", "matrix.access_token",
				"matrix.api_url", "matrix.homeserver").Replace(key)
			format = strings.ReplaceAll(format, "token and token_file", "access_token and access_token_file")
			bad(key, format, args...)
		})
	if *to.TokenSource == "matrix.token" {
		*to.TokenSource = "matrix.access_token"
	}
	if m.UserID != "" {
		if err := checkMatrixUserID(m.UserID); err != nil {
			bad("matrix.user_id", "%v", err)
		}
		cfg.Matrix.UserID = m.UserID
	}
	if m.DeviceID != "" {
		if strings.ContainsAny(m.DeviceID, "/?#% \t\n") {
			bad("matrix.device_id", "has a character a device ID never has")
		}
		cfg.Matrix.DeviceID = m.DeviceID
	}
	return errs
}

// applyMatrixEnv applies LATCH_MATRIX_*, reads the token file and checks
// what a running gateway needs.
func (l Loader) applyMatrixEnv(cfg *Config, secrets *[]string) []error {
	var errs []error
	to := cfg.Matrix.fields()
	if err := l.sectionToken("matrix", EnvMatrixToken, to, secrets); err != nil {
		errs = append(errs, err)
	}
	if *to.TokenSource == "matrix.token_file" {
		*to.TokenSource = "matrix.access_token_file"
	}
	if err := checkMatrixToken(cfg.Matrix.Token); err != nil {
		errs = append(errs, fmt.Errorf("matrix access token (%s): %w", cfg.Matrix.TokenSource, err))
	}
	if err := l.sectionAPIURL(EnvMatrixHomeserver, to); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkMatrixUserID wants "@localpart:server".
func checkMatrixUserID(s string) error {
	local, server, ok := strings.Cut(strings.TrimPrefix(s, "@"), ":")
	if !strings.HasPrefix(s, "@") || !ok || local == "" || server == "" || strings.ContainsAny(s, " \t\n/?#") {
		return fmt.Errorf("%q is not a Matrix user ID (@name:server)", s)
	}
	return nil
}

// checkMatrixToken refuses characters an access token never has (it goes
// into an Authorization header). The token is never shown.
func checkMatrixToken(tok string) error {
	for _, r := range tok {
		if r <= ' ' || r > '~' {
			return errors.New("has a character an access token never has; the value is not shown")
		}
	}
	return nil
}

func (m *MatrixConfig) fields() sectionTo {
	return sectionTo{&m.Token, &m.TokenSource, &m.TokenFile, &m.Homeserver, &m.Verbosity, &m.AllowGroups}
}
