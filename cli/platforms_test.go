package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/daemon"
)

// hardenChildEnv makes the test binary a process that runs daemon.Harden
// and prints what is left of its environment (see TestMain).
const hardenChildEnv = "LATCH_TEST_HARDEN_CHILD"

// hardenChild runs daemon.Harden as `latch run` does and prints Go's
// environment, the kernel's /proc/self/environ, and whether the lookup
// Harden returns still finds each variable named in $LATCH_TEST_LOOKUP.
func hardenChild() int {
	getenv, err := daemon.Harden()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	block, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("environ: %s\nblock: %s\n", strings.Join(os.Environ(), " "), bytes.ReplaceAll(block, []byte{0}, []byte{' '}))
	for _, name := range strings.Fields(os.Getenv("LATCH_TEST_LOOKUP")) {
		fmt.Printf("lookup %s=%s\n", name, getenv(name))
	}
	return 0
}

// TestEveryPlatformSecret walks the platform table and proves, for every
// secret of every platform, what must hold whichever platform it is: the
// secret is refused in a config.toml other users can read, never shows in
// the daemon's log, and, when a variable supplies it, is stripped from the
// environment of the commands latch runs and from the daemon's own
// (Harden), and `service install` refuses when the service would get it
// only from the installing shell. A new platform's secrets get all of this
// by being in its row.
func TestEveryPlatformSecret(t *testing.T) {
	if len(daemon.Platforms) < 2 {
		t.Fatalf("the platform table has %d rows", len(daemon.Platforms))
	}
	for _, p := range daemon.Platforms {
		for i, s := range p.Secrets {
			value := fmt.Sprintf("%s4242%dplatformSECRET%s%s", s.Prefix, i, p.Name, strings.ReplaceAll(s.Key, "_", ""))
			// The platform's other secrets are set too (Slack needs both of
			// its tokens), with values of their own.
			section := fmt.Sprintf("[%s]\n%s = %q\n", p.Name, s.Key, value)
			env := map[string]string{s.Env: value}
			for j, o := range p.Secrets {
				if j != i {
					other := fmt.Sprintf("%s4343%dother%s", o.Prefix, j, p.Name)
					section += fmt.Sprintf("%s = %q\n", o.Key, other)
					if o.Env != "" {
						env[o.Env] = other
					}
				}
			}
			t.Run(p.Name+"."+s.Key, func(t *testing.T) {
				t.Run("refused in a world-readable config", func(t *testing.T) {
					home := t.TempDir()
					if err := os.WriteFile(filepath.Join(home, config.ConfigFile), []byte(section), 0o644); err != nil {
						t.Fatal(err)
					}
					_, err := config.Loader{Getenv: func(string) string { return "" }}.Load(home)
					if err == nil || !strings.Contains(err.Error(), "holds ") || !strings.Contains(err.Error(), p.Name+"."+s.Key) {
						t.Fatalf("a 0644 config.toml with %s.%s loaded: %v", p.Name, s.Key, err)
					}
					if strings.Contains(err.Error(), value) {
						t.Errorf("the refusal shows the secret: %v", err)
					}
				})
				t.Run("redacted in logs", func(t *testing.T) {
					home := t.TempDir()
					if err := os.WriteFile(filepath.Join(home, config.ConfigFile), []byte(section), 0o600); err != nil {
						t.Fatal(err)
					}
					cfg, err := config.Loader{Getenv: func(string) string { return "" }}.Load(home)
					if err != nil {
						t.Fatal(err)
					}
					assertLogRedacts(t, cfg, value)
					if s.Env == "" {
						return
					}
					cfg, err = config.Loader{Getenv: func(k string) string { return env[k] }}.Load(t.TempDir())
					if err != nil {
						t.Fatal(err)
					}
					assertLogRedacts(t, cfg, value)
				})
				if s.Env == "" {
					return
				}
				t.Run("stripped from tool environments", func(t *testing.T) {
					t.Setenv(s.Env, value)
					t.Setenv(strings.ToLower(s.Env), value)
					for _, kv := range tools.SafeEnv() {
						if strings.Contains(kv, value) {
							t.Errorf("tools.SafeEnv passes %s", kv)
						}
					}
				})
				t.Run("cleared by Harden", func(t *testing.T) {
					if runtime.GOOS != "linux" {
						t.Skip("Harden clears the environment on Linux only")
					}
					assertHardenClears(t, s.Env, value)
				})
				t.Run("service install refuses a shell-only secret", func(t *testing.T) {
					unitDir, _ := serviceTestHome(t, "")
					for k, v := range env {
						t.Setenv(k, v)
					}
					fake := stopped(nil)
					out, errOut, err := serviceCLI(t, fake, installedBinary, "service", "install")
					assertRefusedUnchanged(t, fake, unitDir, out, err)
					if !strings.Contains(err.Error(), s.Env) || !strings.Contains(err.Error(), s.What) {
						t.Errorf("the refusal does not name %s and %s:\n%v", s.Env, s.What, err)
					}
					if strings.Contains(out+errOut+err.Error(), value) {
						t.Errorf("service install shows the secret:\n%s%s%v", out, errOut, err)
					}
				})
			})
		}
	}
}

