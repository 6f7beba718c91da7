package mcpsdk

import (
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/latchd/latch/agent/mcp/wire"
	"github.com/latchd/latch/internal/pageout"
)

// Main is the sidecar's whole program: it makes itself non-dumpable (the
// streamable-HTTP servers' headers pass through it), then serves the
// daemon on standard input and output until the daemon closes its input.
// It returns the exit code.
func Main() int {
	if err := harden(); err != nil {
		fmt.Fprintln(os.Stderr, "latch-mcp:", err)
		return 1
	}
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "latch-mcp is latch's MCP sidecar: the latch daemon starts it when [[mcp.servers]] are configured; it takes no arguments")
		return 2
	}
	f := os.NewFile(wire.FDSocket, "latch-mcp-fds")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "latch-mcp: no descriptor socket from the daemon (it is started by latch run):", err)
		return 2
	}
	defer c.Close()
	fds, ok := c.(*net.UnixConn)
	if !ok {
		fmt.Fprintln(os.Stderr, "latch-mcp: descriptor 3 is not a unix socket")
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	giveBack := func() { pageout.Log(log, pageout.GiveBackStartup()) }
	if err := serve(os.Stdin, os.Stdout, fds, giveBack); err != nil {
		fmt.Fprintln(os.Stderr, "latch-mcp:", err)
		return 1
	}
	return 0
}
