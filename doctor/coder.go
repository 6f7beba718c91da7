package doctor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/latchd/latch/config"
)

// coderCLI is what the doctor knows of each coding agent CLI.
type coderCLI struct {
	bin, section, pkg string
	status            []string // the arguments that say whether it is logged in
	login             string   // how the owner logs in
}

func coderCLIFor(provider string) coderCLI {
	if provider == config.ProviderCodex {
		return coderCLI{bin: "codex", section: "agent.codex", pkg: "@openai/codex",
			status: []string{"login", "status"}, login: "codex login"}
	}
	return coderCLI{bin: "claude", section: "agent.claude_code", pkg: "@anthropic-ai/claude-code",
		status: []string{"auth", "status"}, login: "claude auth login"}
}

// checkCoder finds the coding agent CLI, asks its version, and checks that
// it can reach a model: an API key in [agent], or the CLI's own login.
func (r *run) checkCoder(ctx context.Context, a config.AgentConfig) Check {
	cli := coderCLIFor(a.Provider)
	path := cmp.Or(a.ClaudeCode.Path, cli.bin)
	if a.Provider == config.ProviderCodex {
		path = cmp.Or(a.Codex.Path, cli.bin)
	}
	bin, err := exec.LookPath(path)
	if err != nil {
		return fail(fmt.Sprintf("%s: %q not found", a.Provider, path),
			fmt.Sprintf("install it (npm install -g %s) as the user latch runs as, or set [%s] path in %s", cli.pkg, cli.section, r.cfg.Path))
	}
	out, err := r.runCLI(ctx, bin, "--version")
	if err != nil {
		return fail(fmt.Sprintf("%s: %s --version failed: %v", a.Provider, bin, err),
			fmt.Sprintf("run `%s --version` yourself; reinstall it (npm install -g %s) if it does not start", bin, cli.pkg))
	}
	version := firstLine(out)
	if a.APIKey != "" {
		return ok(fmt.Sprintf("%s: %s (%s), API key from %s", a.Provider, bin, version, a.APIKeySource))
	}
	out, err = r.runCLI(ctx, bin, cli.status...)
	if loggedIn(a.Provider, out, err) {
		return ok(fmt.Sprintf("%s: %s (%s), logged in", a.Provider, bin, version))
	}
	return fail(fmt.Sprintf("%s: %s (%s) is not logged in, and [agent] sets no API key", a.Provider, bin, version),
		fmt.Sprintf("run `%s` as the user latch runs as, or set [agent] api_key_file in %s", cli.login, r.cfg.Path))
}

// runCLI runs the CLI with the environment latch would give it, minus any
// API key, and returns its standard output.
func (r *run) runCLI(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, k := range []string{"PATH", "HOME", "USER", "LANG", "XDG_CONFIG_HOME", "CODEX_HOME"} {
		if v := r.d.getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("%w: %s", err, firstLine(stderr.String()))
	}
	return stdout.String(), err
}

// loggedIn reads the CLI's login status.
func loggedIn(provider, out string, err error) bool {
	if err != nil {
		return false // codex login status exits 1 when logged out
	}
	if provider == config.ProviderClaudeCode {
		var st struct {
			LoggedIn bool `json:"loggedIn"`
		}
		return json.Unmarshal([]byte(out), &st) == nil && st.LoggedIn
	}
	return true
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(line)
}
