package service

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/config"
)

// TestEnvironment reads the names latch.service gets from each place
// systemd takes them: Environment= (quoted as systemctl show quotes), an
// EnvironmentFile=, and the service manager's environment.
func TestEnvironment(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "latch env")
	writeTestFile(t, envFile, "# LATCH_COMMENTED=x\n; SEMI=x\n\n  ANTHROPIC_API_KEY=sk-in-a-file\nexport EXPORTED=x\n")
	unreadable := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(unreadable, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, system := range []bool{false, true} {
		scope := "--user "
		if system {
			scope = ""
		}
		f := newFake()
		f.out["systemctl "+scope+"show latch.service -p Environment -p EnvironmentFiles"] = "" +
			`Environment=LATCH_HOME=/home/a/.latch "PATH=/opt/my tools/bin:/usr/bin" "QUOTED=a \"LATCH_FAKE=b\" c"` + "\n" +
			"EnvironmentFiles=" + envFile + " (ignore_errors=no)\n" +
			"EnvironmentFiles=" + filepath.Join(dir, "missing") + " (ignore_errors=yes)\n" +
			"EnvironmentFiles=" + unreadable + " (ignore_errors=no)\n"
		f.out["systemctl "+scope+"show-environment"] = "HOME=/home/a\nLATCH_DISCORD_TOKEN=abc\nLANG='C.UTF-8 x'\n"
		m := &Manager{System: system, Run: f.run}
		env, err := m.Environment(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		assertRan(t, f, "systemctl "+scope+"show latch.service -p Environment -p EnvironmentFiles", "systemctl "+scope+"show-environment")
		for _, name := range []string{"LATCH_HOME", "PATH", "QUOTED", "ANTHROPIC_API_KEY", "HOME", "LATCH_DISCORD_TOKEN", "LANG"} {
			if !env.Sets(name) {
				t.Errorf("system=%v: %s not found", system, name)
			}
		}
		for _, name := range []string{"LATCH_FAKE", "LATCH_COMMENTED", "SEMI", "EXPORTED", "LATCH_TELEGRAM_TOKEN"} {
			if env.Sets(name) {
				t.Errorf("system=%v: %s found, but systemd does not set it", system, name)
			}
		}
		if !slices.Equal(env.Unread, []string{unreadable}) {
			t.Errorf("system=%v: unread files %q, want only %q (a missing file sets nothing)", system, env.Unread, unreadable)
		}
	}
}

func TestEnvironmentReportsFailure(t *testing.T) {
	f := newFake()
	f.fail["systemctl --user show latch.service -p Environment -p EnvironmentFiles"] = 1
	if _, err := (&Manager{Run: f.run}).Environment(t.Context()); err == nil {
		t.Error("Environment succeeded although systemctl failed")
	}
}

// TestLackingSecrets: a secret that comes only from the shell's
// environment is lacking unless the unit's environment sets it or
// config.toml has it too.
func TestLackingSecrets(t *testing.T) {
	const (
		token = "123456:AAenvTOKENsecret0001"
		key   = "sk-ant-envKEYsecret-0001"
	)
	tests := []struct {
		name     string
		config   string
		files    map[string]string // written into home, 0600
		shell    map[string]string
		unit     []string // names the unit's environment sets
		unread   bool
		want     []string
		wantLoad bool // the config does not load
	}{
		{name: "token only in the shell", shell: map[string]string{config.EnvTelegramToken: token},
			want: []string{config.EnvTelegramToken}},
		{name: "unit sets it too", shell: map[string]string{config.EnvTelegramToken: token},
			unit: []string{config.EnvTelegramToken}},
		{name: "an env file that cannot be read may set it", shell: map[string]string{config.EnvTelegramToken: token},
			unread: true},
		{name: "token_file behind the variable", config: "[telegram]\ntoken_file = \"tg.token\"\n",
			files: map[string]string{"tg.token": token}, shell: map[string]string{config.EnvTelegramToken: token}},
		{name: "token_file behind it, missing", config: "[telegram]\ntoken_file = \"tg.token\"\n",
			shell: map[string]string{config.EnvTelegramToken: token}, want: []string{config.EnvTelegramToken}},
		{name: "token in config.toml", config: "[telegram]\ntoken = \"" + token + "\"\n"},
		{name: "API key only in the shell", config: "[agent]\nprovider = \"anthropic\"\n",
			shell: map[string]string{config.EnvAnthropicAPIKey: key}, want: []string{config.EnvAnthropicAPIKey}},
		{name: "API key of a provider not chosen", shell: map[string]string{config.EnvOpenAIAPIKey: key}},
		{name: "everything only in the shell", config: "[agent]\nprovider = \"openai\"\n",
			shell: map[string]string{config.EnvTelegramToken: token, config.EnvDiscordToken: "abc.def.ghi", config.EnvOpenAIAPIKey: key},
			want:  []string{config.EnvTelegramToken, config.EnvDiscordToken, config.EnvOpenAIAPIKey}},
		{name: "nothing from the shell"},
		{name: "config does not load", config: "[telegram\n", wantLoad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := testHome(t, tt.config)
			for name, text := range tt.files {
				writeTestFile(t, filepath.Join(home, name), text)
			}
			env := testUnitEnv(tt.unit, tt.unread)
			lacking, err := LackingSecrets(home, func(k string) string { return tt.shell[k] }, env)
			if (err != nil) != tt.wantLoad {
				t.Fatalf("error %v, want one: %v", err, tt.wantLoad)
			}
			var got []string
			for _, s := range lacking {
				got = append(got, s.Var)
				if s.What == "" || !strings.HasSuffix(s.FileKey, "_file") {
					t.Errorf("%s: what %q, file key %q", s.Var, s.What, s.FileKey)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lacking %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLackingSettings: an API URL that comes only from the shell's
// environment is lacking unless the unit's environment sets it or
// config.toml gives the service the same value. Without it the service
// would talk to another server (api.openai.com instead of a local model)
// and send it the chat.
func TestLackingSettings(t *testing.T) {
	const (
		tgToken = "[telegram]\ntoken = \"123456:AAcfgTOKENsecret0001\"\n"
		dcToken = "[discord]\ntoken = \"abc.def.ghi\"\n"
		local   = "http://127.0.0.1:8081"
		other   = "http://127.0.0.1:9999"
	)
	anthropic := "[agent]\nprovider = \"anthropic\"\n"
	openai := "[agent]\nprovider = \"openai\"\n"
	tests := []struct {
		name     string
		config   string
		shell    map[string]string
		unit     []string // names the unit's environment sets
		unread   bool
		want     []string
		wantLoad bool // the config does not load
	}{
		{name: "Telegram API URL only in the shell", config: tgToken,
			shell: map[string]string{config.EnvTelegramAPIURL: local}, want: []string{config.EnvTelegramAPIURL}},
		{name: "Discord API URL only in the shell", config: dcToken,
			shell: map[string]string{config.EnvDiscordAPIURL: local}, want: []string{config.EnvDiscordAPIURL}},
		{name: "Anthropic base URL only in the shell", config: anthropic,
			shell: map[string]string{config.EnvAnthropicBaseURL: local}, want: []string{config.EnvAnthropicBaseURL}},
		{name: "OpenAI base URL only in the shell", config: openai,
			shell: map[string]string{config.EnvOpenAIBaseURL: local + "/v1"}, want: []string{config.EnvOpenAIBaseURL}},
		{name: "all only in the shell", config: tgToken + dcToken + openai,
			shell: map[string]string{config.EnvTelegramAPIURL: local, config.EnvDiscordAPIURL: local, config.EnvOpenAIBaseURL: local},
			want:  []string{config.EnvTelegramAPIURL, config.EnvDiscordAPIURL, config.EnvOpenAIBaseURL}},
		{name: "the token from the shell too", shell: map[string]string{config.EnvTelegramToken: "123456:AAenvTOKENsecret0001",
			config.EnvTelegramAPIURL: local}, want: []string{config.EnvTelegramAPIURL}},
		{name: "unit sets the Telegram API URL", config: tgToken,
			shell: map[string]string{config.EnvTelegramAPIURL: local}, unit: []string{config.EnvTelegramAPIURL}},
		{name: "unit sets the OpenAI base URL", config: openai,
			shell: map[string]string{config.EnvOpenAIBaseURL: local}, unit: []string{config.EnvOpenAIBaseURL}},
		{name: "an env file that cannot be read may set it", config: openai,
			shell: map[string]string{config.EnvOpenAIBaseURL: local}, unread: true},
		{name: "config.toml sets base_url, which wins", config: openai + "base_url = \"" + other + "\"\n",
			shell: map[string]string{config.EnvOpenAIBaseURL: local}},
		{name: "config.toml sets the same api_url", config: tgToken + "api_url = \"" + local + "\"\n",
			shell: map[string]string{config.EnvTelegramAPIURL: local}},
		{name: "config.toml sets another api_url, which the shell overrides", config: tgToken + "api_url = \"" + other + "\"\n",
			shell: map[string]string{config.EnvTelegramAPIURL: local}, want: []string{config.EnvTelegramAPIURL}},
		{name: "config.toml sets the same Discord api_url", config: dcToken + "api_url = \"" + local + "\"\n",
			shell: map[string]string{config.EnvDiscordAPIURL: local}},
		{name: "the shell names OpenAI's public API, the service's default", config: openai,
			shell: map[string]string{config.EnvOpenAIBaseURL: config.DefaultOpenAIBaseURL}},
		{name: "the shell names Anthropic's public API, the service's default", config: anthropic,
			shell: map[string]string{config.EnvAnthropicBaseURL: config.DefaultAnthropicBaseURL}},
		{name: "the shell names the public Telegram API, the service's default", config: tgToken,
			shell: map[string]string{config.EnvTelegramAPIURL: config.DefaultTelegramAPIURL}},
		{name: "Telegram is off", shell: map[string]string{config.EnvTelegramAPIURL: local}},
		{name: "Discord is off", config: tgToken, shell: map[string]string{config.EnvDiscordAPIURL: local}},
		{name: "base URL of a provider not chosen", config: anthropic, shell: map[string]string{config.EnvOpenAIBaseURL: local}},
		{name: "no provider", shell: map[string]string{config.EnvOpenAIBaseURL: local, config.EnvAnthropicBaseURL: local}},
		{name: "nothing from the shell", config: tgToken + openai},
		{name: "config does not load", config: "[agent\n", shell: map[string]string{config.EnvOpenAIBaseURL: local}, wantLoad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := testHome(t, tt.config)
			env := testUnitEnv(tt.unit, tt.unread)
			lacking, err := LackingSettings(home, func(k string) string { return tt.shell[k] }, env)
			if (err != nil) != tt.wantLoad {
				t.Fatalf("error %v, want one: %v", err, tt.wantLoad)
			}
			var got []string
			for _, s := range lacking {
				got = append(got, s.Var)
				if s.What == "" || !strings.HasSuffix(s.Key, "_url") {
					t.Errorf("%s: what %q, config key %q", s.Var, s.What, s.Key)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lacking %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEnvSettingsCoverLoader: every variable config.Loader reads is a
// secret, an API URL, or LATCH_HOME (which the unit sets). A variable
// added to config without being added here fails this test: found by
// loading with a getenv that records what it is asked.
func TestEnvSettingsCoverLoader(t *testing.T) {
	known := map[string]bool{config.EnvHome: true, config.EnvAnthropicAPIKey: true, config.EnvOpenAIAPIKey: true}
	for _, p := range config.Platforms {
		for _, s := range p.Secrets {
			known[s.Env] = true
		}
	}
	for _, v := range EnvSettingVars() {
		known[v] = true
	}
	for _, provider := range []string{"anthropic", "openai", "none"} {
		home := testHome(t, "[agent]\nprovider = \""+provider+"\"\n")
		asked := map[string]bool{}
		l := config.Loader{Getenv: func(k string) string { asked[k] = true; return "" }}
		if _, err := l.HomeDir(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Load(home); err != nil {
			t.Fatal(err)
		}
		for k := range asked {
			if !known[k] {
				t.Errorf("provider %s: config reads %s, which neither EnvSecrets nor envSettings knows", provider, k)
			}
		}
	}
}

// testHome returns a new latch home whose config.toml is configText; with
// no text, it has none.
func testHome(t *testing.T, configText string) string {
	t.Helper()
	home := t.TempDir()
	if configText != "" {
		writeTestFile(t, filepath.Join(home, config.ConfigFile), configText)
	}
	return home
}

// testUnitEnv is a unit environment that sets the variables names; with
// unread, it also has an EnvironmentFile= that could not be read.
func testUnitEnv(names []string, unread bool) UnitEnv {
	env := UnitEnv{names: map[string]bool{}}
	for _, n := range names {
		env.names[n] = true
	}
	if unread {
		env.Unread = []string{"/etc/latch.env"}
	}
	return env
}

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
