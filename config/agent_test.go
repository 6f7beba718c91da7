package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// agentFile is a private config.toml with body in the [agent] table.
func agentFile(body string) *cfgFile {
	return &cfgFile{content: "[agent]\n" + body + "\n", mode: 0o600}
}

func TestAgentDefaults(t *testing.T) {
	got, err := testLoader(t, nil).Load(newHome(t))
	checkErr(t, err, nil)
	a := got.Agent
	if a.Provider != "none" || a.Model != "" || a.BaseURL != "" || a.APIKey != "" || a.APIKeySource != "" {
		t.Errorf("provider settings = %+v, want provider none and nothing else", a)
	}
	if a.MaxTokens != 4096 || a.MaxSteps != 25 || a.RequestTimeout != 5*time.Minute ||
		a.ContextBudget != 100000 || a.ApprovalTimeout != 10*time.Minute {
		t.Errorf("limits = %+v, want 4096 tokens, 25 steps, 5m, 100000, 10m", a)
	}
	wantPerms := map[string]string{
		"read_file": "allow", "list_files": "allow", "grep": "allow",
		"write_file": "ask", "edit_file": "ask", "bash": "ask", "fetch": "ask", "send_file": "ask", "schedule": "ask",
	}
	if !reflect.DeepEqual(a.Permissions, wantPerms) {
		t.Errorf("Permissions = %v, want %v", a.Permissions, wantPerms)
	}
	if a.FetchAllow != nil {
		t.Errorf("FetchAllow = %v, want nil", a.FetchAllow)
	}
	// The map is the caller's: changing it must not change the defaults.
	a.Permissions["bash"] = "allow"
	if DefaultPermissions()["bash"] != "ask" {
		t.Error("DefaultPermissions shares its map")
	}
}

