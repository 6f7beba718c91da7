package config

import (
	"testing"
	"time"
)

func TestLoadCoder(t *testing.T) {
	runLoadTests(t, []loadCase{
		{
			name: "claude-code with its section; the key and base URL go to it",
			config: agentFile("provider = \"claude-code\"\nbase_url = \"http://127.0.0.1:9/\"\n" +
				"[agent.claude_code]\npath = \"/opt/claude/bin/claude\"\nmodel = \"claude-opus-4-1\"\n" +
				"extra_args = [\"--max-turns\", \"30\"]\ntimeout = \"2h\""),
			env: map[string]string{EnvAnthropicAPIKey: testAnthropicKey},
			want: func(c *Config) {
				a := &c.Agent
				a.Provider, a.BaseURL = ProviderClaudeCode, "http://127.0.0.1:9"
				a.APIKey, a.APIKeySource = testAnthropicKey, EnvAnthropicAPIKey
				a.ClaudeCode = ClaudeCodeConfig{Path: "/opt/claude/bin/claude", Model: "claude-opus-4-1",
					ExtraArgs: []string{"--max-turns", "30"}, Timeout: 2 * time.Hour}
			},
		},
		{
			name:   "codex with a profile; the CLI picks its model",
			config: agentFile("provider = \"codex\"\n[agent.codex]\nprofile = \"work\""),
			want: func(c *Config) {
				c.Agent.Provider, c.Agent.Codex.Profile = ProviderCodex, "work"
			},
		},
		{
			name:    "extra_args cannot undo the permission relay",
			config:  agentFile("provider = \"claude-code\"\n[agent.claude_code]\nextra_args = [\"--dangerously-skip-permissions\"]"),
			wantErr: []string{`agent.claude_code.extra_args: "--dangerously-skip-permissions" is set by latch itself`},
		},
		{
			name:    "nor switch the permission mode with =",
			config:  agentFile("provider = \"claude-code\"\n[agent.claude_code]\nextra_args = [\"--permission-mode=bypassPermissions\"]"),
			wantErr: []string{`agent.claude_code.extra_args: "--permission-mode" is set by latch itself`},
		},
		{
			name:    "a timeout out of bounds",
			config:  agentFile("provider = \"codex\"\n[agent.codex]\ntimeout = \"5s\""),
			wantErr: []string{`agent.codex.timeout: "5s" is not a duration between 1m and 24h`},
		},
		{
			name:    "a profile that is a flag",
			config:  agentFile("provider = \"codex\"\n[agent.codex]\nprofile = \"--dangerously-bypass-approvals-and-sandbox\""),
			wantErr: []string{`agent.codex.profile: `, `is not a name`},
		},
	})
}
