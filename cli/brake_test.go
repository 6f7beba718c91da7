package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

const brakeToken = "123456:BRAKEtokenVALUE"

// pairedHome is a home whose Telegram gateway, run by an in-process daemon
// against a fake Bot API, is latched to the owner's private chat.
func pairedHome(t *testing.T) (home string, stop func()) {
	t.Helper()
	home = testHome(t)
	if _, errOut, code := cli(t, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errOut)
	}
	tg := telegramtest.New(brakeToken)
	t.Cleanup(tg.Close)
	t.Setenv("LATCH_TELEGRAM_TOKEN", brakeToken)
	t.Setenv("LATCH_TELEGRAM_API_URL", tg.URL())
	stop = startDaemon(t, home)
	out, errOut, code := cli(t, "pair", "telegram", "--json")
	var res struct{ Code string }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Code == "" {
		t.Fatalf("pair: %d %q %q", code, out, errOut)
	}
	owner := telegramtest.User{ID: 4242, FirstName: "Owner"}
	tg.SendText(telegramtest.Private(owner), owner, "/pair "+res.Code)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tg.WaitSent(ctx, func(s telegramtest.Sent) bool { return strings.Contains(s.Text, "Paired") }); err != nil {
		t.Fatalf("no Paired message: %v", err)
	}
	return home, stop
}

// breakConfig writes a config.toml with a misspelt key, which config.Load
// refuses.
func breakConfig(t *testing.T, home string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[agent]\nmodle = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBrakeWorksWithABrokenConfig: a typo in config.toml must not disable
// the emergency brake. With a daemon running (it keeps the config it
// loaded), status, pair and unpair go through its socket; they used to exit
// 1 with the parse error.
func TestBrakeWorksWithABrokenConfig(t *testing.T) {
	home, _ := pairedHome(t)
	breakConfig(t, home)

	out, errOut, code := cli(t, "status")
	if code != 0 || !strings.Contains(out, "latched:  private") || !strings.Contains(out, "config.toml no longer loads") || !strings.Contains(out, "modle") {
		t.Errorf("status with a broken config: exit %d, stdout %q, stderr %q; want 0, the latch and the config error", code, out, errOut)
	}
	out, _, code = cli(t, "status", "--json")
	var st struct {
		Running     bool   `json:"running"`
		ConfigError string `json:"config_error"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || !st.Running || !strings.Contains(st.ConfigError, "modle") {
		t.Errorf("status --json with a broken config: exit %d, %q", code, out)
	}
	if out, errOut, code := cli(t, "pair", "telegram", "--replace", "--json"); code != 0 || !strings.Contains(out, `"code"`) {
		t.Errorf("pair through the daemon with a broken config: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := cli(t, "unpair", "telegram"); code != 0 || !strings.Contains(out, "telegram unpaired") {
		t.Errorf("unpair through the daemon with a broken config: exit %d, %q %q", code, out, errOut)
	}
	if out, _, _ := cli(t, "status"); !strings.Contains(out, "latched:  no") {
		t.Errorf("status after the unpair: %q", out)
	}
}

// TestOfflineBrakeWorksWithABrokenConfig: with no daemon (and none can
// start with this config), unpair removes the latch in the store and status
// reads it; pair refuses, naming the config's fault.
func TestOfflineBrakeWorksWithABrokenConfig(t *testing.T) {
	home, stop := pairedHome(t)
	stop()
	breakConfig(t, home)

	out, errOut, code := cli(t, "status")
	if code != exitNotRunner || !strings.Contains(out, "latched:  private") || !strings.Contains(out, "config.toml no longer loads") ||
		!strings.Contains(out, "gateway:  unknown: config.toml does not load") {
		t.Errorf("offline status with a broken config: exit %d, stdout %q, stderr %q; want %d, the latch and the config error", code, out, errOut, exitNotRunner)
	}
	if _, errOut, code := cli(t, "pair", "telegram"); code == 0 || !strings.Contains(errOut, "modle") {
		t.Errorf("offline pair with a broken config: exit %d, %q; want a failure naming the config's fault", code, errOut)
	}
	if out, errOut, code := cli(t, "unpair", "telegram"); code != 0 || !strings.Contains(out, "telegram unpaired") {
		t.Errorf("offline unpair with a broken config: exit %d, %q %q", code, out, errOut)
	}
	if out, _, _ := cli(t, "status"); strings.Contains(out, "latched:  private") {
		t.Errorf("status after the offline unpair still shows the latch: %q", out)
	}
}
