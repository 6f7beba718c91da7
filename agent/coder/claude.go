package coder

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/tools"
)

// ClaudeCode runs Anthropic's `claude` CLI headless: `-p` with JSON lines
// both ways (--input-format and --output-format stream-json), the prompt
// on its standard input, never on its command line.
//
// Permissions go through the CLI's control protocol on those same pipes
// (--permission-prompt-tool stdio, what Anthropic's Agent SDKs use): no
// socket or port exists that another process could reach. At the start of
// each turn latch registers a PreToolUse hook for every tool; the CLI asks
// it before any tool runs, and latch answers from [agent.permissions]:
// deny refuses the call, ask makes the CLI ask for permission (even where
// its own rules would let the call through), which latch relays to the
// chat as Approve / Deny buttons, and allow leaves the call to the CLI,
// which --allowedTools lets through. A question the CLI asks of its own
// accord (a file outside the workspace) always goes to the owner.
type ClaudeCode struct {
	Path      string // default "claude"
	ModelName string
	ExtraArgs []string
	Policy    agent.Policy
	// APIKeyFile, when set, is a file (0600) holding the API key, which
	// Claude Code then reads through its apiKeyHelper setting: a key in
	// its environment would be in every tool's too.
	APIKeyFile string
}

// claudeTools maps Claude Code's tools onto latch's own, whose
// permissions [agent.permissions] sets. (A slice, not a map: nothing is
// built when the package loads.)
var claudeTools = []struct{ claude, latch string }{
	{"Bash", agent.ToolBash}, {"BashOutput", agent.ToolBash}, {"Edit", agent.ToolEdit},
	{"Glob", agent.ToolList}, {"Grep", agent.ToolGrep}, {"KillBash", agent.ToolBash},
	{"KillShell", agent.ToolBash}, {"LS", agent.ToolList}, {"MultiEdit", agent.ToolEdit},
	{"NotebookEdit", agent.ToolEdit}, {"NotebookRead", agent.ToolRead}, {"Read", agent.ToolRead},
	{"WebFetch", agent.ToolFetch}, {"WebSearch", agent.ToolFetch}, {"Write", agent.ToolWrite},
}

// claudeInternal are Claude Code's tools that only change its own state
// (its to-do list, its plan, its sub-agents, whose tool calls are asked
// about one by one): they always run.
var claudeInternal = []string{"TodoWrite", "Task", "Agent", "TaskCreate", "TaskGet", "TaskList", "TaskUpdate",
	"TaskStop", "ToolSearch", "EnterPlanMode", "ExitPlanMode"}

// claudePermission is the owner's permission for one of Claude Code's
// tools. A tool latch has no counterpart of (an MCP server's of the
// owner's Claude Code setup, a tool of a newer version) asks.
func claudePermission(p agent.Policy, tool string) agent.Permission {
	for _, t := range claudeTools {
		if t.claude == tool {
			return p.For(t.latch)
		}
	}
	if slices.Contains(claudeInternal, tool) {
		return agent.Allow
	}
	return agent.Ask
}

// Name implements CLI.
func (c *ClaudeCode) Name() string { return "claude-code" }

// Model implements CLI.
func (c *ClaudeCode) Model() string { return c.ModelName }

// Command implements CLI.
func (c *ClaudeCode) Command(session, _ string) (string, []string) {
	args := []string{"-p", "--output-format", "stream-json", "--input-format", "stream-json", "--verbose",
		"--include-partial-messages", "--permission-prompt-tool", "stdio"}
	if c.ModelName != "" {
		args = append(args, "--model", c.ModelName)
	}
	if session != "" {
		args = append(args, "--resume", session)
	}
	allowed, denied := slices.Clone(claudeInternal), []string(nil)
	for _, t := range claudeTools {
		switch claudePermission(c.Policy, t.claude) {
		case agent.Allow:
			allowed = append(allowed, t.claude)
		case agent.Deny:
			denied = append(denied, t.claude)
		}
	}
	if c.APIKeyFile != "" {
		settings, _ := json.Marshal(map[string]string{"apiKeyHelper": "cat -- " + shellQuote(c.APIKeyFile)})
		args = append(args, "--settings", string(settings))
	}
	args = append(args, "--allowedTools", strings.Join(allowed, ","))
	if len(denied) > 0 {
		args = append(args, "--disallowedTools", strings.Join(denied, ","))
	}
	return cmp.Or(c.Path, "claude"), append(args, c.ExtraArgs...)
}

