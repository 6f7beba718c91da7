package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/provider/openai/openaitest"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/service"
)

const (
	doctorToken      = "123456:AAdoctorTOKENsecretPART01"
	doctorWrongToken = "123456:AAwrongDOCTORtokenSECRET9"
	doctorKey        = "sk-doctorAPIKEYsecret-0001"
	doctorWrongKey   = "sk-wrongDOCTORkeySECRET-9999"
)

// doctorCLI runs `latch <args>` with doctor wired to fake and to unit files
// under unitDir, and returns stdout, stderr and the exit code.
func doctorCLI(t *testing.T, fake *fakeMachine, unitDir string, args ...string) (string, string, int) {
	t.Helper()
	deps := doctorDeps{
		run: fake.run,
		unitPath: func(system bool) (string, error) {
			if system {
				return filepath.Join(unitDir, "system", service.UnitName), nil
			}
			return filepath.Join(unitDir, "user", service.UnitName), nil
		},
	}
	root := newRoot()
	for _, c := range root.Commands() {
		if c.Name() == "doctor" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newDoctorCmdWith(deps))
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := exitOK
	if err := root.Execute(); err != nil {
		// As Main does.
		code = exitError
		if ce, ok := errors.AsType[*codeError](err); ok {
			code = ce.code
		}
		if ce, ok := errors.AsType[*codeError](err); !ok || ce.err != nil {
			errOut.WriteString("latch: " + err.Error() + "\n")
		}
	}
	return out.String(), errOut.String(), code
}

// doctorEnv is an initialised latch home whose Telegram settings point at a
// fake Bot API, with a fake systemd where the user unit is installed,
// enabled and lingering, and gets the token and API keys from a drop-in.
func doctorEnv(t *testing.T, token string) (home, unitDir string, fake *fakeMachine, tg *telegramtest.Server) {
	t.Helper()
	home = testHome(t)
	if _, errOut, code := cli(t, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errOut)
	}
	tg = telegramtest.New(doctorToken)
	t.Cleanup(tg.Close)
	t.Setenv("LATCH_TELEGRAM_TOKEN", token)
	t.Setenv("LATCH_TELEGRAM_API_URL", tg.URL())
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("USER", "alice")
	unitDir = t.TempDir()
	unit := filepath.Join(unitDir, "user", service.UnitName)
	if err := os.MkdirAll(filepath.Dir(unit), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unit, []byte("[Unit]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake = &fakeMachine{out: map[string]string{
		"systemctl --user is-enabled latch.service": "enabled\n",
		"loginctl show-user alice -p Linger":        "Linger=yes\n",
		showEnv:                                     "Environment=LATCH_HOME=" + home + " LATCH_TELEGRAM_TOKEN=in-a-drop-in LATCH_TELEGRAM_API_URL=in-a-drop-in OPENAI_API_KEY=in-a-drop-in\n",
	}}
	return home, unitDir, fake, tg
}

