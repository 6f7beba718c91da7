package daemon

import (
	"cmp"
	"log/slog"

	"github.com/latchd/latch/agent/mcp"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/logkey"
)

// MCPOptions turns [mcp] into the MCP client's options: the enabled
// servers, run in the workspace with the daemon's reaper and cgroups (nil
// outside a daemon), with every secret of cfg to scrub from what they
// return.
func MCPOptions(cfg *config.Config, reaper *tools.Reaper, cgroups *tools.Cgroups, log *slog.Logger) mcp.Options {
	opts := mcp.Options{Permissions: cfg.MCP.Permissions, Dir: cfg.Agent.Workspace,
		Reaper: reaper, Cgroups: cgroups, Log: log,
		Secrets: append(config.PlatformSecrets(cfg), cfg.Agent.APIKey)}
	for _, s := range cfg.MCP.Servers {
		if !s.Enabled {
			continue
		}
		opts.Servers = append(opts.Servers, MCPServer(s))
	}
	return opts
}

// MCPServer is one configured server as the MCP client takes it.
func MCPServer(s config.MCPServer) mcp.Server {
	return mcp.Server{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL,
		Headers: s.Headers, Timeout: s.Timeout, Tools: s.Tools, Permission: s.Permission,
		RestartOnNew: s.RestartOnNew}
}

// checkSidecar says at once, in the log, when MCP servers are configured
// and the sidecar that speaks MCP is missing; each server's status says
// it too, with the build command that fixes it.
func checkSidecar(m *mcp.Manager, opts mcp.Options, log *slog.Logger) {
	if m == nil {
		return
	}
	if err := mcp.CheckSidecar(cmp.Or(opts.Sidecar, mcp.DefaultSidecar())); err != nil {
		log.Error("MCP servers are configured but their tools are not available", logkey.Err, err)
	}
}
