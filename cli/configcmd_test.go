package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigSet(t *testing.T) {
	home := testHome(t)
	const tok = "123456:CONFIGsetTOKEN"
	out, errOut, code := cli(t, "config", "set", "telegram.token", tok)
	if code != 0 || !strings.Contains(out, "set telegram.token = (not shown)") || strings.Contains(out+errOut, "CONFIGset") {
		t.Fatalf("config set: %d %q %q", code, out, errOut)
	}
	if out, errOut, code := cli(t, "config", "set", "telegram.webhook_url", "https://bot.example.org/hook"); code != 0 || !strings.Contains(out, "webhook_secret") {
		t.Errorf("config set webhook_url: %d %q %q", code, out, errOut)
	}
	path := filepath.Join(home, "config.toml")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config.toml after set: %v %v", fi, err)
	}
	cfg, err := loadHome()
	if err != nil || cfg.err != nil || cfg.cfg.Telegram.Token != tok || cfg.cfg.Telegram.WebhookSecret == "" {
		t.Errorf("config after set: %+v %v", cfg, err)
	}
	if _, errOut, code := cli(t, "config", "set", "telegram.tokn", "x"); code != exitConfig || !strings.Contains(errOut, "not a setting") {
		t.Errorf("config set of an unknown key: %d %q", code, errOut)
	}
	if out, _, code := cli(t, "config", "keys"); code != 0 || !strings.Contains(out, "discord.token_file\n") {
		t.Errorf("config keys: %d %q", code, out)
	}
}
