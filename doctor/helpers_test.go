package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/service"
	"github.com/latchd/latch/store"
)

// The secrets of the tests. Each is long enough to be scrubbed and
// distinct enough to be found in any output that leaks it.
const (
	botToken   = "123456:AAtestTOKENsecretPART0042"
	wrongToken = "123456:AAwrongTOKENsecretPART99"
	apiKey     = "sk-test-APIKEYsecretVALUE-0001"
	wrongKey   = "sk-test-WRONGkeySECRET-9999"
)

// epoch is the doctor's clock in tests.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a test's whole environment: nothing leaks in from the process.
type env map[string]string

func (e env) get(key string) string { return e[key] }

type fakeExit int

func (e fakeExit) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
func (e fakeExit) ExitCode() int { return int(e) }

// fakeSystem stands in for systemctl and loginctl: it records each command
// line and answers from out and code. With missing set, no systemd tool
// exists.
type fakeSystem struct {
	mu      sync.Mutex
	ran     []string
	out     map[string]string
	code    map[string]int
	missing bool
}

func (f *fakeSystem) run(_ context.Context, c service.Command) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, c.String())
	if f.missing {
		return fmt.Errorf("%s: %w", c.Name, service.ErrNoSystemd)
	}
	if c.Stdout != nil {
		io.WriteString(c.Stdout, f.out[c.String()])
	}
	if code, ok := f.code[c.String()]; ok {
		return fakeExit(code)
	}
	return nil
}

// fixture is a latch home made by latch init, with its own environment,
// service manager and unit directories.
type fixture struct {
	home     string
	env      env
	sys      *fakeSystem
	userUnit string
	sysUnit  string
}

func newFixture(t *testing.T, configTOML string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{
		home:     filepath.Join(dir, "home"),
		env:      env{"USER": "alice"},
		sys:      &fakeSystem{out: map[string]string{}, code: map[string]int{}},
		userUnit: filepath.Join(dir, "user", service.UnitName),
		sysUnit:  filepath.Join(dir, "system", service.UnitName),
	}
	if _, err := config.Init(f.home); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.home, config.ConfigFile), []byte(configTOML), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) doctor() *Doctor {
	return &Doctor{
		Home:   f.home,
		Getenv: f.env.get,
		Runner: f.sys.run,
		Now:    func() time.Time { return epoch },
		UnitPath: func(system bool) (string, error) {
			if system {
				return f.sysUnit, nil
			}
			return f.userUnit, nil
		},
	}
}

// run runs the doctor and checks what holds for every report (see
// assertNoSecrets).
func (f *fixture) run(t *testing.T) Report {
	t.Helper()
	rep := f.doctor().Run(t.Context())
	assertNoSecrets(t, rep)
	return rep
}

// createDB makes the database latch run would make.
func (f *fixture) createDB(t *testing.T) {
	t.Helper()
	db, err := store.Open(config.DBPath(f.home), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// installUnit puts a unit file where the system or the user unit goes and
// makes systemctl call it state.
func (f *fixture) installUnit(t *testing.T, system bool, state string) {
	t.Helper()
	path, cmd := f.userUnit, "systemctl --user is-enabled latch.service"
	if system {
		path, cmd = f.sysUnit, "systemctl is-enabled latch.service"
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("[Unit]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.sys.out[cmd] = state + "\n"
	if state != "enabled" {
		f.sys.code[cmd] = 1
	}
}

// writeUnit replaces the content of an installed unit file.
func writeUnit(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runWithUnit runs the doctor with latch.service installed and enabled,
// for a user who lingers, systemctl printing out as well, and the command
// fail, unless empty, failing.
func (f *fixture) runWithUnit(t *testing.T, system bool, out map[string]string, fail string) Report {
	t.Helper()
	f.installUnit(t, system, "enabled")
	f.sys.out["loginctl show-user alice -p Linger"] = "Linger=yes\n"
	for k, v := range out {
		f.sys.out[k] = v
	}
	if fail != "" {
		f.sys.code[fail] = 1
	}
	return f.run(t)
}

// tomlConfig is config.toml with the given settings; empty ones are left
// out.
func tomlConfig(settings ...string) string {
	var b strings.Builder
	section := ""
	for i := 0; i+1 < len(settings); i += 2 {
		key, val := settings[i], settings[i+1]
		if val == "" {
			continue
		}
		sec, name, _ := strings.Cut(key, ".")
		if sec != section {
			fmt.Fprintf(&b, "[%s]\n", sec)
			section = sec
		}
		fmt.Fprintf(&b, "%s = %q\n", name, val)
	}
	return b.String()
}

// check returns the check called name, failing the test if there is none.
func check(t *testing.T, rep Report, name string) Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, rep.Checks)
	return Check{}
}

// wantCheck fails the test unless the named check has status and its
// detail and fix contain the given pieces.
func wantCheck(t *testing.T, rep Report, name string, status Status, detail, fix []string) {
	t.Helper()
	c := check(t, rep, name)
	if c.Status != status {
		t.Errorf("%s: status %s (%q, fix %q), want %s", name, c.Status, c.Detail, c.Fix, status)
	}
	for _, s := range detail {
		if !strings.Contains(c.Detail, s) {
			t.Errorf("%s: detail %q does not contain %q", name, c.Detail, s)
		}
	}
	for _, s := range fix {
		if !strings.Contains(c.Fix, s) {
			t.Errorf("%s: fix %q does not contain %q", name, c.Fix, s)
		}
	}
	if (status == Fail) && c.Fix == "" {
		t.Errorf("%s: a failure without a fix: %q", name, c.Detail)
	}
}

// assertNoSecrets fails the test if any secret, or the secret part of a
// bot token, shows anywhere in the report. It also checks what holds for
// every report: one line per check, and a fix for every failure.
func assertNoSecrets(t *testing.T, rep Report) {
	t.Helper()
	for _, c := range rep.Checks {
		if strings.Contains(c.Detail+c.Fix, "\n") {
			t.Errorf("%s: more than one line: %q, fix %q", c.Name, c.Detail, c.Fix)
		}
		if c.Status == Fail && c.Fix == "" {
			t.Errorf("%s: a failure without a fix: %q", c.Name, c.Detail)
		}
	}
	out, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{botToken, wrongToken, apiKey, wrongKey} {
		_, after, _ := strings.Cut(s, ":")
		for _, piece := range []string{s, after} {
			if piece != "" && strings.Contains(string(out), piece) {
				t.Errorf("report shows the secret %q: %s", piece, out)
			}
		}
	}
}

var allChecks = []string{"home", "config", "secret", "database", "daemon", "workspace", "telegram", "webhook", "slack", "matrix", "model", "mcp", "service"}

func names(rep Report) []string {
	var out []string
	for _, c := range rep.Checks {
		out = append(out, c.Name)
	}
	return out
}

// openStore opens f's database read-write, as a running daemon holds it.
func openStore(t *testing.T, f *fixture) *store.DB {
	t.Helper()
	db, err := store.Open(config.DBPath(f.home), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func writeFile(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}
