package daemon

import (
	"log/slog"

	"github.com/latchd/latch/agent/mcp"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
)

// MCPOptions turns [mcp] into the MCP client's options: the enabled
// servers, run in the workspace with the daemon's reaper and cgroups (nil
// outside a daemon), with every secret of cfg to scrub from what they
// return.
func MCPOptions(cfg *config.Config, reaper *tools.Reaper, cgroups *tools.Cgroups, log *slog.Logger) mcp.Options {
	opts := mcp.Options{Permissions: cfg.MCP.Permissions, Dir: cfg.Agent.Workspace,
		Reaper: reaper, Cgroups: cgroups, Log: log,
		Secrets: []string{cfg.Telegram.Token, cfg.Telegram.WebhookSecret, cfg.Agent.APIKey, cfg.Discord.Token, cfg.Slack.AppToken, cfg.Slack.BotToken}}
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
