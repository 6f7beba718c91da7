package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const discordToken = "MTA5ODc2NTQzMjEwOTg3NjU0.GhIjKl.discordSECRETvalue_x"

func loadDiscord(t *testing.T, body string, mode os.FileMode, env map[string]string) (*Config, error) {
	t.Helper()
	home := t.TempDir()
	if body != "" {
		if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(home, ConfigFile), mode)
	}
	return Loader{Getenv: func(k string) string { return env[k] }}.Load(home)
}

func TestDiscordConfig(t *testing.T) {
	cfg, err := loadDiscord(t, "[discord]\ntoken = \""+discordToken+"\"\nallow_groups = true\napi_url = \"http://127.0.0.1:9/\"\n", 0o600, nil)
	if err != nil || cfg.Discord.Token != discordToken || !cfg.Discord.AllowGroups || cfg.Discord.APIURL != "http://127.0.0.1:9" || !cfg.Discord.Enabled() {
		t.Fatalf("file: %+v, %v", cfg, err)
	}
	cfg, err = loadDiscord(t, "[discord]\ntoken = \"abc.def\"\n", 0o600, map[string]string{EnvDiscordToken: discordToken})
	if err != nil || cfg.Discord.Token != discordToken || cfg.Discord.TokenSource != EnvDiscordToken {
		t.Fatalf("env: %+v, %v", cfg, err)
	}
	if cfg, err := loadDiscord(t, "", 0o600, nil); err != nil || cfg.Discord.Enabled() || cfg.Discord.APIURL != DefaultDiscordAPIURL {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	if strings.Contains(cfg.Discord.String(), "SECRET") {
		t.Error("String shows the token")
	}
}

func TestDiscordConfigRefusals(t *testing.T) {
	tests := []struct {
		name string
		body string
		mode os.FileMode
		env  map[string]string
		want string
	}{
		{"readable file with a token", "[discord]\ntoken = \"" + discordToken + "\"\n", 0o644, nil, "chmod 600"},
		{"token and token_file", "[discord]\ntoken = \"a.b\"\ntoken_file = \"x\"\n", 0o600, nil, "both set"},
		{"bad character", "[discord]\ntoken = \"" + discordToken + "!\"\n", 0o600, nil, "never has"},
		{"bad env character", "", 0o600, map[string]string{EnvDiscordToken: discordToken + " x"}, "never has"},
		{"typo", "[discord]\nallow_group = true\n", 0o600, nil, "allow_group"},
		{"bad url", "[discord]\napi_url = \"ftp://x\"\n", 0o600, nil, "api_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadDiscord(t, tt.body, tt.mode, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("error shows the token: %v", err)
			}
			if tt.mode == 0o644 && !errors.Is(err, ErrInsecure) {
				t.Errorf("not ErrInsecure: %v", err)
			}
		})
	}
}
