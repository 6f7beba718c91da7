package doctor

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/latchd/latch/agent/mcp"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/daemon"
)

// checkMCP starts each configured MCP server once through the sidecar,
// lists its tools and stops it again (a missing sidecar fails, with the
// command that builds it); it also reports what the running daemon says of them
// (crashes, restarts).
func (r *run) checkMCP(ctx context.Context) Check {
	if r.cfg == nil {
		return skip("needs a config that loads")
	}
	if len(r.cfg.MCP.Servers) == 0 {
		return skip("no [[mcp.servers]] configured")
	}
	var parts []string
	failed := false
	opts := daemon.MCPOptions(r.cfg, nil, nil, nil)
	opts.Sidecar = cmp.Or(r.d.MCPSidecar, mcp.DefaultSidecar())
	if len(opts.Servers) > 0 {
		if err := mcp.CheckSidecar(opts.Sidecar); err != nil {
			return fail(fmt.Sprintf("the MCP sidecar %s is missing at %s: no MCP server's tools are offered", mcp.SidecarName, opts.Sidecar), mcp.SidecarFix(opts.Sidecar))
		}
	}
	for _, st := range mcp.Probe(ctx, opts) {
		if st.State != "running" {
			failed = true
			parts = append(parts, fmt.Sprintf("%s (%s): does not start: %s", st.Name, st.Transport, st.Err))
			continue
		}
		line := fmt.Sprintf("%s (%s): %d tools", st.Name, st.Transport, st.Tools)
		if len(st.Offered) > 0 {
			line += " (" + strings.Join(st.Offered, ", ") + ")"
		}
		if len(st.Skipped) > 0 {
			line += "; not offered: " + strings.Join(st.Skipped, "; ")
		}
		parts = append(parts, line)
	}
	for _, s := range r.cfg.MCP.Servers {
		if !s.Enabled {
			parts = append(parts, s.Name+": disabled")
		}
	}
	if r.daemonUp {
		if st, err := control.NewClient(config.SocketPath(r.home)).Status(ctx); err == nil {
			for _, l := range st.MCP {
				parts = append(parts, "in the daemon: "+l)
				if strings.Contains(l, "started again") {
					failed = true
				}
			}
		}
	}
	detail := strings.Join(parts, " · ")
	if failed {
		return warn(detail, fmt.Sprintf("fix the server's entry in %s ([[mcp.servers]]: command, args, url, headers), run it by hand to see its errors, then reload latch (systemctl --user reload latch.service, or kill -HUP its pid)", r.cfg.Path))
	}
	return ok(detail)
}
