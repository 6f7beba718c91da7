package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
)

// withClaudeCode makes the daemon drive the real Claude Code CLI (which
// .ci/run installs, see agent/coder) against anthropictest.
func withClaudeCode(e *env) *anthropictest.Server {
	dir := os.Getenv("LATCH_TEST_CODER_TOOLS")
	if dir == "" {
		e.t.Skip("needs LATCH_TEST_CODER_TOOLS, a folder holding the npm packages of the coding agent CLIs (.ci/run fills it)")
	}
	// The CLI keeps its sessions under $HOME, which the daemon passes on.
	e.t.Setenv("HOME", e.t.TempDir())
	fake := anthropictest.New(modelKey)
	e.t.Cleanup(fake.Close)
	e.tweak = func(c *config.Config) {
		c.Agent.Provider = config.ProviderClaudeCode
		c.Agent.APIKey = modelKey
		c.Agent.BaseURL = fake.URL()
		c.Agent.ClaudeCode.Path = filepath.Join(dir, "node_modules", ".bin", "claude")
		c.Agent.ClaudeCode.Model = "claude-sonnet-4-5"
	}
	return fake
}

// TestE2EClaudeCode: a message from the chat runs Claude Code; its Bash
// call asks in the chat (a stranger's press counts for nothing), runs once
// approved, the answer arrives, /status shows the session and its cost,
// and /new forgets it. No bot token reaches the CLI's tools.
func TestE2EClaudeCode(t *testing.T) {
	e := newEnv(t)
	fake := withClaudeCode(e)
	e.start()
	e.pair()
	fake.Script(
		anthropictest.ToolUse("toolu_1", "Bash", `{"command":"env > env.txt; echo claude-was-here > proof.txt","description":"write proof"}`),
		anthropictest.Text("Done: proof.txt written."),
	)
	e.say(owner, "please write a proof file")
	id := e.approvalFor("Bash")
	e.say(stranger, "/approve "+id)
	e.say(owner, "/approve "+id)
	e.waitReply(owner.ID, "Done: proof.txt written.")
	ws := filepath.Join(e.home, "workspace")
	if b, err := os.ReadFile(filepath.Join(ws, "proof.txt")); err != nil || string(b) != "claude-was-here\n" {
		t.Fatalf("proof.txt = %q, %v", b, err)
	}
	envDump, _ := os.ReadFile(filepath.Join(ws, "env.txt"))
	if strings.Contains(string(envDump), e.config().Telegram.Token) || strings.Contains(string(envDump), "LATCH_TELEGRAM") {
		t.Error("the bot token reached the CLI's tools")
	}
	if !strings.Contains(string(envDump), "LATCH_RUN=1") {
		t.Error("the CLI's tools cannot tell they run under latch (LATCH_RUN)")
	}
	e.say(owner, "/status")
	e.waitReply(owner.ID, "claude-code session: ")
	e.say(owner, "/new")
	e.waitReply(owner.ID, "")
	if len(e.tg.SentTo(stranger.ID)) != 0 {
		t.Error("stranger got a reply")
	}
	if strings.Contains(e.logs.String(), modelKey) {
		t.Error("model API key in the logs")
	}
}
