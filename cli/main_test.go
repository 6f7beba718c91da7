package cli

import (
	"bytes"
	"encoding/json"
	"github.com/latchd/latch/daemon"
	"github.com/latchd/latch/store"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// cli runs latch with args and returns stdout, stderr and the exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func testHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	t.Setenv("LATCH_HOME", home)
	t.Setenv("LATCH_TELEGRAM_TOKEN", "")
	t.Setenv("LATCH_TELEGRAM_API_URL", "")
	return home
}

func TestInitIsIdempotent(t *testing.T) {
	home := testHome(t)
	out, _, code := cli(t, "init")
	if code != 0 || !strings.Contains(out, "created") {
		t.Fatalf("init: %d %q", code, out)
	}
	for path, want := range map[string]os.FileMode{home: 0o700, filepath.Join(home, "config.toml"): 0o600, filepath.Join(home, "secret"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %o", path, fi.Mode().Perm(), err, want)
		}
	}
	cfg := filepath.Join(home, "config.toml")
	os.WriteFile(cfg, []byte("# mine\n"), 0o600)
	out, _, code = cli(t, "init")
	if b, _ := os.ReadFile(cfg); code != 0 || string(b) != "# mine\n" || !strings.Contains(out, "nothing changed") {
		t.Errorf("second init: %d %q, config now %q", code, out, b)
	}
}

func TestPairAndStatusWithoutDaemon(t *testing.T) {
	home := testHome(t)
	cli(t, "init")
	if _, errOut, code := cli(t, "pair", "telegram"); code == 0 || !strings.Contains(errOut, "not configured") {
		t.Errorf("pair without a token: %d %q", code, errOut)
	}
	t.Setenv("LATCH_TELEGRAM_TOKEN", "123456:TESTtokenVALUE")
	out, errOut, code := cli(t, "pair", "telegram", "--json", "--ttl", "5m")
	if code != 0 {
		t.Fatalf("pair: %d %s", code, errOut)
	}
	var res struct {
		Gateway, Code, Link string
		ExpiresAt           time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("pair --json output %q: %v", out, err)
	}
	if res.Gateway != "telegram" || !regexp.MustCompile(`^[A-Z2-9]{4}-[A-Z2-9]{4}$`).MatchString(res.Code) {
		t.Errorf("pair result = %+v", res)
	}
	if d := time.Until(res.ExpiresAt); d < 4*time.Minute || d > 5*time.Minute {
		t.Errorf("expires in %v, want about 5m", d)
	}
	out, _, code = cli(t, "pair", "telegram")
	if code != 0 || !strings.Contains(out, "/pair ") {
		t.Errorf("pair text: %d %q", code, out)
	}
	out, _, code = cli(t, "status")
	if code != exitNotRunner || !strings.Contains(out, "not running") || !strings.Contains(out, "pending") {
		t.Errorf("status: %d %q", code, out)
	}
	out, _, code = cli(t, "unpair", "telegram")
	if code != 0 || !strings.Contains(out, "was not paired") {
		t.Errorf("unpair: %d %q", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "latch.db")); bytes.Contains(b, []byte(strings.ReplaceAll(res.Code, "-", ""))) {
		t.Error("the plain code is in the database")
	}
}