// Stream implements CLI.
func (c *ClaudeCode) Stream(t *Turn) Stream { return &claudeStream{c: c, t: t} }

type claudeStream struct {
	c      *ClaudeCode
	t      *Turn
	prompt string
}

// hookID names latch's PreToolUse hook in the control protocol.
const hookID = "latch-policy"

// Begin registers the hook and sends the prompt. Standard input stays open
// for the answers to the CLI's questions until the result is in.
func (s *claudeStream) Begin() error {
	err := s.t.Send(map[string]any{"type": "control_request", "request_id": "latch-init",
		"request": map[string]any{"subtype": "initialize",
			"hooks": map[string]any{"PreToolUse": []any{map[string]any{"hookCallbackIds": []string{hookID}}}}}})
	if err != nil {
		return err
	}
	return s.t.Send(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": s.t.prompt}})
}

// claudeEvent is one line of Claude Code's stream-json output; only the
// fields latch uses are decoded.
type claudeEvent struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	// Parent is set on what a sub-agent says, which is not the answer.
	Parent  *string `json:"parent_tool_use_id"`
	Message *struct {
		Content claudeContent `json:"content"`
	} `json:"message"`
	Event *struct {
		Type  string `json:"type"`
		Delta *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	} `json:"event"`
	RequestID string          `json:"request_id"`
	Request   *claudeRequest  `json:"request"`
	Response  json.RawMessage `json:"response"`
	// The result.
	Result  string   `json:"result"`
	IsError bool     `json:"is_error"`
	Errors  []string `json:"errors"`
	Turns   int      `json:"num_turns"`
	CostUSD float64  `json:"total_cost_usd"`
	Usage   *struct {
		In  int `json:"input_tokens"`
		Out int `json:"output_tokens"`
	} `json:"usage"`
}

// claudeContent is a message's content: a string or a list of blocks.
type claudeContent []claudeBlock

