package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	home := filepath.Join(t.TempDir(), "latch")
	if _, err := Init(home); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, ConfigFile)
	for _, kv := range [][2]string{
		{"telegram.token", "123456789:AAfirstTOKENvalue"},
		{"telegram.token", testToken}, // replaces the line it wrote
		{"telegram.allow_groups", "true"},
		{"agent.max_steps", "7"},
		{"agent.bash_timeout", "90s"},
		{"agent.permissions.bash", "allow"},
		{"agent.fetch.allow", "192.168.1.0/24, 10.0.0.5"},
		{"discord.token", discordToken},
	} {
		if _, err := Set(home, kv[0], kv[1]); err != nil {
			t.Fatalf("Set(%s): %v", kv[0], err)
		}
	}
	cfg, err := testLoader(t, nil).Load(home)
	checkErr(t, err, nil)
	if cfg.Telegram.Token != testToken || !cfg.Telegram.AllowGroups || cfg.Agent.MaxSteps != 7 ||
		cfg.Agent.BashTimeout != 90*time.Second || cfg.Agent.Permissions["bash"] != "allow" ||
		fmt.Sprint(cfg.Agent.FetchAllow) != "[192.168.1.0/24 10.0.0.5/32]" || cfg.Discord.Token != discordToken {
		t.Errorf("after Set, Load = %+v", cfg)
	}
	if got := mode(t, path); got != 0o600 {
		t.Errorf("config.toml has mode %04o after Set, want 0600", got)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), string(template)) || strings.Count(string(data), "\ntoken = ") != 2 {
		t.Errorf("Set did not keep the template and one token line per gateway:\n%s", data[len(template):])
	}
}

func TestSetRefuses(t *testing.T) {
	home := filepath.Join(t.TempDir(), "latch")
	if _, err := Init(home); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, ConfigFile)
	before, _ := os.ReadFile(path)
	tests := []struct {
		key, value string
		want       string
	}{
		{"telegram.tokn", "x", "not a setting"},
		{"telegram", "x", "not a setting"},
		{"agent.permissions", "x", "not a setting"},
		{"agent.max_steps", "many", "not a whole number"},
		{"telegram.allow_groups", "yes please", "not true or false"},
		{"agent.bash_timeout", "forever", "is unchanged"},
		{"telegram.token", "123456789:AAsecretWITH/slash", "is unchanged"},
	}
	for _, tt := range tests {
		_, err := Set(home, tt.key, tt.value)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Set(%s, %q) = %v, want an error saying %q", tt.key, tt.value, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "AAsecretWITH") {
			t.Errorf("Set's error repeats the token: %v", err)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused Set changed config.toml:\n%s", after)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(home, ".config-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %q", leftovers)
	}

	// A file others can read is not given a secret.
	os.Chmod(path, 0o644)
	if _, err := Set(home, "telegram.token", testToken); !errors.Is(err, ErrInsecure) {
		t.Errorf("Set on a 0644 config = %v, want ErrInsecure", err)
	}
}

// TestSetWhereTheLineCannotGo: a "[telegram]" line inside a multi-line
// string is no header; a line put under it would land in the string. Set
// says so and changes nothing.
func TestSetWhereTheLineCannotGo(t *testing.T) {
	home := newHome(t)
	path := filepath.Join(home, ConfigFile)
	const text = "[agent]\nmodel = \"\"\"\n[telegram]\n\"\"\"\n"
	writeFile(t, path, text, 0o600)
	if _, err := Set(home, "telegram.token", testToken); err == nil || !strings.Contains(err.Error(), "edit the file by hand") {
		t.Errorf("Set = %v, want it to give up", err)
	}
	if data, _ := os.ReadFile(path); string(data) != text {
		t.Errorf("config.toml changed: %q", data)
	}
}

func TestSetShutdownGrace(t *testing.T) {
	home := newHome(t)
	if _, err := Set(home, "agent.shutdown_grace", "5s"); err != nil {
		t.Fatal(err)
	}
	cfg, err := testLoader(t, nil).Load(home)
	if err != nil || cfg.Agent.ShutdownGrace != 5*time.Second {
		t.Errorf("shutdown_grace 5s loads as %v, %v", cfg, err)
	}
	if _, err := Set(home, "agent.shutdown_grace", "1h"); err == nil || !strings.Contains(err.Error(), "longer than the maximum") {
		t.Errorf("shutdown_grace 1h: %v, want it refused", err)
	}
}

func TestSettings(t *testing.T) {
	keys := Settings()
	for _, k := range []string{"telegram.token", "discord.api_url", "agent.fetch.allow", "agent.permissions.bash"} {
		if !strings.Contains(strings.Join(keys, " "), k) {
			t.Errorf("Settings() lacks %s", k)
		}
	}
	for _, k := range keys {
		if k == "telegram" || k == "agent.permissions" {
			t.Errorf("Settings() lists the table %s", k)
		}
	}
}

// TestEverySecretKeyIsKnown: a key of config.toml whose name says it holds
// a secret is one [Secret] reports (and so `latch config` never shows) and,
// in a platform's section, one of the platform table's secrets (and so
// every scrubber knows it).
func TestEverySecretKeyIsKnown(t *testing.T) {
	held := map[string]bool{}
	for _, p := range Platforms {
		for _, s := range p.Secrets {
			held[p.Name+"."+s.Key] = true
		}
	}
	for _, key := range schemaKeys {
		section, name, _ := strings.Cut(key, ".")
		if !(name == "token" || strings.HasSuffix(name, "_secret") || name == "api_key") || strings.HasPrefix(key, "mcp.") {
			continue
		}
		if _, ok := PlatformNamed(section); ok && !held[key] {
			t.Errorf("%s is not among the secrets of the %s row of Platforms", key, section)
		}
		if !Secret(key) {
			t.Errorf("Secret(%q) = false", key)
		}
	}
}