func TestLoadAgent(t *testing.T) {
	const home = homeVar
	type file = cfgFile
	anthropic := func(c *Config) { c.Agent.Provider, c.Agent.Model = "anthropic", "claude-sonnet-4-5" }
	openai := func(c *Config) { c.Agent.Provider, c.Agent.Model = "openai", "gpt-4o-mini" }
	bothKeys := map[string]string{EnvAnthropicAPIKey: testAnthropicKey, EnvOpenAIAPIKey: testOpenAIKey}
	runLoadTests(t, []loadCase{
		{
			name: "every key",
			config: &file{mode: 0o600, content: `
[agent]
provider = "openai"
model = "llama3.1:8b"
base_url = "http://localhost:11434/v1/"
api_key = "` + testOpenAIKey + `"
max_tokens = 8000
max_steps = 40
request_timeout = "15m"
context_budget = 64000
approval_timeout = "1h"
[agent.permissions]
bash = "allow"
fetch = "deny"
read_file = "ask"
[agent.fetch]
allow = ["192.168.1.0/24", "10.0.0.5", "fd00::/8", "::1"]
`},
			want: func(c *Config) {
				a := &c.Agent
				a.Provider, a.Model, a.BaseURL = "openai", "llama3.1:8b", "http://localhost:11434/v1"
				a.APIKey, a.APIKeySource = testOpenAIKey, SourceAPIKey
				a.MaxTokens, a.MaxSteps, a.RequestTimeout = 8000, 40, 15*time.Minute
				a.ContextBudget, a.ApprovalTimeout = 64000, time.Hour
				a.Permissions["bash"], a.Permissions["fetch"], a.Permissions["read_file"] = "allow", "deny", "ask"
				a.FetchAllow = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("10.0.0.5/32"),
					netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("::1/128")}
			},
		},

		// Provider and model.
		{name: "anthropic without a key still loads", config: agentFile(`provider = "anthropic"`), want: anthropic},
		{name: "openai without a key still loads", config: agentFile(`provider = "openai"`), want: openai},
		{name: "empty provider is none", config: agentFile(`provider = ""`), want: func(*Config) {}},
		{name: "model given", config: agentFile("provider = \"anthropic\"\nmodel = \"claude-opus-4-1\""),
			want: func(c *Config) { c.Agent.Provider, c.Agent.Model = "anthropic", "claude-opus-4-1" }},
		{name: "provider in another case", config: agentFile(`provider = "Anthropic"`),
			wantErr: []string{`$HOME/config.toml: agent.provider: "Anthropic" is not a provider; use "anthropic", "openai", "claude-code", "codex" or "none"`}},
		{name: "unknown provider", config: agentFile(`provider = "claude"`),
			wantErr: []string{`agent.provider: "claude" is not a provider`}},
		{name: "model with a space", config: agentFile("provider = \"openai\"\nmodel = \"gpt 4o\""),
			wantErr: []string{"agent.model: has a space or a control character"}},
		{
			name:   "none ignores what is set for a provider, and reads no key file",
			config: agentFile("provider = \"none\"\nmodel = \"m\"\nbase_url = \"http://h:1\"\napi_key_file = \"missing\""),
			env:    bothKeys,
			want:   func(*Config) {},
		},
		{
			name:   "none still checks what is set",
			config: agentFile("base_url = \"h:1\"\napi_key = \"a b\""),
			wantErr: []string{"agent.base_url:", "absolute http:// or https://",
				"agent.api_key: has a character an API key never has", "the value is not shown"},
		},

		// Environment fallbacks, each only for its own provider.
		{name: "none reads no key from the environment", env: bothKeys, want: func(*Config) {}},
		{
			name:   "anthropic key from the environment",
			config: agentFile(`provider = "anthropic"`),
			env:    bothKeys,
			want: func(c *Config) {
				anthropic(c)
				c.Agent.APIKey, c.Agent.APIKeySource = testAnthropicKey, "ANTHROPIC_API_KEY"
			},
		},
		{
			name:   "openai key from the environment",
			config: agentFile(`provider = "openai"`),
			env:    bothKeys,
			want: func(c *Config) {
				openai(c)
				c.Agent.APIKey, c.Agent.APIKeySource = testOpenAIKey, "OPENAI_API_KEY"
			},
		},
		{
			name:   "anthropic does not take OPENAI_API_KEY",
			config: agentFile(`provider = "anthropic"`),
			env:    map[string]string{EnvOpenAIAPIKey: testOpenAIKey},
			want:   anthropic,
		},
		{
			name:   "openai does not take ANTHROPIC_API_KEY",
			config: agentFile(`provider = "openai"`),
			env:    map[string]string{EnvAnthropicAPIKey: testAnthropicKey},
			want:   openai,
		},
		{
			name:   "env key is trimmed",
			config: agentFile(`provider = "openai"`),
			env:    map[string]string{EnvOpenAIAPIKey: " " + testOpenAIKey + "\n"},
			want: func(c *Config) {
				openai(c)
				c.Agent.APIKey, c.Agent.APIKeySource = testOpenAIKey, "OPENAI_API_KEY"
			},
		},
		{
			name:   "base url from the environment, each only for its own provider",
			config: agentFile(`provider = "openai"`),
			env:    map[string]string{EnvOpenAIBaseURL: "http://localhost:8000/v1/", EnvAnthropicBaseURL: "https://proxy.example"},
			want:   func(c *Config) { openai(c); c.Agent.BaseURL = "http://localhost:8000/v1" },
		},
		{
			name:    "bad base url from the environment",
			config:  agentFile(`provider = "anthropic"`),
			env:     map[string]string{EnvAnthropicBaseURL: "proxy.example"},
			wantErr: []string{"ANTHROPIC_BASE_URL:", "absolute http:// or https://"},
		},
		{
			name:    "env key of whitespace",
			config:  agentFile(`provider = "anthropic"`),
			env:     map[string]string{EnvAnthropicAPIKey: " \t"},
			wantErr: []string{"ANTHROPIC_API_KEY: is only whitespace"},
		},
		{
			name:    "env key with a space",
			config:  agentFile(`provider = "openai"`),
			env:     map[string]string{EnvOpenAIAPIKey: testOpenAIKey[:20] + " " + testOpenAIKey[20:]},
			wantErr: []string{"OPENAI_API_KEY: has a character an API key never has", "the value is not shown"},
		},
		{
			name:   "a bad key of the other provider is not read",
			config: agentFile(`provider = "openai"`),
			env:    map[string]string{EnvAnthropicAPIKey: " \t", EnvAnthropicBaseURL: "nonsense"},
			want:   openai,
		},

		// config.toml wins over the environment.
		{
			name:   "file key beats env key",
			config: agentFile("provider = \"anthropic\"\napi_key = \"" + testAnthropicKey + "\""),
			env:    map[string]string{EnvAnthropicAPIKey: "sk-ant-from-env-0000000000"},
			want: func(c *Config) {
				anthropic(c)
				c.Agent.APIKey, c.Agent.APIKeySource = testAnthropicKey, SourceAPIKey
			},
		},
		{
			name:   "key file beats env key",
			config: agentFile("provider = \"anthropic\"\napi_key_file = \"keys/anthropic\""),
			files:  []file{{name: "keys/anthropic", content: testAnthropicKey + "\n", mode: 0o600}},
			env:    map[string]string{EnvAnthropicAPIKey: "sk-ant-from-env-0000000000"},
			want: func(c *Config) {
				anthropic(c)
				c.Agent.APIKey, c.Agent.APIKeySource = testAnthropicKey, SourceAPIKeyFile
				c.Agent.APIKeyFile = filepath.Join(home, "keys/anthropic")
			},
		},
		{
			name:   "file base url beats env",
			config: agentFile("provider = \"openai\"\nbase_url = \"https://openrouter.ai/api/v1\""),
			env:    map[string]string{EnvOpenAIBaseURL: "http://localhost:8000/v1"},
			want:   func(c *Config) { openai(c); c.Agent.BaseURL = "https://openrouter.ai/api/v1" },
		},
		{
			name:   "empty api_key lets the environment fill in",
			config: agentFile("provider = \"openai\"\napi_key = \"\"\napi_key_file = \"\""),
			env:    map[string]string{EnvOpenAIAPIKey: testOpenAIKey},
			want: func(c *Config) {
				openai(c)
				c.Agent.APIKey, c.Agent.APIKeySource = testOpenAIKey, "OPENAI_API_KEY"
			},
		},

		// The API key in config.toml and in a key file.
		{
			name:   "key with symbols and a short key",
			config: agentFile("provider = \"openai\"\napi_key = \" or/v1+Ab3=Cd.Ef~Gh!Ij#Kl$Mn%Op&Qr*St \""),
			want: func(c *Config) {
				openai(c)
				c.Agent.APIKey, c.Agent.APIKeySource = "or/v1+Ab3=Cd.Ef~Gh!Ij#Kl$Mn%Op&Qr*St", SourceAPIKey
			},
		},
		{
			name:    "key of whitespace",
			config:  agentFile("provider = \"openai\"\napi_key = \"  \""),
			wantErr: []string{"agent.api_key: is only whitespace"},
		},
		{
			name:    "key with a non-ASCII character",
			config:  agentFile("provider = \"openai\"\napi_key = \"" + testOpenAIKey + "…\""),
			wantErr: []string{"agent.api_key: has a character an API key never has", "the value is not shown"},
		},
		{
			name:    "api_key and api_key_file",
			config:  agentFile("api_key = \"" + testOpenAIKey + "\"\napi_key_file = \"key\""),
			wantErr: []string{"$HOME/config.toml: agent.api_key: api_key and api_key_file are both set"},
		},
		{
			name:   "key file in user home",
			config: agentFile("provider = \"openai\"\napi_key_file = \"~/.openai\""),
			files:  []file{{name: "$USER/.openai", content: " " + testOpenAIKey + " \n", mode: 0o400}},
			want: func(c *Config) {
				openai(c)
				c.Agent.APIKey, c.Agent.APIKeySource, c.Agent.APIKeyFile = testOpenAIKey, SourceAPIKeyFile, "$USER/.openai"
			},
		},
		{
			name:    "group-readable key file",
			config:  agentFile("provider = \"openai\"\napi_key_file = \"key\""),
			files:   []file{{name: "key", content: testOpenAIKey, mode: 0o640}},
			wantErr: []string{"API key file $HOME/key is open to other users (mode 0640); fix it with: chmod 600 $HOME/key"},
		},
		{
			name:    "world-readable key file",
			config:  agentFile("provider = \"anthropic\"\napi_key_file = \"key\""),
			files:   []file{{name: "key", content: testAnthropicKey, mode: 0o604}},
			wantErr: []string{"mode 0604", "chmod 600 $HOME/key"},
		},
		{
			name:    "empty key file",
			config:  agentFile("provider = \"openai\"\napi_key_file = \"key\""),
			files:   []file{{name: "key", content: "\n", mode: 0o600}},
			wantErr: []string{"API key file $HOME/key is empty"},
		},
		{
			name:    "missing key file",
			config:  agentFile("provider = \"openai\"\napi_key_file = \"nope\""),
			wantErr: []string{"agent.api_key_file:", "$HOME/nope", "no such file"},
		},
		{
			name:    "key file with two lines",
			config:  agentFile("provider = \"openai\"\napi_key_file = \"key\""),
			files:   []file{{name: "key", content: testOpenAIKey + "\n" + testOpenAIKey + "\n", mode: 0o600}},
			wantErr: []string{"API key file $HOME/key: has a character an API key never has"},
		},
		{
			name:    "key file of another user",
			config:  agentFile("api_key_file = \"~bob/key\""),
			wantErr: []string{"agent.api_key_file:", "only ~/ is supported"},
		},

		// Permissions of a config.toml that holds an API key.
		{
			name:   "read-only config with api key",
			config: &file{content: "[agent]\nprovider = \"openai\"\napi_key = \"" + testOpenAIKey + "\"\n", mode: 0o400},
			want: func(c *Config) {
				openai(c)
				c.Agent.APIKey, c.Agent.APIKeySource = testOpenAIKey, SourceAPIKey
			},
		},
		{
			name:    "world-readable config with api key",
			config:  &file{content: "[agent]\napi_key = \"" + testOpenAIKey + "\"\n", mode: 0o644},
			wantErr: []string{"$HOME/config.toml holds agent.api_key and is open to other users (mode 0644); fix it with: chmod 600 $HOME/config.toml"},
		},
		{
			name:    "group-readable config with api key and provider none",
			config:  &file{content: "[agent]\nprovider = \"none\"\napi_key = \"" + testOpenAIKey + "\"\n", mode: 0o640},
			wantErr: []string{"holds agent.api_key", "mode 0640"},
		},
		{
			name:    "world-readable config with empty api key",
			config:  &file{content: "[agent]\napi_key = \"\"\n", mode: 0o604},
			wantErr: []string{"holds agent.api_key", "chmod 600 $HOME/config.toml"},
		},
		{
			name:    "world-readable config with api key in another case",
			config:  &file{content: "[Agent]\nAPI_KEY = \"" + testOpenAIKey + "\"\n", mode: 0o644},
			wantErr: []string{"holds agent.api_key"},
		},
		{
			name:    "world-readable config with token and api key",
			config:  &file{content: "[telegram]\ntoken = \"" + testToken + "\"\n[agent]\napi_key = \"" + testOpenAIKey + "\"\n", mode: 0o644},
			wantErr: []string{"holds telegram.token and agent.api_key"},
		},
		{
			name:    "world-readable config with api key and a type error",
			config:  &file{content: "[agent]\napi_key = \"" + testOpenAIKey + "\"\nmax_steps = \"9\"\n", mode: 0o644},
			wantErr: []string{"holds agent.api_key"},
		},
		{
			name:   "world-readable config with key file, key from env",
			config: &file{content: "[agent]\nprovider = \"anthropic\"\n", mode: 0o644},
			env:    bothKeys,
			want: func(c *Config) {
				anthropic(c)
				c.Agent.APIKey, c.Agent.APIKeySource = testAnthropicKey, "ANTHROPIC_API_KEY"
			},
		},
		{
			name:    "base url with a password",
			config:  agentFile("provider = \"openai\"\nbase_url = \"https://u:hunter22@h.example/v1\""),
			wantErr: []string{"agent.base_url:", "user name or password"},
			notErr:  []string{"hunter22"},
		},
		{
			name:    "base url with a query",
			config:  agentFile("provider = \"openai\"\nbase_url = \"https://h.example/v1?key=abc\""),
			wantErr: []string{"agent.base_url:", "query or fragment"},
		},
	})
}

