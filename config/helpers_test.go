package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// otherUID is a uid that owns nothing on the test machine.
const otherUID = 4242

// testToken looks like a real bot token; the part after ':' is the secret.
const testToken = "123456789:AAHfiqksKZ8WmR2zSjiQ7_v4TMAKdiHm9T0"

// Test API keys that look like real ones; the parts after the prefixes are
// the secrets.
const (
	testAnthropicKey = "sk-ant-api03-Qx7vLm2Pd9Rk4Tz8Wn1Bc6Hf3Js5Gy0AeUoIiKs"
	testOpenAIKey    = "sk-proj-9fK2mQ7xR4tW1yZ8bN3cV6dL0pH5jGa"
)

// newHome returns a fresh, private latch home.
func newHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "latch")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return home
}

// writeFile writes content with exactly mode, whatever the umask.
func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// chownOther gives path to another user. Only root can; CI runs the tests as
// root, so there they always run.
func chownOther(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root (CI runs the tests as root)")
	}
	if err := os.Lchown(path, otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
}

// testLoader is a Loader with an environment of its own and a fake user home.
func testLoader(t *testing.T, env map[string]string) Loader {
	t.Helper()
	userHome := t.TempDir()
	return Loader{
		Getenv:      func(k string) string { return env[k] },
		UserHomeDir: func() (string, error) { return userHome, nil },
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// checkErr fails unless err is nil when want is empty, or err's message
// contains every string in want.
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not contain %q", err, w)
		}
	}
}

// homeVar stands for the test's latch home in the paths and errors of a
// loadCase; $USER stands for the fake user home.
const homeVar = "$HOME"

// cfgFile is a file a loadCase writes: config.toml, or a file it names.
type cfgFile struct {
	name, content string
	mode          os.FileMode
}

// loadCase is one case of a Load table test.
type loadCase struct {
	name    string
	config  *cfgFile // nil: no config.toml
	files   []cfgFile
	env     map[string]string
	want    func(c *Config) // edits the defaults into what Load must return
	wantErr []string        // substrings; $HOME and $USER are replaced
	notErr  []string        // substrings the error must not have
}

// testDefaults is what Load returns for home when nothing is configured,
// written out rather than taken from the code under test.
func testDefaults(h string) Config {
	return Config{
		Home: h, Path: filepath.Join(h, "config.toml"),
		Telegram:   TelegramConfig{APIURL: "https://api.telegram.org", Verbosity: "normal", WebhookListen: "127.0.0.1:8443"},
		Discord:    DiscordConfig{APIURL: "https://discord.com", Verbosity: "normal"},
		Slack:      SlackConfig{APIURL: DefaultSlackAPIURL, Verbosity: "normal"},
		Matrix:     MatrixConfig{Verbosity: "normal"},
		Schedule:   defaultSchedule(),
		Transcribe: TranscribeConfig{Model: "whisper-1", MaxBytes: 20 << 20, MaxDuration: 10 * time.Minute, Timeout: 2 * time.Minute},
		Agent: AgentConfig{
			Workspace: filepath.Join(h, "workspace"), BashTimeout: time.Minute,
			Provider: "none", MaxTokens: 4096, MaxSteps: 25, RequestTimeout: 5 * time.Minute,
			ContextBudget: 100000, ApprovalTimeout: 10 * time.Minute, ShutdownGrace: 20 * time.Second, InboxMaxMB: 1024,
			Permissions: map[string]string{
				"read_file": "allow", "list_files": "allow", "grep": "allow",
				"write_file": "ask", "edit_file": "ask", "bash": "ask", "fetch": "ask", "send_file": "ask", "schedule": "ask",
			},
			ClaudeCode: ClaudeCodeConfig{Timeout: time.Hour}, Codex: CodexConfig{Timeout: time.Hour},
		},
	}
}

// secretParts are substrings of the test secrets that no error may contain.
var secretParts = []string{testToken[10:], testAnthropicKey[14:], testOpenAIKey[9:], testWebhookSecret[4:]}

func runLoadTests(t *testing.T, tests []loadCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t) })
	}
}

func (tt loadCase) run(t *testing.T) {
	h := newHome(t)
	l := testLoader(t, tt.env)
	userHome, _ := l.UserHomeDir()
	expand := func(s string) string {
		s = strings.ReplaceAll(s, "$USER", userHome)
		return strings.ReplaceAll(s, homeVar, h)
	}
	for _, f := range tt.files {
		p := expand(f.name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(h, p)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, f.content, f.mode)
	}
	if tt.config != nil {
		writeFile(t, filepath.Join(h, "config.toml"), tt.config.content, tt.config.mode)
	}

	got, err := l.Load(h)
	var want []string
	for _, w := range tt.wantErr {
		want = append(want, expand(w))
	}
	checkErr(t, err, want)
	if err != nil {
		for _, n := range tt.notErr {
			if strings.Contains(err.Error(), n) {
				t.Errorf("error %q contains %q", err, n)
			}
		}
		for _, s := range secretParts {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error %q contains a secret", err)
			}
		}
		return
	}
	wantCfg := testDefaults(h)
	tt.want(&wantCfg)
	wantCfg.Telegram.TokenFile = expand(wantCfg.Telegram.TokenFile)
	wantCfg.Agent.Workspace = expand(wantCfg.Agent.Workspace)
	wantCfg.Agent.APIKeyFile = expand(wantCfg.Agent.APIKeyFile)
	wantCfg.Transcribe.APIKeyFile = expand(wantCfg.Transcribe.APIKeyFile)
	if !reflect.DeepEqual(*got, wantCfg) {
		t.Errorf("Load:\n got %+v %+v\nwant %+v %+v", got.Telegram, got.Agent, wantCfg.Telegram, wantCfg.Agent)
		if got.Telegram.Token != wantCfg.Telegram.Token {
			t.Errorf("tokens differ (values not shown)")
		}
		if got.Agent.APIKey != wantCfg.Agent.APIKey {
			t.Errorf("API keys differ (values not shown)")
		}
		if got.Home != wantCfg.Home || got.Path != wantCfg.Path {
			t.Errorf("got home %q path %q, want %q %q", got.Home, got.Path, wantCfg.Home, wantCfg.Path)
		}
	}
}