func (c *claudeContent) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = claudeContent{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(b, (*[]claudeBlock)(c))
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   *claudeContent  `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (c claudeContent) text() string {
	var b strings.Builder
	for _, bl := range c {
		b.WriteString(bl.Text)
	}
	return b.String()
}

type claudeRequest struct {
	Subtype    string          `json:"subtype"`
	ToolName   string          `json:"tool_name"`
	Input      json.RawMessage `json:"input"`
	ToolUseID  string          `json:"tool_use_id"`
	CallbackID string          `json:"callback_id"` // hook_callback, whose Input is a claudeHookInput
}

type claudeHookInput struct {
	Event     string          `json:"hook_event_name"`
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	ToolUseID string          `json:"tool_use_id"`
}

// Line implements Stream. What it cannot make sense of (not JSON, an
// event of a newer version) is skipped: the CLI's output is read, not
// trusted to be well formed.
func (s *claudeStream) Line(line []byte) error {
	var e claudeEvent
	if err := json.Unmarshal(line, &e); err != nil {
		s.t.Log().Warn("skipped a line of the coding agent's output that is not an event", "err", err)
		return nil
	}
	switch e.Type {
	case "system":
		if e.Subtype == "init" {
			s.t.SetSession(e.SessionID)
		}
	case "stream_event":
		if e.Parent == nil && e.Event != nil && e.Event.Type == "content_block_delta" &&
			e.Event.Delta != nil && e.Event.Delta.Type == "text_delta" {
			s.t.Events().Text(e.Event.Delta.Text)
		}
	case "assistant":
		if e.Message != nil {
			for _, b := range e.Message.Content {
				if b.Type == "tool_use" && b.ID != "" {
					s.t.ToolCalled(agent.ToolCall{ID: b.ID, Name: b.Name, Summary: claudeSummary(b.Name, b.Input)})
				}
			}
		}
	case "user":
		if e.Message != nil {
			for _, b := range e.Message.Content {
				if b.Type == "tool_result" {
					var text string
					if b.Content != nil {
						text = b.Content.text()
					}
					s.t.ToolDone(b.ToolUseID, b.IsError, text)
				}
			}
		}
	case "control_request":
		return s.control(e.RequestID, e.Request)
	case "result":
		o := Outcome{Session: e.SessionID, Text: e.Result, CostUSD: e.CostUSD, Turns: e.Turns}
		if e.Usage != nil {
			o.Tokens = e.Usage.In + e.Usage.Out
		}
		if e.IsError || (e.Subtype != "" && e.Subtype != "success") {
			why := cmp.Or(strings.Join(e.Errors, "; "), e.Result, e.Subtype)
			o.Err = errors.New(clip(agent.Visible(why), 300))
			if strings.Contains(why, "No conversation found with session ID") {
				o.Err = fmt.Errorf("%w: %w", ErrSessionGone, o.Err)
			}
		}
		s.t.Finish(o)
	}
	return nil
}

// control answers one of the CLI's control requests.
func (s *claudeStream) control(id string, r *claudeRequest) error {
	if r == nil || id == "" {
		return nil
	}
	switch r.Subtype {
	case "hook_callback":
		return s.hook(id, r)
	case "can_use_tool":
		s.canUseTool(id, r)
		return nil
	}
	return s.t.Send(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "error", "request_id": id, "error": "latch does not handle " + r.Subtype}})
}

func (s *claudeStream) reply(id string, v any) {
	err := s.t.Send(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "success", "request_id": id, "response": v}})
	if err != nil {
		s.t.Log().Warn("could not answer the coding agent", "err", err)
	}
}

// hook is latch's PreToolUse hook: the owner's policy, before the CLI's
// own permission rules.
func (s *claudeStream) hook(id string, r *claudeRequest) error {
	var in claudeHookInput
	if json.Unmarshal(r.Input, &in) != nil || in.Event != "PreToolUse" || in.ToolUseID == "" {
		s.reply(id, map[string]any{})
		return nil
	}
	s.t.ToolCalled(agent.ToolCall{ID: in.ToolUseID, Name: in.ToolName, Summary: claudeSummary(in.ToolName, in.ToolInput)})
	decide := func(d, reason string) {
		s.reply(id, map[string]any{"hookSpecificOutput": map[string]any{
			"hookEventName": "PreToolUse", "permissionDecision": d, "permissionDecisionReason": reason}})
	}
	switch claudePermission(s.c.Policy, in.ToolName) {
	case agent.Allow:
		s.t.ToolRuns(in.ToolUseID)
		s.reply(id, map[string]any{})
	case agent.Deny:
		reason := "denied: the owner's policy does not allow " + in.ToolName
		s.t.ToolDenied(in.ToolUseID, reason)
		decide("deny", reason)
	default:
		decide("ask", "the owner's policy asks before "+in.ToolName)
	}
	return nil
}

// canUseTool relays a permission request to the owner.
func (s *claudeStream) canUseTool(id string, r *claudeRequest) {
	answer := func(allow bool, reason string) {
		if allow {
			s.t.ToolRuns(r.ToolUseID)
			input := r.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			s.reply(id, map[string]any{"behavior": "allow", "updatedInput": input})
			return
		}
		s.t.ToolDenied(r.ToolUseID, reason)
		s.reply(id, map[string]any{"behavior": "deny", "message": reason})
	}
	if claudePermission(s.c.Policy, r.ToolName) == agent.Deny {
		answer(false, "denied: the owner's policy does not allow "+r.ToolName)
		return
	}
	s.t.ToolCalled(agent.ToolCall{ID: r.ToolUseID, Name: r.ToolName, Summary: claudeSummary(r.ToolName, r.Input)})
	s.t.Ask(r.ToolName, claudeSummary(r.ToolName, r.Input), claudeDetail(r.ToolName, r.Input), answer)
}

// claudeSummary is a tool call's one-line description.
func claudeSummary(tool string, input json.RawMessage) string {
	var a struct {
		Command string `json:"command"`
		Path    string `json:"file_path"`
		Pattern string `json:"pattern"`
		URL     string `json:"url"`
		Query   string `json:"query"`
		Desc    string `json:"description"`
	}
	json.Unmarshal(input, &a)
	s := cmp.Or(a.Command, a.Path, a.Pattern, a.URL, a.Query, a.Desc)
	line, _, _ := strings.Cut(s, "\n")
	return clip(agent.Visible(line), 120)
}

// claudeDetail is what an approval request shows of a call: a command
// whole, other input as JSON with credentials redacted.
func claudeDetail(tool string, input json.RawMessage) string {
	var a struct {
		Command string `json:"command"`
	}
	json.Unmarshal(input, &a)
	if tool == "Bash" && a.Command != "" {
		return agent.Visible(a.Command)
	}
	return agent.Visible(fmt.Sprintf("Claude Code tool %q\n%s", tool, tools.RedactJSON(input)))
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