func TestLoadAgentPermissions(t *testing.T) {
	perms := func(body string) *cfgFile {
		return &cfgFile{content: "[agent.permissions]\n" + body + "\n", mode: 0o600}
	}
	runLoadTests(t, []loadCase{
		{
			name:   "every tool",
			config: perms("read_file = \"deny\"\nlist_files = \"ask\"\ngrep = \"deny\"\nwrite_file = \"allow\"\nedit_file = \"deny\"\nbash = \"deny\"\nfetch = \"allow\"\nsend_file = \"allow\""),
			want: func(c *Config) {
				c.Agent.Permissions = map[string]string{
					"read_file": "deny", "list_files": "ask", "grep": "deny", "write_file": "allow",
					"edit_file": "deny", "bash": "deny", "fetch": "allow", "send_file": "allow", "schedule": "ask",
				}
			},
		},
		{name: "empty table", config: perms(""), want: func(*Config) {}},
		{name: "empty value means the default", config: perms(`bash = ""`), want: func(*Config) {}},
		{name: "inline table", config: agentFile(`permissions = { bash = "deny" }`),
			want: func(c *Config) { c.Agent.Permissions["bash"] = "deny" }},
		{name: "dotted key", config: agentFile(`permissions.grep = "ask"`),
			want: func(c *Config) { c.Agent.Permissions["grep"] = "ask" }},
		{name: "misspelt tool", config: perms(`bsh = "allow"`),
			wantErr: []string{`$HOME/config.toml: unknown key "agent.permissions.bsh" (did you mean "agent.permissions.bash"?)`}},
		{name: "unknown tool", config: perms(`shell = "deny"`),
			wantErr: []string{`unknown key "agent.permissions.shell" (the tools are bash, edit_file, fetch, grep, list_files, read_file, schedule, send_file, write_file)`}},
		{name: "tool in another case", config: perms(`Bash = "deny"`),
			wantErr: []string{`unknown key "agent.permissions.Bash" (did you mean "agent.permissions.bash"?)`}},
		{name: "unknown value", config: perms(`bash = "yes"`),
			wantErr: []string{`$HOME/config.toml: agent.permissions.bash: "yes" is not a permission; use "allow", "ask" or "deny"`}},
		{name: "value in another case", config: perms(`fetch = "Allow"`),
			wantErr: []string{`agent.permissions.fetch: "Allow" is not a permission`}},
		{name: "bool value", config: perms(`bash = true`),
			wantErr: []string{"line 2", `"agent.permissions.bash"`, "type bool", `a permission is "allow", "ask" or "deny"`}},
		// The decoder drops these silently; every permission would be the default.
		{name: "string instead of a table", config: agentFile(`permissions = "allow"`),
			wantErr: []string{"agent.permissions: expected a table, [agent.permissions], but found string"}},
		{name: "array instead of a table", config: agentFile(`permissions = ["bash"]`),
			wantErr: []string{"agent.permissions: expected a table", "but found array"}},
		{name: "array of tables", config: &cfgFile{content: "[[agent.permissions]]\nbash = \"deny\"\n", mode: 0o600},
			wantErr: []string{"but found an array of tables, [[agent.permissions]]"}},
	})
}

