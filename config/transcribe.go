package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Defaults of [transcribe].
const (
	DefaultTranscribeModel       = "whisper-1"
	DefaultTranscribeMaxMB       = 20
	DefaultTranscribeMaxDuration = 10 * time.Minute
	DefaultTranscribeTimeout     = 2 * time.Minute
)

// TranscribeConfig is [transcribe]: voice notes and audio files sent in
// the chat are transcribed through an OpenAI-compatible
// /audio/transcriptions endpoint. Off while BaseURL is empty.
type TranscribeConfig struct {
	BaseURL    string // up to and with /v1, without a trailing slash
	Model      string
	APIKey     string `json:"-"` // never serialised; see String and LogValue
	APIKeyFile string
	// MaxBytes and MaxDuration cap what is sent: a larger or (as the
	// platform announces it) longer file is saved but not transcribed.
	MaxBytes    int64
	MaxDuration time.Duration
	Timeout     time.Duration
}

// Enabled: a transcription endpoint is configured.
func (t TranscribeConfig) Enabled() bool { return t.BaseURL != "" }

// String describes t without the API key.
func (t TranscribeConfig) String() string {
	return fmt.Sprintf("{BaseURL:%q Model:%q APIKey:%s APIKeyFile:%q MaxBytes:%d MaxDuration:%v Timeout:%v}",
		t.BaseURL, t.Model, redactedToken(t.APIKey), t.APIKeyFile, t.MaxBytes, t.MaxDuration, t.Timeout)
}

// GoString is String for %#v.
func (t TranscribeConfig) GoString() string { return "config.TranscribeConfig" + t.String() }

// LogValue keeps the API key out of structured logs.
func (t TranscribeConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("base_url", t.BaseURL), slog.String("model", t.Model),
		slog.String("api_key", redactedToken(t.APIKey)), slog.String("api_key_file", t.APIKeyFile))
}

type fileTranscribe struct {
	BaseURL     string `toml:"base_url"`
	Model       string `toml:"model"`
	APIKey      string `toml:"api_key"`
	APIKeyFile  string `toml:"api_key_file"`
	MaxMB       *int64 `toml:"max_mb"`
	MaxDuration string `toml:"max_duration"`
	Timeout     string `toml:"timeout"`
}

var transcribeKeys = []string{"transcribe", "transcribe.base_url", "transcribe.model", "transcribe.api_key",
	"transcribe.api_key_file", "transcribe.max_mb", "transcribe.max_duration", "transcribe.timeout"}

func defaultTranscribe() TranscribeConfig {
	return TranscribeConfig{Model: DefaultTranscribeModel, MaxBytes: DefaultTranscribeMaxMB << 20,
		MaxDuration: DefaultTranscribeMaxDuration, Timeout: DefaultTranscribeTimeout}
}

// applyTranscribe checks and copies [transcribe]; the key file is read by
// readTranscribeKey, after the file as a whole was found sound.
func (l Loader) applyTranscribe(cfg *Config, f fileTranscribe, bad func(key, format string, args ...any)) {
	t := &cfg.Transcribe
	if f.BaseURL != "" {
		u, err := validateAPIURL(f.BaseURL)
		if err != nil {
			bad("transcribe.base_url", "%v", err)
		}
		t.BaseURL = u
	}
	if f.Model != "" {
		t.Model = f.Model
	}
	switch {
	case f.APIKey != "" && f.APIKeyFile != "":
		bad("transcribe.api_key", "api_key and api_key_file are both set; keep one")
	case f.APIKey != "":
		t.APIKey = strings.TrimSpace(f.APIKey)
		if err := checkAPIKey(t.APIKey); err != nil || t.APIKey == "" {
			bad("transcribe.api_key", "is not a valid API key (the value is not shown)")
		}
	case f.APIKeyFile != "":
		p, err := l.resolvePath(f.APIKeyFile, cfg.Home)
		if err != nil {
			bad("transcribe.api_key_file", "%v", err)
		}
		t.APIKeyFile = p
	}
	if f.MaxMB != nil {
		if *f.MaxMB < 1 || *f.MaxMB > 100 {
			bad("transcribe.max_mb", "must be between 1 and 100")
		} else {
			t.MaxBytes = *f.MaxMB << 20
		}
	}
	for _, d := range []struct {
		key, raw string
		dst      *time.Duration
	}{{"transcribe.max_duration", f.MaxDuration, &t.MaxDuration}, {"transcribe.timeout", f.Timeout, &t.Timeout}} {
		if d.raw == "" {
			continue
		}
		v, err := parseDuration(d.raw, time.Second, 24*time.Hour)
		if err != nil {
			bad(d.key, "%v", err)
			continue
		}
		*d.dst = v
	}
	if t.BaseURL == "" && (t.APIKey != "" || t.APIKeyFile != "") {
		bad("transcribe.base_url", "is required with an API key: say which endpoint the key is for")
	}
}

// readTranscribeKey reads transcribe.api_key_file, which only its owner
// may access.
func readTranscribeKey(cfg *Config, secrets *[]string) []error {
	t := &cfg.Transcribe
	if t.APIKeyFile == "" {
		return nil
	}
	key, err := readSecretFile(t.APIKeyFile, "transcribe.api_key_file", "API key file", secrets)
	if err == nil {
		err = checkAPIKey(key)
	}
	if err != nil {
		return []error{fmt.Errorf("transcribe.api_key_file %s: %w", t.APIKeyFile, err)}
	}
	t.APIKey = key
	return nil
}
