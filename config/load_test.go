package config

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	const home = homeVar
	type file = cfgFile
	runLoadTests(t, []loadCase{
		{name: "no config file", want: func(*Config) {}},
		{name: "empty config file", config: &file{content: "", mode: 0o600}, want: func(*Config) {}},
		{name: "template", config: &file{content: string(template), mode: 0o600}, want: func(*Config) {}},
		{
			name: "every key",
			config: &file{mode: 0o600, content: `
[telegram]
token = "` + testToken + `"
api_url = "http://127.0.0.1:8081/"
allow_groups = true
[agent]
workspace = "/srv/work"
bash_timeout = "5m"
`},
			want: func(c *Config) {
				c.Telegram = TelegramConfig{Token: testToken, TokenSource: SourceConfig,
					APIURL: "http://127.0.0.1:8081", AllowGroups: true, Verbosity: "normal", WebhookListen: "127.0.0.1:8443"}
				c.Agent.Workspace, c.Agent.BashTimeout = "/srv/work", 5*time.Minute
			},
		},
		{
			name:   "token is trimmed",
			config: &file{content: "[telegram]\ntoken = \"  " + testToken + "\\n\"\n", mode: 0o600},
			want: func(c *Config) {
				c.Telegram.Token, c.Telegram.TokenSource = testToken, SourceConfig
			},
		},
		{
			name:   "env token wins over config token",
			config: &file{content: "[telegram]\ntoken = \"1:file\"\n", mode: 0o600},
			env:    map[string]string{EnvTelegramToken: "2:env"},
			want:   func(c *Config) { c.Telegram.Token, c.Telegram.TokenSource = "2:env", SourceEnv },
		},
		{
			name:   "env token wins over token_file, which is then not read",
			config: &file{content: "[telegram]\ntoken_file = \"missing\"\n", mode: 0o600},
			env:    map[string]string{EnvTelegramToken: "2:env"},
			want: func(c *Config) {
				c.Telegram.Token, c.Telegram.TokenSource = "2:env", SourceEnv
				c.Telegram.TokenFile = filepath.Join(home, "missing")
			},
		},
		{
			name: "env token without config file",
			env:  map[string]string{EnvTelegramToken: testToken},
			want: func(c *Config) { c.Telegram.Token, c.Telegram.TokenSource = testToken, SourceEnv },
		},
		{
			name:    "env token of whitespace",
			env:     map[string]string{EnvTelegramToken: " \t"},
			wantErr: []string{"LATCH_TELEGRAM_TOKEN: is only whitespace"},
		},
		{
			name:   "env api url wins over config",
			config: &file{content: "[telegram]\napi_url = \"https://file.example\"\n", mode: 0o600},
			env:    map[string]string{EnvTelegramAPIURL: "http://localhost:9000/"},
			want:   func(c *Config) { c.Telegram.APIURL = "http://localhost:9000" },
		},
		{
			name:   "relative token_file is relative to home, content trimmed",
			config: &file{content: "[telegram]\ntoken_file = \"tok/bot\"\n", mode: 0o644},
			files:  []file{{name: "tok/bot", content: "\n " + testToken + " \n", mode: 0o600}},
			want: func(c *Config) {
				c.Telegram.Token, c.Telegram.TokenSource = testToken, SourceTokenFile
				c.Telegram.TokenFile = filepath.Join(home, "tok/bot")
			},
		},
		{
			name:    "empty token_file",
			config:  &file{content: "[telegram]\ntoken_file = \"bot\"\n", mode: 0o600},
			files:   []file{{name: "bot", content: " \n\t", mode: 0o600}},
			wantErr: []string{"token file $HOME/bot is empty"},
		},
		{
			name:    "group-readable token_file",
			config:  &file{content: "[telegram]\ntoken_file = \"bot\"\n", mode: 0o600},
			files:   []file{{name: "bot", content: testToken, mode: 0o640}},
			wantErr: []string{"token file $HOME/bot", "mode 0640", "chmod 600 $HOME/bot"},
		},
		{
			name:    "world-readable token_file",
			config:  &file{content: "[telegram]\ntoken_file = \"bot\"\n", mode: 0o600},
			files:   []file{{name: "bot", content: testToken, mode: 0o604}},
			wantErr: []string{"mode 0604", "chmod 600 $HOME/bot"},
		},
		{
			name:    "missing token_file",
			config:  &file{content: "[telegram]\ntoken_file = \"nope\"\n", mode: 0o600},
			wantErr: []string{"telegram.token_file", "$HOME/nope", "no such file"},
		},
		{
			name:    "token and token_file",
			config:  &file{content: "[telegram]\ntoken = \"1:a\"\ntoken_file = \"bot\"\n", mode: 0o600},
			wantErr: []string{"$HOME/config.toml: telegram.token: token and token_file are both set"},
		},
		{
			name:    "unknown key",
			config:  &file{content: "[telegram]\nallow_group = true\n", mode: 0o600},
			wantErr: []string{`$HOME/config.toml: unknown key "telegram.allow_group" (did you mean "telegram.allow_groups"?)`},
		},
		{
			name:    "unknown table reported once",
			config:  &file{content: "[discrod]\ntoken = \"x\"\nfoo = 1\n", mode: 0o600},
			wantErr: []string{`$HOME/config.toml: unknown key "discrod"`},
			notErr:  []string{"discrod.token", "foo"},
		},
		{
			name:    "several unknown keys",
			config:  &file{content: "verbose = true\n[agent]\nbash-timeout = \"1s\"\n", mode: 0o600},
			wantErr: []string{`unknown keys "verbose", "agent.bash-timeout" (did you mean "agent.bash_timeout"?)`},
		},
		{
			// The decoder itself would fill Token from "Token".
			name:    "key spelt in another case",
			config:  &file{content: "[telegram]\nAllow_Groups = true\n", mode: 0o600},
			wantErr: []string{`unknown key "telegram.Allow_Groups" (did you mean "telegram.allow_groups"?)`},
		},
		{
			name:    "key with a dot in quotes",
			config:  &file{content: "\"telegram.allow_groups\" = true\n", mode: 0o600},
			wantErr: []string{`unknown key "telegram.allow_groups"`},
		},
		{
			name:    "bool as string",
			config:  &file{content: "[telegram]\nallow_groups = \"yes\"\n", mode: 0o600},
			wantErr: []string{"$HOME/config.toml: line 2", `"telegram.allow_groups"`, "type string", "boolean"},
		},
		{
			name:    "duration as integer",
			config:  &file{content: "[agent]\n\nbash_timeout = 60\n", mode: 0o600},
			wantErr: []string{"line 3", `"agent.bash_timeout"`, `duration string such as "60s"`},
		},
		{
			name:    "table as value",
			config:  &file{content: "telegram = 1\n", mode: 0o600},
			wantErr: []string{"line 1", `"telegram"`, "expected a table but found int64"},
		},
		{
			name:    "syntax error",
			config:  &file{content: "[agent]\nworkspace = \"x\"\nbash_timeout = \n", mode: 0o600},
			wantErr: []string{"$HOME/config.toml: line 3, column", `(last key "agent.bash_timeout")`},
		},
		{
			name:    "url without scheme",
			config:  &file{content: "[telegram]\napi_url = \"api.telegram.org\"\n", mode: 0o600},
			wantErr: []string{"$HOME/config.toml: telegram.api_url:", "absolute http:// or https://"},
		},
		{
			name:    "url with another scheme",
			config:  &file{content: "[telegram]\napi_url = \"ftp://api.telegram.org\"\n", mode: 0o600},
			wantErr: []string{"telegram.api_url:", "absolute http:// or https://"},
		},
		{
			name:    "url without host",
			config:  &file{content: "[telegram]\napi_url = \"https:///bot\"\n", mode: 0o600},
			wantErr: []string{"telegram.api_url:", "no host"},
		},
		{
			name:    "url with query",
			config:  &file{content: "[telegram]\napi_url = \"https://h.example/?a=1\"\n", mode: 0o600},
			wantErr: []string{"telegram.api_url:", "query or fragment"},
		},
		{
			name:    "url with password",
			config:  &file{content: "[telegram]\napi_url = \"https://u:hunter22@h.example\"\n", mode: 0o600},
			wantErr: []string{"telegram.api_url:", "user name or password"},
		},
		{
			name:    "unparsable url",
			config:  &file{content: "[telegram]\napi_url = \"http://h:port\"\n", mode: 0o600},
			wantErr: []string{"telegram.api_url:", "not a valid URL"},
		},
		{
			name:    "bad env url",
			env:     map[string]string{EnvTelegramAPIURL: "localhost:8081"},
			wantErr: []string{"LATCH_TELEGRAM_API_URL:", "absolute http:// or https://"},
		},
		{
			name:    "duration without unit",
			config:  &file{content: "[agent]\nbash_timeout = \"60\"\n", mode: 0o600},
			wantErr: []string{`agent.bash_timeout: "60" is not a duration`},
		},
		{
			name:    "zero duration",
			config:  &file{content: "[agent]\nbash_timeout = \"0s\"\n", mode: 0o600},
			wantErr: []string{`agent.bash_timeout: "0s" must be positive`},
		},
		{
			name:    "negative duration",
			config:  &file{content: "[agent]\nbash_timeout = \"-1s\"\n", mode: 0o600},
			wantErr: []string{"must be positive"},
		},
		{
			name:    "duration over a day",
			config:  &file{content: "[agent]\nbash_timeout = \"24h1s\"\n", mode: 0o600},
			wantErr: []string{"longer than the maximum, 24h0m0s"},
		},
		{
			name:   "duration of a day",
			config: &file{content: "[agent]\nbash_timeout = \"24h\"\n", mode: 0o600},
			want:   func(c *Config) { c.Agent.BashTimeout = 24 * time.Hour },
		},
		{
			name:   "relative workspace",
			config: &file{content: "[agent]\nworkspace = \"w/../work\"\n", mode: 0o600},
			want:   func(c *Config) { c.Agent.Workspace = filepath.Join(home, "work") },
		},
		{
			name:   "workspace in user home",
			config: &file{content: "[agent]\nworkspace = \"~/src\"\n", mode: 0o600},
			want:   func(c *Config) { c.Agent.Workspace = "$USER/src" },
		},
		{
			name:    "workspace of another user",
			config:  &file{content: "[agent]\nworkspace = \"~bob/src\"\n", mode: 0o600},
			wantErr: []string{"agent.workspace:", "only ~/ is supported"},
		},
		{
			name:    "workspace is home",
			config:  &file{content: "[agent]\nworkspace = \".\"\n", mode: 0o600},
			wantErr: []string{"agent.workspace: must not be or contain the latch home directory"},
		},
		{
			// The file tools would read config.toml, token and all.
			name:    "workspace holds home",
			config:  &file{content: "[agent]\nworkspace = \"..\"\n", mode: 0o600},
			wantErr: []string{"agent.workspace: must not be or contain the latch home directory"},
		},
		{
			name:    "token_file in the workspace",
			config:  &file{content: "[telegram]\ntoken_file = \"~/src/bot\"\n[agent]\nworkspace = \"~/src\"\n", mode: 0o600},
			files:   []file{{name: "$USER/src/bot", content: testToken, mode: 0o400}},
			wantErr: []string{"telegram.token_file: $USER/src/bot is inside agent.workspace"},
		},
		{
			name:    "api_key_file in the workspace",
			config:  &file{content: "[agent]\nworkspace = \"~/src\"\nprovider = \"anthropic\"\nmodel = \"claude-test\"\napi_key_file = \"~/src/sub/key\"\n", mode: 0o600},
			files:   []file{{name: "$USER/src/sub/key", content: "sk-test-0123456789", mode: 0o400}},
			wantErr: []string{"agent.api_key_file: $USER/src/sub/key is inside agent.workspace"},
		},
		{
			name:   "token_file in user home",
			config: &file{content: "[telegram]\ntoken_file = \"~/bot\"\n", mode: 0o600},
			files:  []file{{name: "$USER/bot", content: testToken, mode: 0o400}},
			want: func(c *Config) {
				c.Telegram.Token, c.Telegram.TokenSource = testToken, SourceTokenFile
				c.Telegram.TokenFile = "$USER/bot"
			},
		},
		{
			name:    "token with a space",
			config:  &file{content: "[telegram]\ntoken = \"123:abc def\"\n", mode: 0o600},
			wantErr: []string{"$HOME/config.toml: telegram.token: has a character", "the value is not shown"},
		},
		{
			name:    "token with a slash from the environment",
			env:     map[string]string{EnvTelegramToken: "123:abc/../x"},
			wantErr: []string{"LATCH_TELEGRAM_TOKEN: has a character", "the value is not shown"},
		},
		{
			name:    "all validation errors at once",
			config:  &file{content: "[telegram]\napi_url = \"x\"\n[agent]\nbash_timeout = \"0s\"\n", mode: 0o600},
			wantErr: []string{"telegram.api_url:", "agent.bash_timeout:"},
		},

		// Permissions of config.toml.
		{
			name:   "private config with token",
			config: &file{content: "[telegram]\ntoken = \"" + testToken + "\"\n", mode: 0o600},
			want:   func(c *Config) { c.Telegram.Token, c.Telegram.TokenSource = testToken, SourceConfig },
		},
		{
			name:   "read-only config with token",
			config: &file{content: "[telegram]\ntoken = \"" + testToken + "\"\n", mode: 0o400},
			want:   func(c *Config) { c.Telegram.Token, c.Telegram.TokenSource = testToken, SourceConfig },
		},
		{
			name:    "world-readable config with token",
			config:  &file{content: "[telegram]\ntoken = \"" + testToken + "\"\n", mode: 0o644},
			wantErr: []string{"$HOME/config.toml holds telegram.token", "mode 0644", "chmod 600 $HOME/config.toml"},
		},
		{
			name:    "group-readable config with token",
			config:  &file{content: "[telegram]\ntoken = \"" + testToken + "\"\n", mode: 0o640},
			wantErr: []string{"mode 0640", "chmod 600 $HOME/config.toml"},
		},
		{
			name:    "world-readable config with empty token key",
			config:  &file{content: "[telegram]\ntoken = \"\"\n", mode: 0o604},
			wantErr: []string{"holds telegram.token", "chmod 600 $HOME/config.toml"},
		},
		{
			name:    "world-readable config with token in another case",
			config:  &file{content: "[Telegram]\nTOKEN = \"" + testToken + "\"\n", mode: 0o644},
			wantErr: []string{"holds telegram.token", "chmod 600 $HOME/config.toml"},
		},
		{
			name:    "world-readable config with token and a type error",
			config:  &file{content: "[telegram]\ntoken = \"" + testToken + "\"\nallow_groups = 1\n", mode: 0o644},
			wantErr: []string{"holds telegram.token", "chmod 600 $HOME/config.toml"},
		},
		{
			name:   "world-readable config without token",
			config: &file{content: "[telegram]\nallow_groups = true\n", mode: 0o644},
			env:    map[string]string{EnvTelegramToken: testToken},
			want: func(c *Config) {
				c.Telegram.AllowGroups = true
				c.Telegram.Token, c.Telegram.TokenSource = testToken, SourceEnv
			},
		},
		{
			name:    "group-writable config without token",
			config:  &file{content: "[telegram]\nallow_groups = true\n", mode: 0o660},
			wantErr: []string{"can be changed by other users", "mode 0660", "chmod 600 $HOME/config.toml"},
		},
		{
			name:    "world-writable config without token",
			config:  &file{content: "", mode: 0o602},
			wantErr: []string{"can be changed by other users", "chmod 600 $HOME/config.toml"},
		},
	})
}