func TestLoadAgentFetchAllow(t *testing.T) {
	allow := func(list string) *cfgFile {
		return &cfgFile{content: "[agent.fetch]\nallow = " + list + "\n", mode: 0o600}
	}
	prefixes := func(ps ...string) func(*Config) {
		return func(c *Config) {
			for _, p := range ps {
				c.Agent.FetchAllow = append(c.Agent.FetchAllow, netip.MustParsePrefix(p))
			}
		}
	}
	runLoadTests(t, []loadCase{
		{name: "empty", config: allow("[]"), want: func(*Config) {}},
		{name: "ranges", config: allow(`["10.0.0.0/8", "2001:db8::/32", "0.0.0.0/0"]`),
			want: prefixes("10.0.0.0/8", "2001:db8::/32", "0.0.0.0/0")},
		{name: "bare addresses are one host", config: allow(`["192.168.1.5", "fe80::1", "169.254.169.254"]`),
			want: prefixes("192.168.1.5/32", "fe80::1/128", "169.254.169.254/32")},
		{name: "one address as a range", config: allow(`["192.168.1.5/32"]`), want: prefixes("192.168.1.5/32")},
		{name: "host bits set", config: allow(`["192.168.1.5/24"]`),
			wantErr: []string{`$HOME/config.toml: agent.fetch.allow: entry 1: "192.168.1.5/24" has address bits beyond its /24; ` +
				`write "192.168.1.0/24" for the range or "192.168.1.5/32" for the one address`}},
		{name: "prefix too long", config: allow(`["10.0.0.0/8", "10.0.0.0/33"]`),
			wantErr: []string{`agent.fetch.allow: entry 2: "10.0.0.0/33" is not an address range`}},
		{name: "host name", config: allow(`["nas.local"]`),
			wantErr: []string{`entry 1: "nas.local" is not an IP address`, "host names are not accepted"}},
		{name: "empty entry", config: allow(`[""]`), wantErr: []string{`entry 1: "" is not an IP address`}},
		{name: "space around", config: allow(`[" 10.0.0.1"]`), wantErr: []string{`" 10.0.0.1" is not an IP address`}},
		{name: "zone", config: allow(`["fe80::1%eth0"]`), wantErr: []string{`"fe80::1%eth0" has a zone`}},
		{name: "zone in a range", config: allow(`["fe80::%eth0/64"]`), wantErr: []string{"is not an address range"}},
		{name: "every bad entry reported", config: allow(`["x", "10.0.0.0/8", "y"]`),
			wantErr: []string{`entry 1: "x"`, `entry 3: "y"`}},
		{name: "string instead of a list", config: allow(`"10.0.0.0/8"`),
			wantErr: []string{`"agent.fetch.allow"`, `allow is a list of strings such as ["192.168.1.0/24", "10.0.0.5"]`}},
		{name: "number in the list", config: allow(`[10]`), wantErr: []string{`"agent.fetch.allow"`, "type int64"}},
		{name: "fetch as a value", config: agentFile("fetch = 1"),
			wantErr: []string{`"agent.fetch"`, "expected a table but found int64"}},
	})
}

