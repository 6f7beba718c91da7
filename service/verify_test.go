package service

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requireAnalyzeEnv, set to 1 (as CI does), turns a missing
// systemd-analyze into a failure instead of a skip.
const requireAnalyzeEnv = "LATCH_REQUIRE_SYSTEMD_ANALYZE"

// systemdAnalyze returns the path of systemd-analyze or skips the test.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv(requireAnalyzeEnv) == "1" {
			t.Fatalf("systemd-analyze not installed but %s=1: %v", requireAnalyzeEnv, err)
		}
		t.Skipf("systemd-analyze not installed: %v (apt-get install systemd; set %s=1 to make this a failure)", err, requireAnalyzeEnv)
	}
	return path
}

// oddBinary copies /bin/true to a path with a space and a specifier in it,
// so that systemd-analyze verify, which checks that ExecStart names an
// executable, fails unless systemd reads the path back exactly. (systemd
// refuses quotes and backslashes in an executable path outright.)
func oddBinary(t *testing.T) (exe, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "my latch", "100%h")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skipf("need /bin/true as a stand-in binary: %v", err)
	}
	exe = filepath.Join(dir, "latch")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, dir
}

// verify runs systemd-analyze verify on unit and returns its combined
// output; any output at all is a finding (it reports bad lines as
// "..., ignoring" and still exits 0).
func verify(t *testing.T, analyze, unit string, user bool) (string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, UnitName)
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify", "--man=no", path}
	if user {
		args = append([]string{"--user"}, args...)
	}
	cmd := exec.Command(analyze, args...)
	// The user manager needs a runtime directory, which a CI job or a
	// container may not have.
	rt := filepath.Join(dir, "runtime")
	if err := os.Mkdir(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func TestUnitVerify(t *testing.T) {
	analyze := systemdAnalyze(t)
	exe, dir := oddBinary(t)
	for name, opts := range goldenUnits {
		t.Run(name, func(t *testing.T) {
			opts.ExecPath, opts.Home = exe, filepath.Join(dir, `home 50%h "q" it's back\slash`)
			unit, err := Unit(opts)
			if err != nil {
				t.Fatal(err)
			}
			out, err := verify(t, analyze, unit, !opts.System)
			if err != nil || out != "" {
				t.Errorf("systemd-analyze verify: %v\n%s\nunit:\n%s", err, out, unit)
			}
		})
	}
}

// TestUnitVerifyCatchesBadEscaping shows that TestUnitVerify can fail: the
// same unit with the specifier left unescaped names a missing binary.
func TestUnitVerifyCatchesBadEscaping(t *testing.T) {
	analyze := systemdAnalyze(t)
	exe, _ := oddBinary(t)
	unit, err := Unit(UnitOptions{ExecPath: exe, System: true, User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(unit, "100%%h", "100%h", 1)
	if broken == unit {
		t.Fatalf("no escaped specifier in\n%s", unit)
	}
	if out, err := verify(t, analyze, broken, false); err == nil && out == "" {
		t.Errorf("systemd-analyze verify accepted an unescaped %%h:\n%s", broken)
	}
}
