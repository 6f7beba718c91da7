package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestInitFresh(t *testing.T) {
	// Parents that do not exist are created too.
	home := filepath.Join(t.TempDir(), "a", "b", "latch")
	created, err := Init(home)
	checkErr(t, err, nil)

	want := []string{home, filepath.Join(home, "config.toml"), filepath.Join(home, "secret"), filepath.Join(home, "workspace")}
	if !slices.Equal(created, want) {
		t.Errorf("Init created %q, want %q", created, want)
	}
	modes := map[string]os.FileMode{want[0]: 0o700, want[1]: 0o600, want[2]: 0o600, want[3]: 0o700}
	for p, m := range modes {
		if got := mode(t, p); got != m {
			t.Errorf("%s has mode %04o, want %04o", p, got, m)
		}
	}
	if err := CheckHome(home); err != nil {
		t.Errorf("CheckHome after Init: %v", err)
	}
	// The template, every line of it a comment, so that the guides'
	// "append [telegram] and token = …" works on a fresh config.
	cfgText, err := os.ReadFile(want[1])
	if err != nil || !bytes.Equal(cfgText, template) {
		t.Errorf("config.toml is not the template (err %v):\n%s", err, cfgText)
	}
	if _, err := LoadSecret(home); err != nil {
		t.Errorf("LoadSecret after Init: %v", err)
	}
	cfg, err := testLoader(t, nil).Load(home)
	checkErr(t, err, nil)
	if cfg.Agent.Workspace != want[3] || cfg.Telegram.Enabled() || cfg.Telegram.WebhookSecret != "" {
		t.Errorf("Load after Init = %+v, want the defaults", cfg)
	}
}

// TestInitConfigTakesAppendedTables: appending a [telegram] and a [discord]
// table with their tokens to a fresh config.toml, as every guide says,
// used to fail with "Key 'telegram' has already been defined".
func TestInitConfigTakesAppendedTables(t *testing.T) {
	home := filepath.Join(t.TempDir(), "latch")
	_, err := Init(home)
	checkErr(t, err, nil)
	path := filepath.Join(home, "config.toml")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[telegram]\ntoken = %q\n\n[discord]\ntoken = %q\n\n[agent]\nbash_timeout = \"90s\"\n", testToken, discordToken)
	f.Close()
	cfg, err := testLoader(t, nil).Load(home)
	checkErr(t, err, nil)
	if cfg.Telegram.Token != testToken || cfg.Discord.Token != discordToken || cfg.Agent.BashTimeout != 90*time.Second {
		t.Errorf("appended settings loaded as %+v", cfg)
	}
}

// TestTemplateTellsTokensApart: the commented Telegram and Discord token
// lines say which is which, so a search for "token =" finds the right one.
func TestTemplateTellsTokensApart(t *testing.T) {
	var lines []string
	for l := range strings.Lines(string(template)) {
		if strings.HasPrefix(l, "# token = ") || strings.HasPrefix(l, "# token_file = ") {
			lines = append(lines, l)
		}
	}
	want := []string{"Telegram", "Telegram", "Discord", "Discord"}
	if len(lines) != len(want) {
		t.Fatalf("token lines %q, want 4", lines)
	}
	for i, l := range lines {
		if !strings.Contains(l, want[i]) {
			t.Errorf("token line %q does not say it is %s's", l, want[i])
		}
	}
}

func TestInitSecretsAreRandom(t *testing.T) {
	var keys [][]byte
	for range 2 {
		home := filepath.Join(t.TempDir(), "latch")
		if _, err := Init(home); err != nil {
			t.Fatal(err)
		}
		k, err := LoadSecret(home)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if bytes.Equal(keys[0], keys[1]) {
		t.Error("two Inits wrote the same secret")
	}
}

func TestInitNeverOverwrites(t *testing.T) {
	home := filepath.Join(t.TempDir(), "latch")
	if _, err := Init(home); err != nil {
		t.Fatal(err)
	}
	// The user edits everything, including modes Init would not choose.
	files := map[string]struct {
		content string
		mode    os.FileMode
	}{
		"config.toml": {"[agent]\nbash_timeout = \"5m\"\n", 0o400},
		"secret":      {"not a key", 0o640},
	}
	for name, f := range files {
		writeFile(t, filepath.Join(home, name), f.content, f.mode)
	}
	ws := filepath.Join(home, "workspace")
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}

	created, err := Init(home)
	checkErr(t, err, nil)
	if len(created) != 0 {
		t.Errorf("second Init created %q, want nothing", created)
	}
	for name, f := range files {
		p := filepath.Join(home, name)
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != f.content {
			t.Errorf("%s = %q after Init, want it unchanged: %q", name, got, f.content)
		}
		if m := mode(t, p); m != f.mode {
			t.Errorf("%s has mode %04o after Init, want it unchanged: %04o", name, m, f.mode)
		}
	}
	if m := mode(t, ws); m != 0o755 {
		t.Errorf("workspace has mode %04o after Init, want it unchanged: 0755", m)
	}
}