// TestLoadAgentBounds checks each numeric setting at and just beyond both
// of its bounds, and what a value of the wrong type is told.
func TestLoadAgentBounds(t *testing.T) {
	ok := func(set func(a *AgentConfig)) func(*Config) { return func(c *Config) { set(&c.Agent) } }
	runLoadTests(t, []loadCase{
		{name: "max_tokens 0", config: agentFile("max_tokens = 0"),
			wantErr: []string{"$HOME/config.toml: agent.max_tokens: 0 is less than the minimum, 1"}},
		{name: "max_tokens negative", config: agentFile("max_tokens = -4096"), wantErr: []string{"-4096 is less than the minimum, 1"}},
		{name: "max_tokens 1", config: agentFile("max_tokens = 1"), want: ok(func(a *AgentConfig) { a.MaxTokens = 1 })},
		{name: "max_tokens 200000", config: agentFile("max_tokens = 200_000"), want: ok(func(a *AgentConfig) { a.MaxTokens = 200000 })},
		{name: "max_tokens 200001", config: agentFile("max_tokens = 200001"),
			wantErr: []string{"agent.max_tokens: 200001 is more than the maximum, 200000"}},
		{name: "max_tokens as a string", config: agentFile(`max_tokens = "4096"`),
			wantErr: []string{`"agent.max_tokens"`, "max_tokens is a whole number such as 4096, without quotes"}},
		{name: "max_tokens as a float", config: agentFile("max_tokens = 4096.0"), wantErr: []string{"type float64"}},

		{name: "max_steps 0", config: agentFile("max_steps = 0"), wantErr: []string{"agent.max_steps: 0 is less than the minimum, 1"}},
		{name: "max_steps 1", config: agentFile("max_steps = 1"), want: ok(func(a *AgentConfig) { a.MaxSteps = 1 })},
		{name: "max_steps 200", config: agentFile("max_steps = 200"), want: ok(func(a *AgentConfig) { a.MaxSteps = 200 })},
		{name: "max_steps 201", config: agentFile("max_steps = 201"), wantErr: []string{"agent.max_steps: 201 is more than the maximum, 200"}},

		{name: "inbox_max_mb 0 (no cap but the disk's)", config: agentFile("inbox_max_mb = 0"), want: ok(func(a *AgentConfig) { a.InboxMaxMB = 0 })},
		{name: "inbox_max_mb 50", config: agentFile("inbox_max_mb = 50"), want: ok(func(a *AgentConfig) { a.InboxMaxMB = 50 })},
		{name: "inbox_max_mb -1", config: agentFile("inbox_max_mb = -1"), wantErr: []string{"agent.inbox_max_mb: -1 is less than the minimum, 0"}},
		{name: "inbox_max_mb as a string", config: agentFile(`inbox_max_mb = "1G"`),
			wantErr: []string{`"agent.inbox_max_mb"`, "inbox_max_mb is a whole number such as 1024, without quotes"}},

		{name: "context_budget 999", config: agentFile("context_budget = 999"),
			wantErr: []string{"agent.context_budget: 999 is less than the minimum, 1000"}},
		{name: "context_budget 1000", config: agentFile("context_budget = 1000"), want: ok(func(a *AgentConfig) { a.ContextBudget = 1000 })},
		{name: "context_budget 2000000", config: agentFile("context_budget = 2000000"),
			want: ok(func(a *AgentConfig) { a.ContextBudget = 2000000 })},
		{name: "context_budget 2000001", config: agentFile("context_budget = 2000001"),
			wantErr: []string{"agent.context_budget: 2000001 is more than the maximum, 2000000"}},
		{name: "context_budget beyond int64", config: agentFile("context_budget = 99999999999999999999"),
			wantErr: []string{"line 2", "out of range"}},

		{name: "request_timeout 0s", config: agentFile(`request_timeout = "0s"`),
			wantErr: []string{`agent.request_timeout: "0s" must be positive`}},
		{name: "request_timeout 999ms", config: agentFile(`request_timeout = "999ms"`),
			wantErr: []string{`agent.request_timeout: "999ms" is shorter than the minimum, 1s`}},
		{name: "request_timeout 1s", config: agentFile(`request_timeout = "1s"`), want: ok(func(a *AgentConfig) { a.RequestTimeout = time.Second })},
		{name: "request_timeout 1h", config: agentFile(`request_timeout = "60m"`), want: ok(func(a *AgentConfig) { a.RequestTimeout = time.Hour })},
		{name: "request_timeout 1h1s", config: agentFile(`request_timeout = "1h0m1s"`),
			wantErr: []string{`agent.request_timeout: "1h0m1s" is longer than the maximum, 1h0m0s`}},
		{name: "request_timeout without unit", config: agentFile(`request_timeout = "300"`),
			wantErr: []string{`agent.request_timeout: "300" is not a duration`}},
		{name: "request_timeout as a number", config: agentFile("request_timeout = 300"),
			wantErr: []string{`"agent.request_timeout"`, `request_timeout is a duration string such as "5m"`}},

		{name: "approval_timeout 9s", config: agentFile(`approval_timeout = "9s"`),
			wantErr: []string{`agent.approval_timeout: "9s" is shorter than the minimum, 10s`}},
		{name: "approval_timeout 10s", config: agentFile(`approval_timeout = "10s"`),
			want: ok(func(a *AgentConfig) { a.ApprovalTimeout = 10 * time.Second })},
		{name: "approval_timeout 24h", config: agentFile(`approval_timeout = "24h"`),
			want: ok(func(a *AgentConfig) { a.ApprovalTimeout = 24 * time.Hour })},
		{name: "approval_timeout 24h1s", config: agentFile(`approval_timeout = "24h1s"`),
			wantErr: []string{`agent.approval_timeout: "24h1s" is longer than the maximum, 24h0m0s`}},
		{name: "approval_timeout as a number", config: agentFile("approval_timeout = 600"),
			wantErr: []string{`approval_timeout is a duration string such as "10m"`}},

		{name: "every error at once", config: agentFile("max_tokens = 0\nmax_steps = 0\ncontext_budget = 0\nrequest_timeout = \"0s\"\napproval_timeout = \"0s\""),
			wantErr: []string{"agent.max_tokens:", "agent.max_steps:", "agent.context_budget:", "agent.request_timeout:", "agent.approval_timeout:"}},
	})
}