func writeDoctorConfig(t *testing.T, home, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// assertNoSecrets fails the test if a bot token (or its secret part) or an
// API key shows in any output.
func assertNoSecrets(t *testing.T, outputs ...string) {
	t.Helper()
	for _, s := range []string{doctorToken, doctorWrongToken, doctorKey, doctorWrongKey} {
		if _, after, found := strings.Cut(s, ":"); found {
			s = after
		}
		for _, out := range outputs {
			if strings.Contains(out, s) {
				t.Errorf("output shows the secret %q:\n%s", s, out)
			}
		}
	}
}

func TestDoctorHealthy(t *testing.T) {
	home, unitDir, fake, _ := doctorEnv(t, doctorToken)
	// A local server that, like openaitest, does not list its models: a
	// warning, not a failure.
	llm := openaitest.New(doctorKey)
	defer llm.Close()
	writeDoctorConfig(t, home, "[agent]\nprovider = \"openai\"\nmodel = \"llama3\"\nbase_url = \""+llm.URL()+"\"\napi_key = \""+doctorKey+"\"\n")

	out, errOut, code := doctorCLI(t, fake, unitDir, "doctor")
	if code != exitOK || errOut != "" {
		t.Fatalf("doctor: exit %d, stderr %q, want 0 and nothing\n%s", code, errOut, out)
	}
	for _, want := range []string{
		"✓ home       " + home + " (mode 0700, yours)\n",
		"✓ config     ",
		"✓ secret     ",
		"- database   ",
		"! daemon     not running\n             fix: latch run",
		"✓ workspace  ",
		"✓ telegram   @latch_test_bot",
		"✓ webhook    ",
		"! model      ",
		"✓ service    ",
		"\nNo problems, 2 warnings.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "✗") {
		t.Errorf("a failed check in a healthy home:\n%s", out)
	}
	assertNoSecrets(t, out, errOut)
}

// brokenHome has a home open to others, a token the Bot API rejects, a
// workspace under a regular file and a model server nobody runs.
func brokenHome(t *testing.T) (home, unitDir string, fake *fakeMachine) {
	t.Helper()
	home, unitDir, fake, _ = doctorEnv(t, doctorWrongToken)
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", doctorWrongKey)
	writeDoctorConfig(t, home, "[agent]\nworkspace = \""+filepath.Join(blocker, "ws")+"\"\n"+
		"provider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n")
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	return home, unitDir, fake
}

func TestDoctorBroken(t *testing.T) {
	home, unitDir, fake := brokenHome(t)
	out, errOut, code := doctorCLI(t, fake, unitDir, "doctor")
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	if errOut != "" {
		t.Errorf("stderr %q, want nothing: the report says it all", errOut)
	}
	for _, want := range []string{
		"✗ home       ", "fix: chmod 700 " + home + "\n",
		"✗ telegram   the Bot API rejected the token (401 Unauthorized)\n",
		"fix: get a new token from @BotFather and put it in LATCH_TELEGRAM_TOKEN\n",
		"- webhook    ",
		"✗ workspace  ", "is not a directory", "[agent] workspace in " + filepath.Join(home, "config.toml"),
		"✗ model      cannot reach openai at http://127.0.0.1:1/v1",
		"\n4 problems, 1 warning.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	assertNoSecrets(t, out, errOut)
}

// TestDoctorServiceLacksShellToken: the token doctor finds in its shell
// does not reach the installed service, which would run without the
// Telegram gateway; doctor says so, with the fix, though the token works.
func TestDoctorServiceLacksShellToken(t *testing.T) {
	home, unitDir, fake, _ := doctorEnv(t, doctorToken)
	delete(fake.out, showEnv)
	out, errOut, code := doctorCLI(t, fake, unitDir, "doctor")
	if code != exitOK {
		t.Errorf("exit %d, want %d: a warning", code, exitOK)
	}
	for _, want := range []string{
		"✓ telegram   @latch_test_bot", "token from LATCH_TELEGRAM_TOKEN in this shell",
		"! service    ", "this shell sets LATCH_TELEGRAM_TOKEN, but latch.service does not get it: the service runs without the Telegram bot token",
		"[telegram] token_file in " + filepath.Join(home, "config.toml"), "systemctl --user edit latch.service",
		"systemctl --user restart latch.service",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	assertNoSecrets(t, out, errOut)
}

func TestDoctorJSON(t *testing.T) {
	_, unitDir, fake := brokenHome(t)
	out, errOut, code := doctorCLI(t, fake, unitDir, "doctor", "--json")
	if code != exitError || errOut != "" {
		t.Errorf("exit %d, stderr %q; want %d and nothing", code, errOut, exitError)
	}
	var rep struct {
		OK     *bool            `json:"ok"`
		Checks []map[string]any `json:"checks"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("output is not the report: %v\n%s", err, out)
	}
	if rep.OK == nil || *rep.OK {
		t.Errorf("ok = %v, want false", rep.OK)
	}
	var names []string
	statuses := map[string]string{}
	for _, c := range rep.Checks {
		var keys []string
		for k := range c {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"detail", "fix", "name", "status"}) {
			t.Errorf("check %v has keys %v, want detail, fix, name, status", c["name"], keys)
		}
		name, _ := c["name"].(string)
		status, _ := c["status"].(string)
		names = append(names, name)
		statuses[name] = status
	}
	wantNames := []string{"home", "config", "secret", "database", "daemon", "workspace", "telegram", "webhook", "slack", "matrix", "model", "mcp", "service"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("checks %v, want %v", names, wantNames)
	}
	for name, want := range map[string]string{"home": "fail", "telegram": "fail", "workspace": "fail", "daemon": "warn", "webhook": "skip", "model": "fail", "service": "ok"} {
		if statuses[name] != want {
			t.Errorf("%s: status %q, want %q", name, statuses[name], want)
		}
	}
	assertNoSecrets(t, out, errOut)
}

// TestDoctorIsACommand: the real command tree has doctor.
func TestDoctorIsACommand(t *testing.T) {
	out, _, code := cli(t, "doctor", "--help")
	if code != exitOK || !strings.Contains(out, "--json") {
		t.Errorf("doctor --help: exit %d\n%s", code, out)
	}
}