func TestInitCompletesPartialHome(t *testing.T) {
	home := newHome(t)
	cfgPath := filepath.Join(home, "config.toml")
	writeFile(t, cfgPath, "# mine\n", 0o600)
	created, err := Init(home)
	checkErr(t, err, nil)
	want := []string{filepath.Join(home, "secret"), filepath.Join(home, "workspace")}
	if !slices.Equal(created, want) {
		t.Errorf("Init created %q, want %q", created, want)
	}
	if got, _ := os.ReadFile(cfgPath); string(got) != "# mine\n" {
		t.Errorf("config.toml = %q, want it unchanged", got)
	}
}

// TestInitRefusesOpenHome checks that Init neither writes the key into a
// directory others can read nor changes the user's permissions.
func TestInitRefusesOpenHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "latch")
	mkdir(0o755)(t, home)
	created, err := Init(home)
	checkErr(t, err, []string{"mode 0755", "chmod 700 " + home})
	if !errors.Is(err, ErrInsecure) {
		t.Errorf("got %v, want an ErrInsecure", err)
	}
	if len(created) != 0 {
		t.Errorf("Init created %q in an open home", created)
	}
	entries, _ := os.ReadDir(home)
	if len(entries) != 0 {
		t.Errorf("Init left %d entries in an open home", len(entries))
	}
	if m := mode(t, home); m != 0o755 {
		t.Errorf("Init changed the home's mode to %04o; it must leave it to the user", m)
	}
}

func TestInitRefusesHomeOfAnotherUser(t *testing.T) {
	home := filepath.Join(t.TempDir(), "latch")
	mkdir(0o700)(t, home)
	chownOther(t, home)
	_, err := Init(home)
	checkErr(t, err, []string{"owned by uid 4242"})
	if _, serr := os.Lstat(filepath.Join(home, "secret")); serr == nil {
		t.Error("Init wrote a secret into another user's directory")
	}
}

func TestInitErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, home string)
		wantErr string
	}{
		{
			name:    "home is a file",
			setup:   func(t *testing.T, h string) { writeFile(t, h, "", 0o600) },
			wantErr: "exists and is not a directory",
		},
		{
			name: "workspace is a file",
			setup: func(t *testing.T, h string) {
				mkdir(0o700)(t, h)
				writeFile(t, filepath.Join(h, "workspace"), "", 0o600)
			},
			wantErr: "workspace exists and is not a directory",
		},
		{name: "empty home", wantErr: "no latch home directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := ""
			if tt.setup != nil {
				home = filepath.Join(t.TempDir(), "latch")
				tt.setup(t, home)
			}
			_, err := Init(home)
			checkErr(t, err, []string{tt.wantErr})
		})
	}
}

// TestInitDoesNotFollowSymlinks: a symlink where config.toml or secret
// belongs counts as existing; Init must not write through it.
func TestInitDoesNotFollowSymlinks(t *testing.T) {
	home := newHome(t)
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.Symlink(outside, filepath.Join(home, "secret")); err != nil {
		t.Fatal(err)
	}
	created, err := Init(home)
	checkErr(t, err, nil)
	if slices.Contains(created, filepath.Join(home, "secret")) {
		t.Errorf("Init reports creating the secret through a symlink")
	}
	if _, err := os.Lstat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Init wrote through the symlink to %s", outside)
	}
}

// TestFreshConfigHoldsNoSecret: init used to write a random webhook_secret
// into every config.toml, so one made readable (0644) was refused for a
// secret its owner never set. A fresh config holds none; one that does is
// refused naming it.
func TestFreshConfigHoldsNoSecret(t *testing.T) {
	home := filepath.Join(t.TempDir(), "latch")
	if _, err := Init(home); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, ConfigFile)
	os.Chmod(path, 0o644)
	if _, err := testLoader(t, nil).Load(home); err != nil {
		t.Errorf("a fresh config made 0644 does not load: %v", err)
	}
	os.Chmod(path, 0o600)
	if _, err := Set(home, "telegram.webhook_secret", testWebhookSecret); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	if _, err := testLoader(t, nil).Load(home); err == nil || !strings.Contains(err.Error(), "holds telegram.webhook_secret and is open") {
		t.Errorf("a 0644 config with a webhook secret: %v, want it refused naming the secret", err)
	}
}
