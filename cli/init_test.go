package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/config"
)

func TestInitAddsMissingWebhookSecret(t *testing.T) {
	home := testHome(t)
	cli(t, "init")
	cfg := filepath.Join(home, "config.toml")
	// An older config.toml, or one the user wrote: webhook_url, no secret.
	before := "[telegram]\nwebhook_url = \"https://bot.example.org/tg\"\n"
	if err := os.WriteFile(cfg, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(home); err == nil || !strings.Contains(err.Error(), "latch init") {
		t.Fatalf("Load without a secret = %v, want an error pointing at latch init", err)
	}
	out, errOut, code := cli(t, "init")
	if code != 0 || !strings.Contains(out, "added a random [telegram] webhook_secret") {
		t.Fatalf("init: %d %q %q", code, out, errOut)
	}
	c, err := config.Load(home)
	if err != nil || len(c.Telegram.WebhookSecret) != 43 {
		t.Fatalf("Load after init: %v", err)
	}
	if strings.Contains(out+errOut, c.Telegram.WebhookSecret) {
		t.Error("init printed the secret")
	}
	// Nothing more to do the second time.
	out, _, code = cli(t, "init")
	if code != 0 || !strings.Contains(out, "nothing changed") {
		t.Errorf("second init: %d %q", code, out)
	}
}

func TestInitRefusesToAddSecretToOpenConfig(t *testing.T) {
	home := testHome(t)
	cli(t, "init")
	cfg := filepath.Join(home, "config.toml")
	before := "[telegram]\nwebhook_url = \"https://bot.example.org/tg\"\n"
	if err := os.WriteFile(cfg, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(cfg, 0o644)
	_, errOut, code := cli(t, "init")
	if code == 0 || !strings.Contains(errOut, "chmod 600") {
		t.Errorf("init with a readable config: %d %q", code, errOut)
	}
	if b, _ := os.ReadFile(cfg); string(b) != before {
		t.Errorf("config.toml changed to %q", b)
	}
}
