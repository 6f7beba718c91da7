package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDaemonDoesNotLinkTheMCPSDK: the MCP SDK costs the daemon idle
// memory whether or not a server is configured (its package inits), so
// only the sidecar (cmd/latch-mcp) links it; latch reaches it through
// agent/mcp/wire. This fails as soon as anything in latch's import graph
// pulls the SDK in again.
func TestDaemonDoesNotLinkTheMCPSDK(t *testing.T) {
	deps := func(pkg string) string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return string(out)
	}
	const sdk = "github.com/modelcontextprotocol/go-sdk"
	for _, line := range strings.Split(deps("github.com/latchd/latch/cmd/latch"), "\n") {
		if strings.HasPrefix(line, sdk) {
			t.Errorf("cmd/latch depends on %s: the MCP SDK belongs in the sidecar only", line)
		}
	}
	// The check itself works: the sidecar does link it.
	if !strings.Contains(deps("github.com/latchd/latch/cmd/latch-mcp"), sdk+"/mcp\n") {
		t.Fatal("cmd/latch-mcp does not depend on the SDK: the check is broken")
	}
}

// TestLatchDoesNotLinkMautrix: mautrix's package initialisers cost every
// process that links them idle memory (bench/README.md, "Matrix"), so only
// latch-matrix links the Matrix adapter; latch runs it in its place when
// [matrix] is configured (execLinked).
func TestLatchDoesNotLinkMautrix(t *testing.T) {
	deps := func(pkg string) string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return string(out)
	}
	for _, line := range strings.Split(deps("github.com/latchd/latch/cmd/latch"), "\n") {
		if strings.HasPrefix(line, "maunium.net/go/mautrix") || line == "github.com/latchd/latch/gateways/matrix" {
			t.Errorf("cmd/latch depends on %s: the Matrix adapter belongs in latch-matrix only", line)
		}
	}
	if !strings.Contains(deps("github.com/latchd/latch/cmd/latch-matrix"), "\ngithub.com/latchd/latch/gateways/matrix\n") {
		t.Fatal("cmd/latch-matrix does not depend on the Matrix adapter: the check is broken")
	}
}
