package doctor

import (
	"os"
	"path/filepath"
	"testing"
)

// coderBin returns a coding agent CLI that .ci/run installs (see
// agent/coder), or skips saying how to get it.
func coderBin(t *testing.T, bin string) string {
	dir := os.Getenv("LATCH_TEST_CODER_TOOLS")
	if dir == "" {
		t.Skip("needs LATCH_TEST_CODER_TOOLS, a folder holding the npm packages of the coding agent CLIs (.ci/run fills it)")
	}
	return filepath.Join(dir, "node_modules", ".bin", bin)
}

// TestDoctorCoder runs the real CLIs: found with their version, logged in
// or given a key, and a fix for each failure.
func TestDoctorCoder(t *testing.T) {
	claude, codex := coderBin(t, "claude"), coderBin(t, "codex")
	for _, tc := range []struct {
		name, provider, section, path, key string
		status                             Status
		detail, fix                        []string
	}{
		{"claude-code not logged in", "claude-code", "claude_code", claude, "", Fail,
			[]string{"2.1.332", "not logged in"}, []string{"claude auth login", "api_key_file"}},
		{"claude-code with a key", "claude-code", "claude_code", claude, "sk-ant-doctor-test-key", OK,
			[]string{"2.1.332", "API key from agent.api_key"}, nil},
		{"claude-code missing", "claude-code", "claude_code", "/nonexistent/claude", "", Fail,
			[]string{"not found"}, []string{"npm install -g @anthropic-ai/claude-code", "[agent.claude_code] path"}},
		{"codex not logged in", "codex", "codex", codex, "", Fail,
			[]string{"0.171.0", "not logged in"}, []string{"codex login"}},
		{"codex with a key", "codex", "codex", codex, "sk-doctor-test-key", OK, []string{"0.171.0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tomlConfig("agent.provider", tc.provider, "agent."+tc.section+".path", tc.path, "agent.api_key", tc.key))
			f.env["HOME"] = t.TempDir()
			f.env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
			wantCheck(t, f.run(t), "model", tc.status, tc.detail, tc.fix)
		})
	}
}