// TestLoadInsecureIsErrInsecure checks that permission refusals can be told
// apart from other errors.
func TestLoadInsecureIsErrInsecure(t *testing.T) {
	h := newHome(t)
	writeFile(t, filepath.Join(h, "config.toml"), "[telegram]\ntoken = \""+testToken+"\"\n", 0o644)
	_, err := testLoader(t, nil).Load(h)
	if !errors.Is(err, ErrInsecure) {
		t.Errorf("got %v, want an ErrInsecure", err)
	}
}

func TestLoadConfigOfAnotherUser(t *testing.T) {
	h := newHome(t)
	p := filepath.Join(h, "config.toml")
	writeFile(t, p, "", 0o600)
	chownOther(t, p)
	_, err := testLoader(t, nil).Load(h)
	checkErr(t, err, []string{p + " is owned by uid 4242"})
	if !errors.Is(err, ErrInsecure) {
		t.Errorf("got %v, want an ErrInsecure", err)
	}
}

func TestLoadTokenFileOfAnotherUser(t *testing.T) {
	h := newHome(t)
	writeFile(t, filepath.Join(h, "config.toml"), "[telegram]\ntoken_file = \"bot\"\n", 0o600)
	p := filepath.Join(h, "bot")
	writeFile(t, p, testToken, 0o600)
	chownOther(t, p)
	_, err := testLoader(t, nil).Load(h)
	checkErr(t, err, []string{p + " is owned by uid 4242"})
}

