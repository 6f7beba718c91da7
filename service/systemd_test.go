package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeSystemd records the commands a Manager runs instead of running them.
// out maps a command line to what it prints; fail maps one to its exit
// status.
type fakeSystemd struct {
	ran  []string
	out  map[string]string
	fail map[string]int
}

type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitError) ExitCode() int { return int(e) }

func (f *fakeSystemd) run(_ context.Context, c Command) error {
	line := c.String()
	f.ran = append(f.ran, line)
	if c.Stdout == nil || c.Stderr == nil {
		return errors.New("runner got a nil writer")
	}
	io.WriteString(c.Stdout, f.out[line])
	if code, ok := f.fail[line]; ok {
		return fmt.Errorf("%s: %w", line, exitError(code))
	}
	return nil
}

// newFake is a systemd where latch.service is not running.
func newFake() *fakeSystemd {
	return &fakeSystemd{out: map[string]string{}, fail: map[string]int{
		"systemctl --user is-active --quiet latch.service": 3,
		"systemctl is-active --quiet latch.service":        3,
	}}
}

func TestInstallUser(t *testing.T) {
	f := newFake()
	f.out["loginctl show-user alice -p Linger"] = "Linger=no\n"
	path := filepath.Join(t.TempDir(), "config", "systemd", "user", UnitName)
	var trace strings.Builder
	m := &Manager{Path: path, Run: f.run, Trace: &trace, User: "alice"}

	res, err := m.Install(t.Context(), "unit v1\n", InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertRan(t, f, "systemctl --user daemon-reload", "systemctl --user is-active --quiet latch.service",
		"systemctl --user enable --now latch.service", "loginctl show-user alice -p Linger")
	if !res.Written || res.Replaced || !res.Started || res.Restarted {
		t.Errorf("result %+v, want written and started, not replaced", res)
	}
	if !strings.Contains(res.LingerHint, "sudo loginctl enable-linger alice") {
		t.Errorf("linger hint %q, want the enable-linger command", res.LingerHint)
	}
	assertFile(t, path, "unit v1\n", 0o644)
	if want := "wrote " + path + "\n$ systemctl --user daemon-reload\n$ systemctl --user enable --now latch.service\n"; trace.String() != want {
		t.Errorf("trace %q, want %q", trace.String(), want)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("unit directory holds %d entries, want only the unit (no temporary file left)", len(entries))
	}
}

func TestInstallReplacesAndRestarts(t *testing.T) {
	f := newFake()
	f.out["loginctl show-user alice -p Linger"] = "Linger=yes\n"
	path := filepath.Join(t.TempDir(), UnitName)
	os.WriteFile(path, []byte("unit v1\n"), 0o600)
	m := &Manager{Path: path, Run: f.run, User: "alice"}

	res, err := m.Install(t.Context(), "unit v2\n", InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// enable --now would leave the running latch on the old unit.
	assertRan(t, f, "systemctl --user daemon-reload", "systemctl --user is-active --quiet latch.service",
		"systemctl --user enable latch.service", "systemctl --user restart latch.service", "loginctl show-user alice -p Linger")
	if !res.Replaced || res.LingerHint != "" {
		t.Errorf("result %+v, want replaced and no linger hint", res)
	}
	assertFile(t, path, "unit v2\n", 0o644)

	f.ran = nil
	res, err = m.Install(t.Context(), "unit v2\n", InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Written || res.Replaced || res.Restarted {
		t.Errorf("same unit again, not running: result %+v, want nothing written and no restart", res)
	}
	assertRan(t, f, "systemctl --user daemon-reload", "systemctl --user is-active --quiet latch.service",
		"systemctl --user enable --now latch.service", "loginctl show-user alice -p Linger")
}

// TestInstallSameUnitRestartsRunningService: an upgrade puts a new binary
// at the path the unit names, so the unit is the same; the running latch
// must be restarted for the new binary to run (enable --now alone leaves
// the old one).
func TestInstallSameUnitRestartsRunningService(t *testing.T) {
	for _, system := range []bool{false, true} {
		t.Run(fmt.Sprint("system=", system), func(t *testing.T) {
			f := newFake()
			scope := "--user "
			if system {
				scope = ""
			}
			delete(f.fail, "systemctl "+scope+"is-active --quiet latch.service") // running
			f.out["loginctl show-user alice -p Linger"] = "Linger=yes\n"
			path := filepath.Join(t.TempDir(), UnitName)
			os.WriteFile(path, []byte("unit\n"), 0o644)
			m := &Manager{System: system, Path: path, Run: f.run, User: "alice"}
			res, err := m.Install(t.Context(), "unit\n", InstallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"systemctl " + scope + "daemon-reload", "systemctl " + scope + "is-active --quiet latch.service",
				"systemctl " + scope + "enable latch.service", "systemctl " + scope + "restart latch.service"}
			if !system {
				want = append(want, "loginctl show-user alice -p Linger")
			}
			assertRan(t, f, want...)
			if res.Written || !res.Started || !res.Restarted {
				t.Errorf("result %+v, want not written, started and restarted", res)
			}
		})
	}
}

func TestInstallSystemNoStart(t *testing.T) {
	f := newFake()
	path := filepath.Join(t.TempDir(), UnitName)
	m := &Manager{System: true, Path: path, Run: f.run}
	res, err := m.Install(t.Context(), "unit\n", InstallOptions{NoStart: true})
	if err != nil {
		t.Fatal(err)
	}
	// No --user, no enable, and no linger check: the system manager does
	// not stop at logout.
	assertRan(t, f, "systemctl daemon-reload")
	if res.Started || res.LingerHint != "" {
		t.Errorf("result %+v, want not started, no hint", res)
	}
}

func TestInstallReportsFailure(t *testing.T) {
	f := newFake()
	f.fail["systemctl --user enable --now latch.service"] = 1
	f.fail["loginctl show-user alice -p Linger"] = 1
	m := &Manager{Path: filepath.Join(t.TempDir(), UnitName), Run: f.run, User: "alice"}
	res, err := m.Install(t.Context(), "unit\n", InstallOptions{})
	if code, ok := ExitCode(err); !ok || code != 1 {
		t.Errorf("Install error %v (exit %d, %v), want systemctl's exit status 1", err, code, ok)
	}
	if res == nil || !res.Written || res.Started {
		t.Errorf("result %+v, want the unit written but not started", res)
	}
}

func TestLingerHintNeedsLingerNo(t *testing.T) {
	for _, tt := range []struct {
		out  string
		fail bool
		want bool
	}{
		{"Linger=no\n", false, true},
		{"Linger=yes\n", false, false},
		{"", true, false}, // loginctl cannot tell: say nothing rather than guess
	} {
		f := newFake()
		f.out["loginctl show-user bob -p Linger"] = tt.out
		if tt.fail {
			f.fail["loginctl show-user bob -p Linger"] = 1
		}
		m := &Manager{Run: f.run, User: "bob"}
		if got := m.lingerHint(t.Context()) != ""; got != tt.want {
			t.Errorf("loginctl printing %q (failing: %v): hint %v, want %v", tt.out, tt.fail, got, tt.want)
		}
	}
}

func TestLingerHintUsesUSER(t *testing.T) {
	t.Setenv("USER", "carol")
	f := newFake()
	f.out["loginctl show-user carol -p Linger"] = "Linger=no\n"
	m := &Manager{Run: f.run}
	if hint := m.lingerHint(t.Context()); !strings.Contains(hint, "enable-linger carol") {
		t.Errorf("hint %q, want it for $USER carol; ran %q", hint, f.ran)
	}
}

func TestUninstall(t *testing.T) {
	for _, system := range []bool{false, true} {
		t.Run(fmt.Sprint("system=", system), func(t *testing.T) {
			f := newFake()
			path := filepath.Join(t.TempDir(), UnitName)
			os.WriteFile(path, []byte("unit\n"), 0o644)
			m := &Manager{System: system, Path: path, Run: f.run}
			if err := m.Uninstall(t.Context()); err != nil {
				t.Fatal(err)
			}
			scope := "--user "
			if system {
				scope = ""
			}
			assertRan(t, f, "systemctl "+scope+"disable --now latch.service", "systemctl "+scope+"daemon-reload")
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("unit file still there: %v", err)
			}
		})
	}
}

func TestUninstallNotInstalled(t *testing.T) {
	f := newFake()
	m := &Manager{Path: filepath.Join(t.TempDir(), UnitName), Run: f.run}
	if err := m.Uninstall(t.Context()); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Uninstall without a unit: %v, want ErrNotInstalled", err)
	}
	assertRan(t, f)
}

func TestUninstallKeepsUnitWhenDisableFails(t *testing.T) {
	f := newFake()
	f.fail["systemctl --user disable --now latch.service"] = 1
	path := filepath.Join(t.TempDir(), UnitName)
	os.WriteFile(path, []byte("unit\n"), 0o644)
	m := &Manager{Path: path, Run: f.run}
	if err := m.Uninstall(t.Context()); err == nil {
		t.Fatal("Uninstall succeeded although disable failed")
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("unit removed although latch may still run: %v", err)
	}
}

func TestStatusAndLogs(t *testing.T) {
	tests := []struct {
		name   string
		system bool
		call   func(*Manager, context.Context) error
		want   string
	}{
		{"status user", false, (*Manager).Status, "systemctl --user status latch.service"},
		{"status system", true, (*Manager).Status, "systemctl status latch.service"},
		{"logs user", false, func(m *Manager, ctx context.Context) error { return m.Logs(ctx, false) }, "journalctl --user -u latch.service"},
		{"logs -f system", true, func(m *Manager, ctx context.Context) error { return m.Logs(ctx, true) }, "journalctl -u latch.service -f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.out[tt.want] = "output of " + tt.want
			f.fail[tt.want] = 3
			var out strings.Builder
			m := &Manager{System: tt.system, Run: f.run, Stdout: &out}
			err := tt.call(m, t.Context())
			assertRan(t, f, tt.want)
			if code, ok := ExitCode(err); !ok || code != 3 {
				t.Errorf("error %v, want exit status 3 passed through", err)
			}
			if out.String() != "output of "+tt.want {
				t.Errorf("stdout %q, want the command's output", out.String())
			}
		})
	}
}

func TestUnitPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct {
		xdg    string
		system bool
		want   string
	}{
		{"", false, filepath.Join(home, ".config/systemd/user/latch.service")},
		{"/xdg", false, "/xdg/systemd/user/latch.service"},
		{"relative/xdg", false, filepath.Join(home, ".config/systemd/user/latch.service")},
		{"/xdg", true, "/etc/systemd/system/latch.service"},
	}
	for _, tt := range tests {
		t.Setenv("XDG_CONFIG_HOME", tt.xdg)
		got, err := UnitPath(tt.system)
		if err != nil || got != tt.want {
			t.Errorf("UnitPath(%v) with XDG_CONFIG_HOME=%q = %q, %v; want %q", tt.system, tt.xdg, got, err, tt.want)
		}
	}
}

func TestExecReportsMissingSystemd(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := Exec(t.Context(), Command{Name: "systemctl", Args: []string{"status"}})
	if !errors.Is(err, ErrNoSystemd) {
		t.Errorf("Exec without systemctl on $PATH: %v, want ErrNoSystemd", err)
	}
}

func TestExecPassesExitCode(t *testing.T) {
	err := Exec(t.Context(), Command{Name: "/bin/sh", Args: []string{"-c", "exit 3"}})
	if code, ok := ExitCode(err); !ok || code != 3 {
		t.Errorf("Exec(exit 3) = %v; ExitCode = %d, %v", err, code, ok)
	}
	if _, ok := ExitCode(nil); ok {
		t.Error("ExitCode(nil) reported an exit status")
	}
}

func assertRan(t *testing.T, f *fakeSystemd, want ...string) {
	t.Helper()
	if !slices.Equal(f.ran, want) {
		t.Errorf("ran\n  %q\nwant\n  %q", f.ran, want)
	}
}

func assertFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if string(b) != content || fi.Mode().Perm() != mode {
		t.Errorf("%s: %q mode %o, want %q mode %o", path, b, fi.Mode().Perm(), content, mode)
	}
}
