package service

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/latchd/latch/config"
)

// EnvSecret is a secret that latch took from an environment variable. A
// service has only the environment its unit and its service manager give
// it, not the one of the shell that installed it.
type EnvSecret struct {
	Var     string // the variable, such as LATCH_TELEGRAM_TOKEN
	What    string // what it holds, for messages
	FileKey string // the config.toml setting that reads it from a file instead
}

// EnvSecrets lists the secrets cfg took from environment variables.
func EnvSecrets(cfg *config.Config) []EnvSecret {
	var out []EnvSecret
	for _, p := range config.Platforms {
		for _, s := range p.Secrets {
			if s.Env != "" && s.Env == p.Settings(cfg).TokenSource && s.Value(cfg) != "" {
				out = append(out, EnvSecret{s.Env, s.What, s.FileKey})
			}
		}
	}
	// Slack's second secret, the app-level token, has a source of its own
	// (the row's settings name the bot token's).
	if cfg.Slack.AppTokenSource == config.EnvSlackAppToken {
		out = append(out, EnvSecret{config.EnvSlackAppToken, "the Slack app-level token", "[slack] app_token_file"})
	}
	if s := cfg.Agent.APIKeySource; s == config.EnvAnthropicAPIKey || s == config.EnvOpenAIAPIKey {
		out = append(out, EnvSecret{s, "the model provider's API key", "[agent] api_key_file"})
	}
	return out
}

// LackingSecrets loads the config in home as latch.service will see it and
// returns the secrets the service would run without: those that, with
// getenv as the environment, come from a variable that env does not set and
// that config.toml does not supply otherwise (token_file, api_key_file).
// The error is the config's own, when it does not load with getenv.
//
// When env has files it could not read, they may set anything: nothing is
// reported as lacking.
func LackingSecrets(home string, getenv func(string) string, env UnitEnv) ([]EnvSecret, error) {
	cfg, err := config.Loader{Getenv: getenv}.Load(home)
	if err != nil {
		return nil, err
	}
	var missing []EnvSecret
	hidden := make(map[string]bool)
	for _, s := range EnvSecrets(cfg) {
		if !env.Sets(s.Var) {
			missing = append(missing, s)
			hidden[s.Var] = true
		}
	}
	if len(missing) == 0 || len(env.Unread) > 0 {
		return nil, nil
	}
	svc, err := loadWithout(home, getenv, hidden)
	if err != nil {
		// Without the variables the config does not even load (a token
		// file that is missing, say): the service lacks all of them.
		return missing, nil
	}
	var lacking []EnvSecret
	for _, s := range missing {
		if !hasSecret(svc, s.Var) {
			lacking = append(lacking, s)
		}
	}
	return lacking, nil
}

// loadWithout loads the config in home as it would with getenv, but with
// the variables in hidden unset: as the service, which lacks them, sees it.
func loadWithout(home string, getenv func(string) string, hidden map[string]bool) (*config.Config, error) {
	return config.Loader{Getenv: func(k string) string {
		if hidden[k] {
			return ""
		}
		return getenv(k)
	}}.Load(home)
}

// hasSecret reports whether cfg holds the secret that variable v supplies.
func hasSecret(cfg *config.Config, v string) bool {
	for _, p := range config.Platforms {
		for _, s := range p.Secrets {
			if s.Env == v {
				return s.Value(cfg) != ""
			}
		}
	}
	return cfg.Agent.APIKey != ""
}

// EnvSetting is a setting that is not a secret but that latch took from an
// environment variable: where the gateways and the model are reached. A
// service that lacks it does not fail: it quietly talks to another server,
// config.toml's or the default, and sends it what the owner meant for
// their own (a local Bot API server, a local model): the chat, and the
// token or API key with it.
type EnvSetting struct {
	Var  string // the variable, such as OPENAI_BASE_URL
	What string // what it sets, for messages
	Key  string // the config.toml setting that supplies it instead, such as "[agent] base_url"
}

// envSetting is an EnvSetting with what it decides in a loaded config.
type envSetting struct {
	EnvSetting
	// applies reports whether the setting matters for the shell's config:
	// the API URL of a gateway that is off is never used.
	applies func(*config.Config) bool
	// value is the setting's effective value in a config.
	value func(*config.Config) string
}

// envSettings lists every variable config.Loader reads that is neither a
// secret (see EnvSecrets) nor LATCH_HOME, which the unit sets itself.
func envSettings() []envSetting {
	var out []envSetting
	for _, p := range config.Platforms {
		out = append(out, envSetting{EnvSetting{p.APIURLEnv, strings.TrimPrefix(p.APIName, "the ") + " server", "[" + p.Name + "] api_url"},
			func(c *config.Config) bool { return p.Settings(c).Enabled() },
			func(c *config.Config) string { return p.Settings(c).APIURL }})
	}
	always := func(*config.Config) bool { return true }
	// The effective URL: a shell that names the provider's public API
	// changes nothing for a service that uses it by default.
	agentURL := func(c *config.Config) string { return c.Agent.ModelURL() }
	// Only the chosen provider's variable is read: the other one changes
	// nothing, and so is never reported.
	return append(out,
		envSetting{EnvSetting{config.EnvAnthropicBaseURL, "model API server", "[agent] base_url"}, always, agentURL},
		envSetting{EnvSetting{config.EnvOpenAIBaseURL, "model API server", "[agent] base_url"}, always, agentURL})
}

