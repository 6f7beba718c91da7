package config

import (
	"slices"
	"strings"
	"time"
)

// The coding agent CLIs latch can drive instead of its embedded agent
// (agent/coder).
const (
	ProviderClaudeCode = "claude-code" // Anthropic's `claude` CLI, headless
	ProviderCodex      = "codex"       // OpenAI's `codex exec`
)

// DefaultCoderTimeout bounds one turn of a coding agent CLI.
const DefaultCoderTimeout = time.Hour

// ClaudeCodeConfig is [agent.claude_code].
type ClaudeCodeConfig struct {
	Path      string        // the claude program; "" finds "claude" on PATH
	Model     string        // --model; "" uses [agent] model, then the CLI's default
	ExtraArgs []string      // added to the command line (see refusedCoderArgs)
	Timeout   time.Duration // a whole turn; default DefaultCoderTimeout
}

// CodexConfig is [agent.codex].
type CodexConfig struct {
	Path    string        // the codex program; "" finds "codex" on PATH
	Model   string        // --model; "" uses [agent] model, then the CLI's default
	Profile string        // --profile of the owner's ~/.codex/config.toml
	Timeout time.Duration // a whole turn; default DefaultCoderTimeout
}

// IsCoder reports whether provider is a coding agent CLI.
func IsCoder(provider string) bool {
	return provider == ProviderClaudeCode || provider == ProviderCodex
}

type fileClaudeCode struct {
	Path      string   `toml:"path"`
	Model     string   `toml:"model"`
	ExtraArgs []string `toml:"extra_args"`
	Timeout   string   `toml:"timeout"`
}

type fileCodex struct {
	Path    string `toml:"path"`
	Model   string `toml:"model"`
	Profile string `toml:"profile"`
	Timeout string `toml:"timeout"`
}

// refusedCoderArgs are the flags extra_args may not hold: latch sets them
// itself, and another value would take the owner's permissions, latch's
// view of the event stream or its session out of latch's hands.
var refusedCoderArgs = []string{
	"--dangerously-skip-permissions", "--allow-dangerously-skip-permissions", "--permission-mode",
	"--permission-prompt-tool", "--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools",
	"--input-format", "--output-format", "--resume", "-r", "--continue", "-c", "--session-id",
	"--settings", "--mcp-config", "--strict-mcp-config", "-p", "--print", "--model",
}

// applyCoderFile applies [agent.claude_code] and [agent.codex]; they are
// checked whichever provider is chosen.
func applyCoderFile(ag *AgentConfig, a *fileAgent, bad badFunc) {
	cc, cx := a.ClaudeCode, a.Codex
	ag.ClaudeCode.Path, ag.ClaudeCode.Model = cc.Path, cc.Model
	if len(cc.ExtraArgs) > 0 {
		ag.ClaudeCode.ExtraArgs = cc.ExtraArgs
	}
	ag.Codex.Path, ag.Codex.Model, ag.Codex.Profile = cx.Path, cx.Model, cx.Profile
	for _, arg := range cc.ExtraArgs {
		name, _, _ := strings.Cut(arg, "=")
		if slices.Contains(refusedCoderArgs, name) {
			bad("agent.claude_code.extra_args", "%q is set by latch itself and cannot be given here", name)
		}
	}
	for _, m := range []struct{ key, value string }{{"agent.claude_code.model", cc.Model}, {"agent.codex.model", cx.Model},
		{"agent.codex.profile", cx.Profile}} {
		if strings.ContainsFunc(m.value, func(r rune) bool { return r <= ' ' }) || strings.HasPrefix(m.value, "-") {
			bad(m.key, "%s is not a name", quoteValue(m.value))
		}
	}
	for _, t := range []struct {
		key, value string
		dst        *time.Duration
	}{{"agent.claude_code.timeout", cc.Timeout, &ag.ClaudeCode.Timeout}, {"agent.codex.timeout", cx.Timeout, &ag.Codex.Timeout}} {
		if t.value == "" {
			continue
		}
		d, err := time.ParseDuration(t.value)
		if err != nil || d < time.Minute || d > 24*time.Hour {
			bad(t.key, "%s is not a duration between 1m and 24h", quoteValue(t.value))
			continue
		}
		*t.dst = d
	}
}
