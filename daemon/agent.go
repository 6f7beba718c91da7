package daemon

import (
	"fmt"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/openai"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/store"
)

// buildAgent wires the agent core from [agent]. A missing model is not an
// error: latch still works as a remote shell and says how to add one.
func (d *Daemon) buildAgent(db *store.DB, ws *tools.Workspace) (*agent.Agent, error) {
	c := d.Config.Agent
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
	return agent.New(agent.Config{
		Provider: p, Model: c.Model, MaxTokens: c.MaxTokens, MaxSteps: c.MaxSteps,
		ContextBudget: c.ContextBudget, ApprovalTimeout: c.ApprovalTimeout, Policy: policy,
		Store: db, Log: d.Log.With("part", "agent"),
		Tools: &agent.Toolbox{
			Workspace:   ws,
			Fetcher:     tools.NewFetcher(tools.FetchOptions{Allow: c.FetchAllow}),
			BashTimeout: c.BashTimeout,
		},
	}), nil
}

func newProvider(c config.AgentConfig) (provider.Provider, error) {
	switch c.Provider {
	case "", "none":
		return nil, nil
	case "anthropic":
		return anthropic.New(anthropic.Config{APIKey: c.APIKey, BaseURL: c.BaseURL, Model: c.Model, Timeout: c.RequestTimeout})
	case "openai":
		return openai.New(openai.Config{APIKey: c.APIKey, BaseURL: c.BaseURL, Model: c.Model, Timeout: c.RequestTimeout})
	}
	return nil, fmt.Errorf("unknown [agent] provider %q", c.Provider)
}
