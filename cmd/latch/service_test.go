package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/service"
)

// fakeMachine stands in for systemctl, journalctl and loginctl: it records
// each command line and answers from out and code.
type fakeMachine struct {
	ran  []string
	out  map[string]string
	code map[string]int
}

type fakeExit int

func (e fakeExit) Error() string { return "exit status" }
func (e fakeExit) ExitCode() int { return int(e) }

func (f *fakeMachine) run(_ context.Context, c service.Command) error {
	f.ran = append(f.ran, c.String())
	io.WriteString(c.Stdout, f.out[c.String()])
	if code, ok := f.code[c.String()]; ok {
		return fakeExit(code)
	}
	return nil
}

// serviceCLI runs `latch <args>` with the service and logs commands wired to
// fake and a latch binary at exe.
func serviceCLI(t *testing.T, fake *fakeMachine, exe string, args ...string) (string, string, error) {
	t.Helper()
	deps := serviceDeps{run: fake.run, executable: func() (string, error) { return exe, nil }}
	root := newRoot()
	for _, c := range root.Commands() {
		if c.Name() == "service" || c.Name() == "logs" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newServiceCmdWith(deps), newLogsCmdWith(deps))
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// installedBinary is a latch binary outside any temporary directory.
const installedBinary = "/usr/local/bin/latch"

func serviceTestEnv(t *testing.T) (unitDir, home string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config")
	t.Setenv("XDG_CONFIG_HOME", cfg)
	home = filepath.Join(t.TempDir(), "latch home")
	t.Setenv("LATCH_HOME", home)
	t.Setenv("USER", "alice")
	return filepath.Join(cfg, "systemd", "user"), home
}

func TestServiceInstallUser(t *testing.T) {
	unitDir, home := serviceTestEnv(t)
	fake := &fakeMachine{out: map[string]string{"loginctl show-user alice -p Linger": "Linger=no\n"}}
	out, _, err := serviceCLI(t, fake, installedBinary, "service", "install", "--harden")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"systemctl --user daemon-reload", "systemctl --user enable --now latch.service", "loginctl show-user alice -p Linger"}
	if !slices.Equal(fake.ran, want) {
		t.Errorf("ran %q, want %q", fake.ran, want)
	}
	unit, err := os.ReadFile(filepath.Join(unitDir, "latch.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"ExecStart=/usr/local/bin/latch run", `Environment="LATCH_HOME=` + home + `"`, "NoNewPrivileges=yes"} {
		if !strings.Contains(string(unit), "\n"+line+"\n") {
			t.Errorf("unit lacks %q:\n%s", line, unit)
		}
	}
	for _, want := range []string{"wrote " + unitDir, "$ systemctl --user enable --now", "sudo loginctl enable-linger alice", "can no longer use sudo", "PrivateUsers=yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestServiceInstallPrintChangesNothing(t *testing.T) {
	unitDir, _ := serviceTestEnv(t)
	fake := &fakeMachine{}
	out, _, err := serviceCLI(t, fake, installedBinary, "service", "install", "--print")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "# latch.service") || !strings.Contains(out, "WantedBy=default.target") {
		t.Errorf("--print printed:\n%s", out)
	}
	if len(fake.ran) != 0 {
		t.Errorf("--print ran %q", fake.ran)
	}
	if _, err := os.Stat(unitDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--print created %s: %v", unitDir, err)
	}
}

func TestServiceInstallRefusesGoRun(t *testing.T) {
	serviceTestEnv(t)
	for _, exe := range []string{
		filepath.Join(os.TempDir(), "go-build1234/b001/exe/latch"),
		"/home/alice/.cache/go-build/2c/2c15f4-d/latch",
		filepath.Join(os.TempDir(), "latch"),
	} {
		fake := &fakeMachine{}
		_, _, err := serviceCLI(t, fake, exe, "service", "install")
		if err == nil || !strings.Contains(err.Error(), "go build") {
			t.Errorf("install from %s: %v, want a refusal that says to go build first", exe, err)
		}
		if len(fake.ran) != 0 {
			t.Errorf("install from %s ran %q", exe, fake.ran)
		}
		// --print still shows the unit, with a warning.
		out, errOut, err := serviceCLI(t, fake, exe, "service", "install", "--print")
		if err != nil || !strings.Contains(out, "ExecStart=") || !strings.Contains(errOut, "warning") {
			t.Errorf("--print from %s: %v, out %q, stderr %q", exe, err, out, errOut)
		}
	}
}

func TestServiceInstallUserFlagNeedsSystem(t *testing.T) {
	serviceTestEnv(t)
	fake := &fakeMachine{}
	if _, _, err := serviceCLI(t, fake, installedBinary, "service", "install", "--user", "bob", "--print"); err == nil || !strings.Contains(err.Error(), "--system") {
		t.Errorf("--user without --system: %v", err)
	}
	if _, _, err := serviceCLI(t, fake, installedBinary, "service", "install", "--system", "--print"); err == nil || !strings.Contains(err.Error(), "--user NAME") {
		t.Errorf("--system without --user: %v", err)
	}
}

func TestServiceInstallSystemPrint(t *testing.T) {
	serviceTestEnv(t)
	out, _, err := serviceCLI(t, &fakeMachine{}, installedBinary, "service", "install", "--system", "--user", "root", "--print")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nUser=root\n", "\nWantedBy=multi-user.target\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("system unit lacks %q:\n%s", want, out)
		}
	}
}

func TestServiceUninstall(t *testing.T) {
	unitDir, _ := serviceTestEnv(t)
	fake := &fakeMachine{}
	if _, _, err := serviceCLI(t, fake, installedBinary, "service", "uninstall"); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("uninstall with nothing installed: %v", err)
	}
	os.MkdirAll(unitDir, 0o755)
	os.WriteFile(filepath.Join(unitDir, "latch.service"), []byte("unit\n"), 0o644)
	out, _, err := serviceCLI(t, fake, installedBinary, "service", "uninstall")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"systemctl --user disable --now latch.service", "systemctl --user daemon-reload"}
	if !slices.Equal(fake.ran, want) || !strings.Contains(out, "removed") {
		t.Errorf("ran %q, printed %q; want %q", fake.ran, out, want)
	}
}

func TestServiceStatusAndLogsPassExitStatus(t *testing.T) {
	serviceTestEnv(t)
	tests := []struct {
		args []string
		cmd  string
	}{
		{[]string{"service", "status"}, "systemctl --user status latch.service"},
		{[]string{"service", "status", "--system"}, "systemctl status latch.service"},
		{[]string{"logs", "-f"}, "journalctl --user -u latch.service -f"},
		{[]string{"logs", "--system"}, "journalctl -u latch.service"},
	}
	for _, tt := range tests {
		fake := &fakeMachine{out: map[string]string{tt.cmd: "some output\n"}, code: map[string]int{tt.cmd: 3}}
		out, _, err := serviceCLI(t, fake, installedBinary, tt.args...)
		var ce *codeError
		if !errors.As(err, &ce) || ce.code != 3 || ce.err != nil {
			t.Errorf("latch %s: %v, want exit status 3 and no message of its own", strings.Join(tt.args, " "), err)
		}
		if !slices.Equal(fake.ran, []string{tt.cmd}) || out != "some output\n" {
			t.Errorf("latch %s ran %q, printed %q; want %q and its output", strings.Join(tt.args, " "), fake.ran, out, tt.cmd)
		}
	}
}
