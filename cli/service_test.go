package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/config"
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
	return serviceCLIWith(t, serviceDeps{run: fake.run, executable: func() (string, error) { return exe, nil }}, args...)
}

func serviceCLIWith(t *testing.T, deps serviceDeps, args ...string) (string, string, error) {
	t.Helper()
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

// testPATH is the shell's PATH in the service tests.
const testPATH = "/home/alice/.local/bin:/usr/local/bin:/usr/bin:/bin"

// serviceTestEnv sets up an environment with no token or API key in it.
func serviceTestEnv(t *testing.T) (unitDir, home string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config")
	t.Setenv("XDG_CONFIG_HOME", cfg)
	home = filepath.Join(t.TempDir(), "latch home")
	t.Setenv("LATCH_HOME", home)
	t.Setenv("USER", "alice")
	t.Setenv("PATH", testPATH)
	for _, p := range config.Platforms {
		t.Setenv(p.TokenEnv, "")
		t.Setenv(p.APIURLEnv, "")
	}
	for _, v := range []string{config.EnvAnthropicAPIKey, config.EnvOpenAIAPIKey, config.EnvAnthropicBaseURL, config.EnvOpenAIBaseURL} {
		t.Setenv(v, "")
	}
	return filepath.Join(cfg, "systemd", "user"), home
}

// serviceTestHome is serviceTestEnv with the latch home made and, unless
// configText is empty, a config.toml holding it.
func serviceTestHome(t *testing.T, configText string) (unitDir, home string) {
	t.Helper()
	unitDir, home = serviceTestEnv(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if configText != "" {
		writeDoctorConfig(t, home, configText)
	}
	return unitDir, home
}

// Commands install runs to learn the service's environment and state.
const (
	showEnv     = "systemctl --user show latch.service -p Environment -p EnvironmentFiles"
	showManager = "systemctl --user show-environment"
	isActive    = "systemctl --user is-active --quiet latch.service"
)

// stopped is a fake systemd where latch.service does not run.
func stopped(out map[string]string) *fakeMachine {
	if out == nil {
		out = map[string]string{}
	}
	return &fakeMachine{out: out, code: map[string]int{isActive: 3}}
}

func TestServiceInstallUser(t *testing.T) {
	unitDir, home := serviceTestEnv(t)
	fake := stopped(map[string]string{"loginctl show-user alice -p Linger": "Linger=no\n"})
	out, _, err := serviceCLI(t, fake, installedBinary, "service", "install", "--harden")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{showEnv, showManager, "systemctl --user daemon-reload", isActive,
		"systemctl --user enable --now latch.service", "loginctl show-user alice -p Linger"}
	if !slices.Equal(fake.ran, want) {
		t.Errorf("ran %q, want %q", fake.ran, want)
	}
	unit, err := os.ReadFile(filepath.Join(unitDir, "latch.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"ExecStart=/usr/local/bin/latch run", `Environment="LATCH_HOME=` + home + `"`,
		"Environment=PATH=" + testPATH, "NoNewPrivileges=yes"} {
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

// TestServiceInstallRestartsRunningService: an upgrade leaves the unit as
// it was; the running latch is restarted so the new binary runs, and the
// output says so.
func TestServiceInstallRestartsRunningService(t *testing.T) {
	serviceTestEnv(t)
	fake := &fakeMachine{out: map[string]string{"loginctl show-user alice -p Linger": "Linger=yes\n"}} // is-active: 0
	if _, _, err := serviceCLI(t, fake, installedBinary, "service", "install"); err != nil {
		t.Fatal(err)
	}
	fake.ran = nil
	out, _, err := serviceCLI(t, fake, installedBinary, "service", "install")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{showEnv, showManager, "systemctl --user daemon-reload", isActive,
		"systemctl --user enable latch.service", "systemctl --user restart latch.service", "loginctl show-user alice -p Linger"}
	if !slices.Equal(fake.ran, want) {
		t.Errorf("ran %q, want %q", fake.ran, want)
	}
	if !strings.Contains(out, "is up to date") || !strings.Contains(out, "was running: restarted it, so it now runs "+installedBinary) {
		t.Errorf("output does not say the running latch was restarted:\n%s", out)
	}
}

// TestServiceInstallEnvOnlySecrets: a token or key that only the shell's
// environment has would not reach the service, which would then start
// without the gateway or the model. install refuses, changing nothing,
// and says how to fix it; --no-start and --allow-missing-env only warn.
func TestServiceInstallEnvOnlySecrets(t *testing.T) {
	const token = "123456:AAserviceTOKENsecret01"
	const key = "sk-ant-serviceKEYsecret-01"
	tests := []struct {
		name    string
		config  string            // config.toml, if any
		files   map[string]string // more files in the home
		env     map[string]string
		unitEnv map[string]string // what systemctl show prints
		flags   []string
		refused bool
		warned  []string // the variables the warning or refusal names
	}{
		{name: "token only in the shell", env: map[string]string{config.EnvTelegramToken: token},
			refused: true, warned: []string{config.EnvTelegramToken}},
		{name: "token and API key only in the shell", config: "[agent]\nprovider = \"anthropic\"\n",
			env:     map[string]string{config.EnvTelegramToken: token, config.EnvAnthropicAPIKey: key},
			refused: true, warned: []string{config.EnvTelegramToken, config.EnvAnthropicAPIKey}},
		{name: "--allow-missing-env", env: map[string]string{config.EnvTelegramToken: token},
			flags: []string{"--allow-missing-env"}, warned: []string{config.EnvTelegramToken}},
		{name: "--no-start", env: map[string]string{config.EnvTelegramToken: token},
			flags: []string{"--no-start"}, warned: []string{config.EnvTelegramToken}},
		{name: "a drop-in sets it", env: map[string]string{config.EnvTelegramToken: token},
			unitEnv: map[string]string{showEnv: "Environment=LATCH_HOME=/x " + config.EnvTelegramToken + "=from-drop-in\n"}},
		{name: "the user manager has it", env: map[string]string{config.EnvTelegramToken: token},
			unitEnv: map[string]string{showManager: config.EnvTelegramToken + "=imported\n"}},
		{name: "token_file behind it", config: "[telegram]\ntoken_file = \"tg.token\"\n",
			files: map[string]string{"tg.token": token}, env: map[string]string{config.EnvTelegramToken: token}},
		{name: "token in config.toml", config: "[telegram]\ntoken = \"" + token + "\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unitDir, home := serviceTestHome(t, tt.config)
			for name, text := range tt.files {
				if err := os.WriteFile(filepath.Join(home, name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fake := stopped(tt.unitEnv)
			out, errOut, err := serviceCLI(t, fake, installedBinary, append([]string{"service", "install"}, tt.flags...)...)
			assertNoSecrets(t, out, errOut, fmt.Sprint(err))
			for _, s := range []string{token, key} {
				if strings.Contains(out+errOut+fmt.Sprint(err), s) {
					t.Errorf("output shows the secret %q", s)
				}
			}
			if tt.refused {
				assertRefusedUnchanged(t, fake, unitDir, out, err)
				for _, want := range []string{"token_file", "EnvironmentFile=" + filepath.Join(home, "service.env"),
					"systemctl --user edit latch.service", "latch service install --no-start", "--allow-missing-env"} {
					if !strings.Contains(err.Error(), want) && !(want == "token_file" && strings.Contains(err.Error(), "api_key_file")) {
						t.Errorf("refusal lacks %q:\n%v", want, err)
					}
				}
				for _, v := range tt.warned {
					if !strings.Contains(err.Error(), v) {
						t.Errorf("refusal does not name %s:\n%v", v, err)
					}
				}
				return
			}
			assertInstalledWarning(t, unitDir, errOut, err, "warning: latch.service would run without", tt.warned)
		})
	}
}

// TestServiceInstallEnvOnlyAPIURLs: an API URL that only the shell's
// environment has (a local Bot API server, a local model) would not reach
// the service, which would then send the chat, and the token or key, to
// the default server instead. install refuses as for a lacking secret,
// unless the unit's environment or config.toml gives the service the same
// setting; --no-start and --allow-missing-env only warn. The URLs are
// never printed: they may carry a credential.
func TestServiceInstallEnvOnlyAPIURLs(t *testing.T) {
	const (
		token     = "123456:AAserviceTOKENsecret01"
		secretDir = "SECRETpathPART"
		url       = "http://127.0.0.1:8081/" + secretDir
		tgConfig  = "[telegram]\ntoken = \"" + token + "\"\n"
		dcConfig  = "[discord]\ntoken = \"abc.def.ghi\"\n"
	)
	anthropic := "[agent]\nprovider = \"anthropic\"\napi_key = \"sk-ant-cfgKEYsecret-0001\"\n"
	openai := "[agent]\nprovider = \"openai\"\n"
	tests := []struct {
		name    string
		config  string
		env     map[string]string
		unitEnv map[string]string // what systemctl show prints
		flags   []string
		refused bool
		warned  []string // the variables the warning or refusal names
		keys    []string // the config.toml settings the advice names
	}{
		{name: "Telegram API URL only in the shell", config: tgConfig, env: map[string]string{config.EnvTelegramAPIURL: url},
			refused: true, warned: []string{config.EnvTelegramAPIURL}, keys: []string{"api_url"}},
		{name: "Discord API URL only in the shell", config: dcConfig, env: map[string]string{config.EnvDiscordAPIURL: url},
			refused: true, warned: []string{config.EnvDiscordAPIURL}, keys: []string{"api_url"}},
		{name: "Anthropic base URL only in the shell", config: anthropic, env: map[string]string{config.EnvAnthropicBaseURL: url},
			refused: true, warned: []string{config.EnvAnthropicBaseURL}, keys: []string{"base_url"}},
		{name: "OpenAI base URL only in the shell", config: openai, env: map[string]string{config.EnvOpenAIBaseURL: url},
			refused: true, warned: []string{config.EnvOpenAIBaseURL}, keys: []string{"base_url"}},
		{name: "a token and a URL only in the shell", config: openai,
			env:     map[string]string{config.EnvTelegramToken: token, config.EnvTelegramAPIURL: url, config.EnvOpenAIBaseURL: url},
			refused: true, warned: []string{config.EnvTelegramToken, config.EnvTelegramAPIURL, config.EnvOpenAIBaseURL},
			keys: []string{"token_file", "api_url", "base_url"}},
		{name: "--allow-missing-env", config: openai, env: map[string]string{config.EnvOpenAIBaseURL: url},
			flags: []string{"--allow-missing-env"}, warned: []string{config.EnvOpenAIBaseURL}},
		{name: "--no-start", config: tgConfig, env: map[string]string{config.EnvTelegramAPIURL: url},
			flags: []string{"--no-start"}, warned: []string{config.EnvTelegramAPIURL}},
		{name: "a drop-in sets it", config: openai, env: map[string]string{config.EnvOpenAIBaseURL: url},
			unitEnv: map[string]string{showEnv: "Environment=LATCH_HOME=/x " + config.EnvOpenAIBaseURL + "=from-drop-in\n"}},
		{name: "an environment file sets it", config: dcConfig, env: map[string]string{config.EnvDiscordAPIURL: url},
			unitEnv: map[string]string{showEnv: "EnvironmentFiles=ENVFILE (ignore_errors=no)\n"}},
		{name: "the user manager has it", config: tgConfig, env: map[string]string{config.EnvTelegramAPIURL: url},
			unitEnv: map[string]string{showManager: config.EnvTelegramAPIURL + "=imported\n"}},
		{name: "config.toml sets base_url, which wins", config: openai + "base_url = \"http://127.0.0.1:11434/v1\"\n",
			env: map[string]string{config.EnvOpenAIBaseURL: url}},
		{name: "config.toml sets the same api_url", config: tgConfig + "api_url = \"" + url + "\"\n",
			env: map[string]string{config.EnvTelegramAPIURL: url}},
		{name: "the gateway is off", env: map[string]string{config.EnvTelegramAPIURL: url, config.EnvDiscordAPIURL: url}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unitDir, home := serviceTestHome(t, tt.config)
			envFile := filepath.Join(home, "service.env")
			if err := os.WriteFile(envFile, []byte(config.EnvDiscordAPIURL+"=x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			unitEnv := map[string]string{}
			for k, v := range tt.unitEnv {
				unitEnv[k] = strings.ReplaceAll(v, "ENVFILE", envFile)
			}
			fake := stopped(unitEnv)
			out, errOut, err := serviceCLI(t, fake, installedBinary, append([]string{"service", "install"}, tt.flags...)...)
			all := out + errOut + fmt.Sprint(err)
			assertNoSecrets(t, all)
			for _, s := range []string{token, secretDir, "127.0.0.1:8081"} {
				if strings.Contains(all, s) {
					t.Errorf("output shows the value %q:\n%s", s, all)
				}
			}
			if tt.refused {
				assertRefusedUnchanged(t, fake, unitDir, out, err)
				for _, want := range append([]string{"EnvironmentFile=" + envFile, "systemctl --user edit latch.service",
					"latch service install --no-start", "--allow-missing-env"}, tt.keys...) {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("refusal lacks %q:\n%v", want, err)
					}
				}
				for _, v := range tt.warned {
					if !strings.Contains(err.Error(), "printenv | grep '^"+v+"='") {
						t.Errorf("refusal does not name %s:\n%v", v, err)
					}
				}
				return
			}
			assertInstalledWarning(t, unitDir, errOut, err, "warning: latch.service would run without this shell's", tt.warned)
		})
	}
}

// assertRefusedUnchanged checks that install refused and did no more than
// ask systemd for the unit's environment: no unit file, no systemctl change.
func assertRefusedUnchanged(t *testing.T, fake *fakeMachine, unitDir, out string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("install succeeded; want a refusal\n%s", out)
	}
	_, statErr := os.Stat(filepath.Join(unitDir, service.UnitName))
	if !slices.Equal(fake.ran, []string{showEnv, showManager}) || statErr == nil {
		t.Errorf("a refused install changed something: ran %q, unit file: %v", fake.ran, statErr)
	}
}

// assertInstalledWarning checks that install wrote the unit and that its
// warning, starting with warning, names each variable in warned; with no
// variables, that it did not warn.
func assertInstalledWarning(t *testing.T, unitDir, errOut string, err error, warning string, warned []string) {
	t.Helper()
	if err != nil {
		t.Fatalf("install: %v\n%s", err, errOut)
	}
	if _, statErr := os.Stat(filepath.Join(unitDir, service.UnitName)); statErr != nil {
		t.Errorf("no unit written: %v", statErr)
	}
	if len(warned) == 0 && strings.Contains(errOut, "would run without") {
		t.Errorf("a warning although the service gets everything:\n%s", errOut)
	}
	for _, v := range warned {
		if !strings.Contains(errOut, warning) || !strings.Contains(errOut, v) {
			t.Errorf("no warning naming %s:\n%s", v, errOut)
		}
	}
}

// TestServiceInstallKeepsInvokedPath: installed as Homebrew and nix do, a
// stable symlink to a versioned binary, the unit names the symlink: an
// upgrade and cleanup delete the versioned path, and a unit naming it would
// fail with 203/EXEC for ever.
func TestServiceInstallKeepsInvokedPath(t *testing.T) {
	unitDir, _ := serviceTestEnv(t)
	root := t.TempDir()
	// t.TempDir lies in the temporary directory, which install refuses as
	// a go run build; move that elsewhere.
	t.Setenv("TMPDIR", filepath.Join(root, "tmp"))
	t.Setenv("GOCACHE", filepath.Join(root, "gocache"))
	versioned := filepath.Join(root, "Cellar", "latch", "1.2.0", "bin", "latch")
	other := filepath.Join(root, "other", "latch")
	bin := filepath.Join(root, "bin")
	for _, p := range []string{versioned, other} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	stable := filepath.Join(bin, "latch")
	if err := os.Symlink("../Cellar/latch/1.2.0/bin/latch", stable); err != nil {
		t.Fatal(err)
	}
	tmpBuild := filepath.Join(root, "tmp", "go-build99", "exe", "latch")
	if err := os.MkdirAll(filepath.Dir(tmpBuild), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmpBuild, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tmpLink := filepath.Join(root, "linked", "latch")
	os.MkdirAll(filepath.Dir(tmpLink), 0o755)
	if err := os.Symlink(tmpBuild, tmpLink); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		path     string // $PATH
		arg0     string
		exe      string // os.Executable: symlinks resolved
		want     string // ExecStart's path; "" for a refusal
		wantTemp bool
	}{
		{"found in $PATH", bin + ":/usr/bin", "latch", versioned, stable, false},
		{"started by its full path", "/usr/bin", stable, versioned, stable, false},
		{"started by a relative path", "/usr/bin", "bin/latch", versioned, stable, false},
		{"argv[0] names another binary", bin, other, versioned, versioned, false},
		{"not in $PATH", "/usr/bin", "latch", versioned, versioned, false},
		{"only in a relative $PATH entry", "bin:/usr/bin", "latch", versioned, versioned, false},
		{"argv[0] empty", bin, "", versioned, versioned, false},
		{"go run", bin, tmpBuild, tmpBuild, "", true},
		{"a stable symlink to a go run build", bin, tmpLink, tmpBuild, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(root)
			t.Setenv("PATH", tt.path)
			fake := stopped(nil)
			deps := serviceDeps{run: fake.run, executable: func() (string, error) { return tt.exe, nil },
				arg0: tt.arg0, lookPath: exec.LookPath}
			_, _, err := serviceCLIWith(t, deps, "service", "install", "--path=/usr/bin")
			if tt.wantTemp {
				if !errors.Is(err, errTempBinary) {
					t.Errorf("install: %v, want a refusal of the temporary build", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			unit, err := os.ReadFile(filepath.Join(unitDir, service.UnitName))
			if err != nil {
				t.Fatal(err)
			}
			if want := "\nExecStart=" + tt.want + " run\n"; !strings.Contains(string(unit), want) {
				t.Errorf("unit lacks %q:\n%s", want, unit)
			}
		})
	}
}

// TestServiceInstallPATH: a user service gets the shell's PATH, so the
// chat's !cmd finds ~/.local/bin and ~/go/bin, without the entries that
// would search the working directory; --path chooses another, --path= none.
func TestServiceInstallPATH(t *testing.T) {
	tests := []struct {
		name    string
		shell   string
		flags   []string
		want    string // the PATH line; "" for none
		dropped string
	}{
		{"the shell's", testPATH, nil, "Environment=PATH=" + testPATH, ""},
		{"without relative, empty and repeated entries", "/home/alice/go/bin::.:bin:/usr/bin/:/usr/bin",
			nil, "Environment=PATH=/home/alice/go/bin:/usr/bin", `".", "bin"`},
		{"with a space", "/opt/my tools/bin:/usr/bin", nil, `Environment="PATH=/opt/my tools/bin:/usr/bin"`, ""},
		{"--path", testPATH, []string{"--path", "/opt/bin:/usr/bin"}, "Environment=PATH=/opt/bin:/usr/bin", ""},
		{"--path=", testPATH, []string{"--path="}, "", ""},
		{"a system service", testPATH, []string{"--system", "--user", "root"}, "", ""},
		{"a system service with --path", testPATH, []string{"--system", "--user", "root", "--path", "/opt/bin"}, "Environment=PATH=/opt/bin", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serviceTestEnv(t)
			t.Setenv("PATH", tt.shell)
			out, errOut, err := serviceCLI(t, stopped(nil), installedBinary, append([]string{"service", "install", "--print"}, tt.flags...)...)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for l := range strings.SplitSeq(out, "\n") {
				if strings.HasPrefix(l, "Environment=PATH=") || strings.HasPrefix(l, `Environment="PATH=`) {
					got = l
				}
			}
			if got != tt.want {
				t.Errorf("PATH line %q, want %q\n%s", got, tt.want, out)
			}
			if tt.dropped != "" && errOut != "" {
				t.Errorf("--print warned %q; it only prints", errOut)
			}
		})
	}
	// Installing (not --print) says where PATH came from, and what was
	// left out.
	serviceTestEnv(t)
	t.Setenv("PATH", "/usr/bin:.")
	out, errOut, err := serviceCLI(t, stopped(nil), installedBinary, "service", "install")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "this shell's PATH") || !strings.Contains(errOut, `left out of the service's PATH, as they are not absolute: "."`) {
		t.Errorf("install does not say where PATH came from:\nstdout %s\nstderr %s", out, errOut)
	}
	// A PATH the unit cannot carry is refused, naming the entry.
	if _, _, err := serviceCLI(t, stopped(nil), installedBinary, "service", "install", "--print", "--path", "/usr/bin:relative"); err == nil || !strings.Contains(err.Error(), "relative") {
		t.Errorf("--path with a relative entry: %v, want a refusal", err)
	}
}

// TestLogsWithoutEntries: journalctl exits 0 when the journal holds
// nothing of the unit; latch logs used to as well.
func TestLogsWithoutEntries(t *testing.T) {
	serviceTestEnv(t)
	const cmd = "journalctl --user -u latch.service"
	fake := &fakeMachine{out: map[string]string{cmd: "-- No entries --\n"}}
	out, _, err := serviceCLI(t, fake, installedBinary, "logs")
	var ce *codeError
	if !errors.As(err, &ce) || ce.code != exitError || ce.err == nil || !strings.Contains(ce.err.Error(), "latch service install") {
		t.Errorf("latch logs with no entries: %v, want exit 1 saying why", err)
	}
	if out != "-- No entries --\n" {
		t.Errorf("latch logs printed %q, want journalctl's output", out)
	}
}

// TestServiceInstallTakesTheShutdownGrace: systemd's stop timeout follows
// [agent] shutdown_grace, so a longer grace is not cut short by SIGKILL.
func TestServiceInstallTakesTheShutdownGrace(t *testing.T) {
	serviceTestHome(t, "[agent]\nshutdown_grace = \"2m\"\n")
	out, _, err := serviceCLI(t, &fakeMachine{}, installedBinary, "service", "install", "--print")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "TimeoutStopSec=130") {
		t.Errorf("the unit does not give systemd the 2m grace plus its margin:\n%s", out)
	}
}

// TestServiceInstallWarnsOfAMissingSidecar: with MCP servers configured,
// install says when latch-mcp is not beside the binary the unit runs, and
// how to build it; beside it, it says nothing.
func TestServiceInstallWarnsOfAMissingSidecar(t *testing.T) {
	serviceTestHome(t, "[[mcp.servers]]\nname = \"notes\"\ncommand = \"true\"\n")
	dir := t.TempDir()
	exe := filepath.Join(dir, "latch")
	_, errOut, err := serviceCLI(t, &fakeMachine{}, exe, "service", "install", "--print")
	if err != nil {
		t.Fatal(err)
	}
	if want := "-o " + dir + " ./cmd/latch-mcp"; !strings.Contains(errOut, "MCP sidecar is missing") || !strings.Contains(errOut, want) {
		t.Errorf("install's warnings %q lack the missing sidecar and %q", errOut, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "latch-mcp"), []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, errOut, _ := serviceCLI(t, &fakeMachine{}, exe, "service", "install", "--print"); strings.Contains(errOut, "sidecar") {
		t.Errorf("install warns with the sidecar beside the binary: %q", errOut)
	}
}
