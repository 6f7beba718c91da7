package agent

// Permission is what the owner allows a tool to do.
type Permission string

// Permissions, as written in [agent.permissions].
const (
	Allow Permission = "allow"
	Ask   Permission = "ask"
	Deny  Permission = "deny"
)

// DefaultPolicy lets the model look around freely and asks before it
// changes anything, runs anything or reaches the network.
func DefaultPolicy() Policy {
	return Policy{
		ToolRead: Allow, ToolList: Allow, ToolGrep: Allow,
		ToolWrite: Ask, ToolEdit: Ask, ToolBash: Ask, ToolFetch: Ask, ToolSendFile: Ask, ToolSchedule: Ask,
	}
}

// Policy maps tool names to permissions. A tool it does not name is denied:
// a policy fails closed.
type Policy map[string]Permission

// For returns the permission of tool.
func (p Policy) For(tool string) Permission {
	switch perm := p[tool]; perm {
	case Allow, Ask:
		return perm
	}
	return Deny
}