// TestLoadAgentInsecureIsErrInsecure checks that refusals over the API key
// can be told apart from other errors, like those over the token.
func TestLoadAgentInsecureIsErrInsecure(t *testing.T) {
	t.Run("readable config", func(t *testing.T) {
		h := newHome(t)
		writeFile(t, filepath.Join(h, "config.toml"), "[agent]\napi_key = \""+testOpenAIKey+"\"\n", 0o640)
		_, err := testLoader(t, nil).Load(h)
		if !errors.Is(err, ErrInsecure) {
			t.Errorf("got %v, want an ErrInsecure", err)
		}
	})
	t.Run("readable key file", func(t *testing.T) {
		h := newHome(t)
		writeFile(t, filepath.Join(h, "config.toml"), "[agent]\nprovider = \"openai\"\napi_key_file = \"key\"\n", 0o600)
		writeFile(t, filepath.Join(h, "key"), testOpenAIKey, 0o644)
		_, err := testLoader(t, nil).Load(h)
		if !errors.Is(err, ErrInsecure) {
			t.Errorf("got %v, want an ErrInsecure", err)
		}
	})
}

func TestLoadAPIKeyFileOfAnotherUser(t *testing.T) {
	h := newHome(t)
	writeFile(t, filepath.Join(h, "config.toml"), "[agent]\nprovider = \"anthropic\"\napi_key_file = \"key\"\n", 0o600)
	p := filepath.Join(h, "key")
	writeFile(t, p, testAnthropicKey, 0o600)
	chownOther(t, p)
	_, err := testLoader(t, nil).Load(h)
	checkErr(t, err, []string{p + " is owned by uid 4242"})
	if !errors.Is(err, ErrInsecure) {
		t.Errorf("got %v, want an ErrInsecure", err)
	}
}

// TestVerbosity: [telegram] and [discord] verbosity take the same values,
// normal when unset.
func TestVerbosity(t *testing.T) {
	for _, section := range []string{"telegram", "discord"} {
		for _, tt := range []struct {
			value, want string
			ok          bool
		}{{"quiet", "quiet", true}, {"verbose", "verbose", true}, {"", "normal", true}, {"loud", "", false}} {
			home := t.TempDir()
			os.WriteFile(filepath.Join(home, "config.toml"), []byte("["+section+"]\nverbosity = \""+tt.value+"\"\n"), 0o600)
			cfg, err := Loader{Getenv: func(string) string { return "" }}.Load(home)
			if err != nil {
				if tt.ok {
					t.Errorf("%s.verbosity %q: %v", section, tt.value, err)
				}
				continue
			}
			got := map[string]string{"telegram": cfg.Telegram.Verbosity, "discord": cfg.Discord.Verbosity}[section]
			if !tt.ok || got != tt.want {
				t.Errorf("%s.verbosity %q: got %q, %v; want %q (ok %t)", section, tt.value, got, err, tt.want, tt.ok)
			}
		}
	}
}