func TestLoadConfigSymlinks(t *testing.T) {
	t.Run("to a private file", func(t *testing.T) {
		h := newHome(t)
		target := filepath.Join(t.TempDir(), "real.toml")
		writeFile(t, target, "[telegram]\ntoken = \""+testToken+"\"\n", 0o600)
		if err := os.Symlink(target, filepath.Join(h, "config.toml")); err != nil {
			t.Fatal(err)
		}
		got, err := testLoader(t, nil).Load(h)
		checkErr(t, err, nil)
		if got.Telegram.Token != testToken {
			t.Errorf("token not read through the symlink")
		}
	})
	t.Run("to a readable file, judged by the target", func(t *testing.T) {
		h := newHome(t)
		target := filepath.Join(t.TempDir(), "real.toml")
		writeFile(t, target, "[telegram]\ntoken = \""+testToken+"\"\n", 0o644)
		if err := os.Symlink(target, filepath.Join(h, "config.toml")); err != nil {
			t.Fatal(err)
		}
		_, err := testLoader(t, nil).Load(h)
		checkErr(t, err, []string{"holds telegram.token", "mode 0644"})
	})
	t.Run("dangling", func(t *testing.T) {
		h := newHome(t)
		if err := os.Symlink(filepath.Join(h, "gone"), filepath.Join(h, "config.toml")); err != nil {
			t.Fatal(err)
		}
		_, err := testLoader(t, nil).Load(h)
		checkErr(t, err, []string{"config.toml is a symbolic link to a missing file"})
	})
	t.Run("directory", func(t *testing.T) {
		h := newHome(t)
		if err := os.Mkdir(filepath.Join(h, "config.toml"), 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := testLoader(t, nil).Load(h)
		checkErr(t, err, []string{"config.toml is not a regular file"})
	})
}

func TestLoadRelativeHome(t *testing.T) {
	h := newHome(t)
	t.Chdir(filepath.Dir(h))
	got, err := testLoader(t, nil).Load("latch")
	checkErr(t, err, nil)
	if got.Home != h || got.Agent.Workspace != filepath.Join(h, "workspace") {
		t.Errorf("got home %q workspace %q, want both under %q", got.Home, got.Agent.Workspace, h)
	}
}

// TestLoadErrorsNeverContainToken feeds common mistakes with a real-looking
// token or API key through Load and checks that no error repeats any part
// of it.
func TestLoadErrorsNeverContainToken(t *testing.T) {
	secret := testToken[strings.Index(testToken, ":")+1:]
	cfg := func(body string) string { return "[telegram]\n" + body + "\n" }
	// API keys: an OpenAI one, and one with the symbols other providers use.
	key := testOpenAIKey
	symKey := "or-v1/Ab3+xY9zQw=Ee.rr~TTuv8Kp2!Lm5Nq"
	agent := func(body string) string { return "[agent]\nprovider = \"openai\"\n" + body + "\n" }
	setKey := `api_key = "` + key + `"`
	tests := []struct {
		name, config string
		tokenFile    string // written as $HOME/bot; the config names it
		mode         os.FileMode
		env          map[string]string
		secret       string // what must not show; default the token's secret part
	}{
		{name: "unquoted token", config: cfg("token = " + testToken)},
		{name: "unquoted secret part", config: cfg("token = " + secret)},
		{name: "unterminated string", config: cfg(`token = "` + testToken)},
		{name: "unterminated literal string", config: cfg(`token = '` + testToken)},
		{name: "token on a line of its own", config: cfg(testToken)},
		{name: "secret on a line of its own", config: cfg(secret)},
		{name: "secret as a key", config: cfg(secret + " = 1")},
		{name: "token with colon as key", config: cfg(testToken + " = 1")},
		{name: "numeric token out of range", config: cfg("token = 12345678901234567890123456789")},
		{name: "token with leading zero", config: cfg("token = 0123456789012345678")},
		{name: "token after a float", config: cfg("token = 1.5" + secret)},
		{name: "bad escape", config: cfg(`token = "` + secret + `\q"`)},
		{name: "duplicate token", config: cfg(`token = "` + testToken + `"` + "\ntoken = \"" + testToken + `"`)},
		{name: "token in an array", config: cfg(`token = ["` + testToken + `"]`)},
		{name: "token with a space", config: cfg(`token = "` + secret[:10] + " " + secret[10:] + `"`)},
		{name: "token in api_url", config: cfg(`token = "` + testToken + `"` + "\napi_url = \"https://api.telegram.org/bot" + testToken + "?x\"")},
		{name: "readable config", config: cfg(`token = "` + testToken + `"`), mode: 0o644},
		{name: "token and token_file", config: cfg(`token = "` + testToken + `"` + "\ntoken_file = \"x\"")},
		{name: "bad token file", config: cfg(`token_file = "bot"`), tokenFile: secret + "/x"},
		{name: "readable token file", config: cfg(`token_file = "bot"`), tokenFile: testToken, mode: 0o644},
		{name: "bad env token", env: map[string]string{EnvTelegramToken: testToken + "\n" + testToken}},
		{name: "env token in env api url", env: map[string]string{
			EnvTelegramToken: testToken, EnvTelegramAPIURL: "https://x/bot" + testToken + "?y"}},

		// The API key, in config.toml.
		{name: "unquoted api key", config: agent("api_key = " + key), secret: key},
		{name: "unquoted api key with symbols", config: agent("api_key = " + symKey), secret: symKey},
		{name: "unterminated api key", config: agent(`api_key = "` + symKey), secret: symKey},
		{name: "unterminated literal api key", config: agent(`api_key = '` + key), secret: key},
		{name: "api key on a line of its own", config: agent(key), secret: key},
		{name: "api key with symbols on a line of its own", config: agent(symKey), secret: symKey},
		{name: "api key as a key", config: agent(key + " = 1"), secret: key},
		{name: "api key with a bad escape", config: agent(`api_key = "` + key + `\q"`), secret: key},
		{name: "duplicate api key", config: agent(setKey + "\n" + setKey), secret: key},
		{name: "api key in an array", config: agent(`api_key = ["` + key + `"]`), secret: key},
		{name: "api key with a space", config: agent(`api_key = "` + key[:12] + " " + key[12:] + `"`), secret: key},
		{name: "api key with a tab", config: agent(`api_key = "` + symKey[:12] + `\t` + symKey[12:] + `"`), secret: symKey},
		{name: "api key in base_url", config: agent(setKey + "\nbase_url = \"https://h/" + key + "?x\""), secret: key},
		{name: "api key as base_url user", config: agent(`base_url = "https://` + key + `@h/v1"`), secret: key},
		{name: "api key as base_url password", config: agent(`base_url = "https://u:` + symKey + `@h/v1"`), secret: symKey},
		{name: "readable config with api key", config: agent(setKey), mode: 0o644, secret: key},
		{name: "api key and api_key_file", config: agent(setKey + "\napi_key_file = \"x\""), secret: key},
		{name: "bad api key file", config: agent(`api_key_file = "bot"`), tokenFile: key[:12] + " " + key[12:], secret: key},
		{name: "readable api key file", config: agent(`api_key_file = "bot"`), tokenFile: symKey, mode: 0o644, secret: symKey},
		// Pasted on the wrong line, the key is not known to be one.
		{name: "api key as provider", config: "[agent]\nprovider = \"" + key + "\"\n", secret: key},
		{name: "api key with symbols as provider", config: "[agent]\nprovider = \"" + symKey + "\"\n", secret: symKey},
		{name: "api key as model", config: "[agent]\nmodel = \"" + key + " \"\n", secret: key},
		{name: "api key as a permission", config: "[agent.permissions]\nbash = \"" + key + "\"\n", secret: key},
		{name: "api key as a tool", config: "[agent.permissions]\n" + key + " = \"allow\"\n", secret: key},
		{name: "api key in fetch allow", config: "[agent.fetch]\nallow = [\"" + symKey + "\"]\n", secret: symKey},
		{name: "api key as a duration", config: "[agent]\nrequest_timeout = \"" + key + "\"\n", secret: key},
		{name: "api key as a number", config: "[agent]\nmax_tokens = \"" + key + "\"\n", secret: key},

		// The API key, in the environment.
		{name: "bad env api key", config: agent(""), env: map[string]string{EnvOpenAIAPIKey: key + "\n" + key}, secret: key},
		{name: "env api key in env base url", config: agent(""), env: map[string]string{
			EnvOpenAIAPIKey: key, EnvOpenAIBaseURL: "https://x/" + key + "?y"}, secret: key},
		{name: "other provider's env key in env base url", config: agent(""), env: map[string]string{
			EnvAnthropicAPIKey: symKey, EnvOpenAIBaseURL: "https://x/" + symKey + "?y"}, secret: symKey},
		{name: "env api key in config base_url", config: agent(`base_url = "https://h/` + key + `#f"`),
			env: map[string]string{EnvOpenAIAPIKey: key}, secret: key},
		{name: "api key in a base_url query", config: agent(`base_url = "https://h/v1?key=` + key + `"`), secret: key},
		{name: "api key in an api_url query", config: cfg(`api_url = "https://h/?key=` + symKey + `"`), secret: symKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHome(t)
			m := cmp.Or(tt.mode, 0o600)
			if tt.tokenFile != "" {
				writeFile(t, filepath.Join(h, "bot"), tt.tokenFile, m)
				m = 0o600
			}
			if tt.config != "" {
				writeFile(t, filepath.Join(h, "config.toml"), tt.config, m)
			}
			_, err := testLoader(t, tt.env).Load(h)
			if err == nil {
				t.Fatal("got no error, want one")
			}
			msg := err.Error()
			s := cmp.Or(tt.secret, secret)
			for i := 0; i+8 <= len(s); i++ {
				if part := s[i : i+8]; strings.Contains(msg, part) {
					t.Fatalf("error repeats %q of the secret:\n%s", part, msg)
				}
			}
		})
	}
}

// TestWorkspaceHoldingHomeThroughSymlink: a workspace that reaches the
// latch home only through a symlink is refused like one that holds it.
func TestWorkspaceHoldingHomeThroughSymlink(t *testing.T) {
	h := newHome(t)
	l := testLoader(t, nil)
	userHome, _ := l.UserHomeDir()
	if err := os.Symlink(filepath.Dir(h), filepath.Join(userHome, "link")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(h, "config.toml"), "[agent]\nworkspace = \"~/link\"\n", 0o600)
	_, err := l.Load(h)
	checkErr(t, err, []string{"agent.workspace: must not be or contain the latch home directory"})
}