// EnvSettingVars names the variables that LackingSettings looks at.
func EnvSettingVars() []string {
	var out []string
	for _, s := range envSettings() {
		out = append(out, s.Var)
	}
	return out
}

// LackingSettings loads the config in home as latch.service will see it and
// returns the settings (API endpoints) that would differ in the service:
// those that, with getenv as the environment, come from a variable that env
// does not set, where config.toml does not give the same value (it may
// set it itself, or win over the variable). The error is the config's own,
// when it does not load with getenv.
//
// When env has files it could not read, they may set anything: nothing is
// reported as lacking.
func LackingSettings(home string, getenv func(string) string, env UnitEnv) ([]EnvSetting, error) {
	shell, err := config.Loader{Getenv: getenv}.Load(home)
	if err != nil {
		return nil, err
	}
	if len(env.Unread) > 0 {
		return nil, nil
	}
	var missing []envSetting
	hidden := make(map[string]bool)
	for _, s := range envSettings() {
		if getenv(s.Var) != "" && !env.Sets(s.Var) && s.applies(shell) {
			missing = append(missing, s)
			hidden[s.Var] = true
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	svc, err := loadWithout(home, getenv, hidden)
	var lacking []EnvSetting
	for _, s := range missing {
		// Without the variables config.toml alone decides; it loaded
		// before, so it should load now. If it does not, the service
		// would not get the shell's settings either.
		if err != nil || s.value(svc) != s.value(shell) {
			lacking = append(lacking, s.EnvSetting)
		}
	}
	return lacking, nil
}

// UnitEnv is what systemd puts into latch.service's environment, by name:
// its Environment= settings (drop-ins included), the variables its
// EnvironmentFile= files set, and the service manager's own environment
// (environment.d, systemctl set-environment or import-environment).
type UnitEnv struct {
	names map[string]bool
	// Unread lists the EnvironmentFile= files that could not be read.
	Unread []string
}

// Sets reports whether the environment sets the variable name.
func (e UnitEnv) Sets(name string) bool { return e.names[name] }

// maxEnvFile bounds what is read of an EnvironmentFile=.
const maxEnvFile = 1 << 20

// Environment asks systemd which variables latch.service gets. Only names
// are kept: the values may be secrets. A unit systemd does not know has
// only the service manager's environment. The error is ErrNoSystemd when
// systemctl is missing, or systemctl's failure.
func (m *Manager) Environment(ctx context.Context) (UnitEnv, error) {
	env := UnitEnv{names: make(map[string]bool)}
	var show bytes.Buffer
	err := m.runner()(ctx, Command{
		Name: "systemctl", Args: m.scope("show", UnitName, "-p", "Environment", "-p", "EnvironmentFiles"),
		Stdout: &show, Stderr: io.Discard,
	})
	if err != nil {
		return env, err
	}
	for line := range strings.Lines(show.String()) {
		line = strings.TrimRight(line, "\n")
		if v, ok := strings.CutPrefix(line, "Environment="); ok {
			for _, w := range showWords(v) {
				env.add(w)
			}
		} else if v, ok := strings.CutPrefix(line, "EnvironmentFiles="); ok {
			path, _, _ := strings.Cut(v, " (ignore_errors=")
			if err := env.addFile(path); err != nil {
				env.Unread = append(env.Unread, path)
			}
		}
	}
	var manager bytes.Buffer
	err = m.runner()(ctx, Command{Name: "systemctl", Args: m.scope("show-environment"), Stdout: &manager, Stderr: io.Discard})
	if err != nil {
		return env, err
	}
	for line := range strings.Lines(manager.String()) {
		env.add(line)
	}
	return env, nil
}

// add records the name of a NAME=value assignment.
func (e UnitEnv) add(assignment string) {
	if name, _, ok := strings.Cut(assignment, "="); ok && name != "" {
		e.names[strings.TrimSpace(name)] = true
	}
}

// addFile records the names an EnvironmentFile= sets: one NAME=value a
// line, # and ; starting comments (systemd.exec(5)).
func (e UnitEnv) addFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // systemd refuses to start the unit, or ignores it with "-"
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxEnvFile))
	sc.Buffer(nil, maxEnvFile)
	for sc.Scan() {
		line := strings.TrimLeft(sc.Text(), " \t")
		if line != "" && line[0] != '#' && line[0] != ';' {
			e.add(line)
		}
	}
	return sc.Err()
}

// showWords splits a list property as systemctl show prints it: words
// separated by spaces, each double-quoted with backslash escapes when it
// needs quoting.
func showWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted && c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
		case c == '"':
			quoted, inWord = !quoted, true
		case c == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
			}
			w.Reset()
			inWord = false
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}
