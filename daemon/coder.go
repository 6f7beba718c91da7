package daemon

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/coder"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/store"
)

// chatAgent is what plain text in a chat goes to: the coding agent CLI
// [agent] provider names (claude-code, codex), or else the embedded agent.
func chatAgent(cfg *config.Config, ag *agent.Agent, db *store.DB, log *slog.Logger, reaper *tools.Reaper, cgroups *tools.Cgroups) gateways.Agent {
	c := cfg.Agent
	if !config.IsCoder(c.Provider) {
		return ag
	}
	policy := agent.Policy{}
	for tool, perm := range c.Permissions {
		policy[tool] = agent.Permission(perm)
	}
	cli, timeout := coderCLI(c, policy)
	return coder.New(coder.Config{
		CLI: cli, Workspace: c.Workspace, Env: CoderEnv(c, nil), Policy: policy,
		ApprovalTimeout: c.ApprovalTimeout, Timeout: timeout, Store: db,
		Reaper: reaper, Cgroups: cgroups, Log: log.With("part", "coder"),
	})
}

func coderCLI(c config.AgentConfig, policy agent.Policy) (coder.CLI, time.Duration) {
	if c.Provider == config.ProviderCodex {
		x := c.Codex
		return &coder.Codex{Path: x.Path, ModelName: cmp.Or(x.Model, c.Model), Profile: x.Profile, BaseURL: c.BaseURL, Policy: policy}, x.Timeout
	}
	cc := c.ClaudeCode
	return &coder.ClaudeCode{Path: cc.Path, ModelName: cmp.Or(cc.Model, c.Model), ExtraArgs: cc.ExtraArgs, Policy: policy,
		APIKeyFile: c.APIKeyFile}, cc.Timeout
}

// CoderEnv is the environment a coding agent CLI runs in: the minimal one
// of environ (nil: the daemon's), no bot token or other credential of
// latch's, and the API key and base URL only when [agent] configures them
// for this CLI — otherwise the CLI uses its own login.
func CoderEnv(c config.AgentConfig, environ []string) []string {
	extra := map[string]string{tools.RunMarker: "1"}
	key := config.EnvAnthropicAPIKey
	if c.Provider == config.ProviderCodex {
		key = coder.EnvCodexAPIKey // its base URL goes on the command line
	} else if c.BaseURL != "" {
		extra[config.EnvAnthropicBaseURL] = c.BaseURL
	}
	// Claude Code reads a key file itself (ClaudeCode.APIKeyFile), so
	// the key is in no environment; a key given otherwise must be.
	if c.APIKey != "" && (c.Provider == config.ProviderCodex || c.APIKeyFile == "") {
		extra[key] = c.APIKey
	}
	return tools.MinimalEnv(environ, extra)
}
