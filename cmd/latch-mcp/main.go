// Command latch-mcp is latch's MCP sidecar: the only binary that links
// the MCP SDK. The latch daemon starts it (from next to its own binary)
// only when an [[mcp.servers]] entry is enabled, and speaks to it on its
// standard input and output (agent/mcp/wire); a daemon without MCP servers
// never pays for the SDK.
package main

import (
	"os"

	"github.com/latchd/latch/agent/mcp/mcpsdk"
)

func main() { os.Exit(mcpsdk.Main()) }
