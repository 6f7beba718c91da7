package doctor

import (
	"os"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.Main() // the MCP server TestMCP starts
	os.Exit(m.Run())
}

// TestMCP: doctor starts each configured MCP server once and lists its
// tools, and says why one does not start.
func TestMCP(t *testing.T) {
	f := newFixture(t, `
[[mcp.servers]]
name = "go"
command = "`+os.Args[0]+`"
env = { LATCH_TEST_MCP_SERVER = "1" }
tools = ["echo", "huge"]

[[mcp.servers]]
name = "broken"
command = "false"
`)
	rep := f.run(t)
	wantCheck(t, rep, "mcp", Warn, []string{"go (stdio): 2 tools (go__echo, go__huge)", "broken (stdio): does not start"}, []string{"[[mcp.servers]]"})
	if d := check(t, rep, "mcp").Detail; strings.Contains(d, "go__env") {
		t.Errorf("a tool outside the allowlist is listed: %s", d)
	}
	wantCheck(t, newFixture(t, "").run(t), "mcp", Skip, []string{"no [[mcp.servers]]"}, nil)
}
