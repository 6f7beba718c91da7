package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/agent/mcp/mcptest"
)

// testSidecar is the latch-mcp binary TestMCP runs.
var testSidecar mcptest.Sidecar

func TestMain(m *testing.M) {
	mcptest.Main() // the MCP server TestMCP starts
	code := m.Run()
	testSidecar.Remove()
	os.Exit(code)
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
	f.sidecar = testSidecar.MustPath(t)
	rep := f.run(t)
	wantCheck(t, rep, "mcp", Warn, []string{"go (stdio): 2 tools (go__echo, go__huge)", "broken (stdio): does not start"}, []string{"[[mcp.servers]]"})
	if d := check(t, rep, "mcp").Detail; strings.Contains(d, "go__env") {
		t.Errorf("a tool outside the allowlist is listed: %s", d)
	}
	wantCheck(t, newFixture(t, "").run(t), "mcp", Skip, []string{"no [[mcp.servers]]"}, nil)
}

// TestMCPSidecarMissing: servers configured and no sidecar fails, with
// the go build command that makes it.
func TestMCPSidecarMissing(t *testing.T) {
	f := newFixture(t, `
[[mcp.servers]]
name = "go"
command = "`+os.Args[0]+`"
`)
	f.sidecar = filepath.Join(t.TempDir(), "latch-mcp")
	wantCheck(t, f.run(t), "mcp", Fail, []string{"MCP sidecar latch-mcp is missing at " + f.sidecar}, []string{"go build", "-o " + filepath.Dir(f.sidecar) + " ./cmd/latch-mcp"})
}