func TestLooseConfigWithTokenRefused(t *testing.T) {
	home := testHome(t)
	cli(t, "init")
	cfg := filepath.Join(home, "config.toml")
	os.WriteFile(cfg, []byte("[telegram]\ntoken = \"123456:TESTtokenVALUE\"\n"), 0o600)
	os.Chmod(cfg, 0o644)
	_, errOut, code := cli(t, "run")
	if code != exitConfig || !strings.Contains(errOut, "chmod 600") || strings.Contains(errOut, "TESTtokenVALUE") {
		t.Errorf("run with a readable token file: %d %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := cli(t, "version")
	if code != 0 || !strings.HasPrefix(out, "latch ") {
		t.Errorf("version: %d %q", code, out)
	}
}

// TestVersionOfBuildInfo: a binary built without -ldflags used to say
// only "dev"; it names the module version and the revision it came from.
func TestVersionOfBuildInfo(t *testing.T) {
	tests := []struct {
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.2.3", nil, "v1.2.3"},
		{"(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: "250f1703a9c1d2e4f5a6b7c8d9e0f1a2b3c4d5e6"}, {Key: "vcs.modified", Value: "false"}}, "dev 250f1703a9c1"},
		{"(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: "250f1703a9c1d2e4"}, {Key: "vcs.modified", Value: "true"}}, "dev 250f1703a9c1+dirty"},
		{"v0.0.0-20261202011500-250f1703a9c1", nil, "v0.0.0-20261202011500-250f1703a9c1"},
		{"", nil, "dev"},
	}
	for _, tt := range tests {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tt.main}, Settings: tt.settings}
		if got := versionOf(bi); got != tt.want {
			t.Errorf("versionOf(%q, %v) = %q, want %q", tt.main, tt.settings, got, tt.want)
		}
	}
}

func TestLoggerUnderJournald(t *testing.T) {
	for _, journal := range []string{"", "8:1234"} {
		t.Setenv("JOURNAL_STREAM", journal)
		var buf bytes.Buffer
		secrets := &daemon.Secrets{}
		secrets.Add("123456:SECRETtoken")
		log, err := newLogger(&buf, "text", "info", secrets)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello", "token", "123456:SECRETtoken")
		out := buf.String()
		if hasTime := strings.Contains(out, "time="); hasTime != (journal == "") {
			t.Errorf("JOURNAL_STREAM=%q: %q", journal, out)
		}
		if strings.Contains(out, "SECRET") {
			t.Errorf("secret logged: %q", out)
		}
	}
}

// TestStatusWhileTheStoreIsHeld: while another latch process holds the
// database (a standalone `latch chat`, a daemon between closing its socket
// and exiting) status says the state is unknown; it used to say "latched:
// no", which invites the owner to mint a code.
func TestStatusWhileTheStoreIsHeld(t *testing.T) {
	home := testHome(t)
	cli(t, "init")
	t.Setenv("LATCH_TELEGRAM_TOKEN", "123456:TESTtokenVALUE")
	if _, errOut, code := cli(t, "pair", "telegram"); code != 0 {
		t.Fatalf("pair: %q", errOut)
	}
	db, err := store.Open(filepath.Join(home, "latch.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out, errOut, code := cli(t, "status")
	if code == 0 || strings.Contains(out, "latched: no") || !strings.Contains(errOut, "in use by another latch process") {
		t.Errorf("status while the store is held: %d %q %q", code, out, errOut)
	}
}

// TestRunSaysItCreatedTheHome: a first `latch run` sets up $LATCH_HOME; it
// used to do so without a word. A loose config stops it right after.
func TestRunSaysItCreatedTheHome(t *testing.T) {
	home := testHome(t)
	t.Setenv("LATCH_TELEGRAM_TOKEN", "bad token")
	_, errOut, code := cli(t, "run")
	if code == 0 || !strings.Contains(errOut, "created "+home+" ") || !strings.Contains(errOut, "created "+filepath.Join(home, "config.toml")) {
		t.Errorf("first run: %d %q; want it to name what it created", code, errOut)
	}
}

// TestWatchStops: the first signal stops gracefully, the second at once;
// a second Ctrl-C used to be ignored.
func TestWatchStops(t *testing.T) {
	sigs := make(chan os.Signal)
	ended := make(chan struct{})
	stopped := make(chan struct{})
	stopNow := make(chan struct{})
	var out watched
	done := make(chan struct{})
	go func() { watchStops(sigs, ended, func() { close(stopped) }, stopNow, &out); close(done) }()
	sigs <- os.Interrupt
	<-stopped
	select {
	case <-stopNow:
		t.Fatal("the first Ctrl-C stopped at once")
	default:
	}
	sigs <- os.Interrupt
	<-stopNow
	sigs <- os.Interrupt // a third changes nothing
	close(ended)
	<-done
	if s := out.String(); !strings.Contains(s, "press Ctrl-C again") || !strings.Contains(s, "stopping now") {
		t.Errorf("watchStops printed %q", s)
	}
}
