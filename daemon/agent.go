package daemon

import (
	"fmt"
	"log/slog"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/mcp"
	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/openai"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/store"
)

// NewAgent wires the agent core from cfg's [agent] on db and ws, the way
// the daemon runs it; `latch chat` builds the same one when no daemon runs.
// A missing model is not an error: latch still works as a remote shell and
// says how to add one. A nil log discards.
func NewAgent(cfg *config.Config, db *store.DB, ws *tools.Workspace, log *slog.Logger) (*agent.Agent, error) {
	return newAgent(cfg, db, ws, log, nil, nil, nil, nil)
}

// newAgent is NewAgent with the daemon's orphan reaper and cgroups (nil
// outside a daemon, which is no subreaper and makes no cgroups), its MCP
// servers (nil for none: `latch chat` without a daemon has none) and its
// scheduler (nil outside a daemon, which has no chat for a job to post to).
func newAgent(cfg *config.Config, db *store.DB, ws *tools.Workspace, log *slog.Logger, reaper *tools.Reaper, cgroups *tools.Cgroups, servers *mcp.Manager, sched agent.Scheduler) (*agent.Agent, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := cfg.Agent
	p, err := newProvider(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	policy := agent.Policy{}
	for tool, perm := range c.Permissions {
		policy[tool] = agent.Permission(perm)
	}
	if len(policy) == 0 {
		policy = agent.DefaultPolicy()
	}
	tb := &agent.Toolbox{
		Workspace:   ws,
		Fetcher:     tools.NewFetcher(tools.FetchOptions{Allow: c.FetchAllow}),
		BashTimeout: c.BashTimeout,
		Reaper:      reaper,
		Cgroups:     cgroups,
		Schedule:    sched,
	}
	if servers != nil {
		tb.MCP = servers
	}
	return agent.New(agent.Config{
		Provider: p, Model: c.Model, MaxTokens: c.MaxTokens, MaxSteps: c.MaxSteps,
		ContextBudget: c.ContextBudget, ApprovalTimeout: c.ApprovalTimeout, Policy: policy,
		Store: db, Log: log.With("part", "agent"),
		Tools: tb,
	}), nil
}

func newProvider(c config.AgentConfig) (provider.Provider, error) {
	switch c.Provider {
	case "", "none":
		return nil, nil
	case config.ProviderClaudeCode, config.ProviderCodex:
		return nil, nil // a coding agent CLI answers the chat instead (chatAgent)
	case "anthropic":
		return anthropic.New(anthropic.Config{APIKey: c.APIKey, BaseURL: c.BaseURL, Model: c.Model, Timeout: c.RequestTimeout})
	case "openai":
		return openai.New(openai.Config{APIKey: c.APIKey, BaseURL: c.BaseURL, Model: c.Model, Timeout: c.RequestTimeout})
	}
	return nil, fmt.Errorf("unknown [agent] provider %q", c.Provider)
}