// assertLogRedacts fails the test unless the daemon's logger, given
// configSecrets(cfg), hides value wherever it is logged.
func assertLogRedacts(t *testing.T, cfg *config.Config, value string) {
	t.Helper()
	secrets := &daemon.Secrets{}
	secrets.Add(configSecrets(cfg)...)
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, format, "info", secrets)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("sent "+value, "value", value, "err", errors.New("request to /bot"+value+"/getMe failed"))
		if strings.Contains(buf.String(), value) {
			t.Errorf("the %s log shows the secret:\n%s", format, buf.String())
		}
		if !strings.Contains(buf.String(), "getMe failed") {
			t.Errorf("the %s log lost the line:\n%s", format, buf.String())
		}
	}
}

// assertHardenClears runs Harden in a child process with name=value in its
// environment and fails the test if value is left in Go's environment or
// in /proc/self/environ, or if Harden's lookup lost it. A variable that is
// no secret passes, as the control.
func assertHardenClears(t *testing.T, name, value string) {
	t.Helper()
	const visible = "LATCH_TEST_VISIBLE"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hardenChildEnv+"=1", name+"="+value, visible+"=stays-"+value,
		"LATCH_TEST_LOOKUP="+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Harden child failed: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	for _, prefix := range []string{"environ: ", "block: "} {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		if i < 0 {
			t.Fatalf("the child printed no %q line:\n%s", prefix, out)
		}
		left := strings.ReplaceAll(lines[i], "stays-"+value, "")
		if strings.Contains(left, value) || strings.Contains(left, name+"=") {
			t.Errorf("after Harden, %s is still in the %s:\n%s", name, strings.TrimSuffix(prefix, ": "), lines[i])
		}
		if !strings.Contains(lines[i], visible+"=stays-"+value) {
			t.Errorf("Harden took %s, which is no secret, out of the %s", visible, strings.TrimSuffix(prefix, ": "))
		}
	}
	if !slices.Contains(lines, "lookup "+name+"="+value) {
		t.Errorf("Harden's lookup lost %s:\n%s", name, out)
	}
}

// TestPlatformTablesAgree: daemon.Platforms has a row, with a
// constructor or the binary that links one, for every platform config
// knows, in the same order.
func TestPlatformTablesAgree(t *testing.T) {
	var got, want []string
	for _, p := range daemon.Platforms {
		got = append(got, p.Name)
		if (p.New == nil) == (p.Binary == "") || p.Settings == nil || p.TokenEnv == "" || p.APIURLEnv == "" || len(p.Secrets) == 0 {
			t.Errorf("row %q is incomplete: %+v", p.Name, p.Platform)
		}
	}
	for _, p := range config.Platforms {
		want = append(want, p.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("daemon.Platforms = %q, config.Platforms = %q", got, want)
	}
}
