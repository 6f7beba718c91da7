package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/turn"
)

// Tool names, as the model sees them and as [agent.permissions] keys them.
const (
	ToolRead     = "read_file"
	ToolWrite    = "write_file"
	ToolEdit     = "edit_file"
	ToolList     = "list_files"
	ToolGrep     = "grep"
	ToolBash     = "bash"
	ToolFetch    = "fetch"
	ToolSendFile = "send_file"
)

// MaxSendFile bounds a file handed to the chat (Telegram's bot upload limit).
const MaxSendFile = 50 << 20

// Toolbox holds the tools and what they act on.
type Toolbox struct {
	Workspace   *tools.Workspace
	Fetcher     *tools.Fetcher
	BashTimeout time.Duration
	// Reaper is the daemon's orphan reaper, or nil.
	Reaper *tools.Reaper
	// Cgroups gives each command a cgroup of its own; nil for none.
	Cgroups *tools.Cgroups
	// MCP offers the tools of the configured MCP servers; nil for none.
	MCP MCPServers
	// Schedule makes the schedule tool's jobs; nil: the tool says it is
	// not available.
	Schedule Scheduler
}

// MCPServers is what the agent needs of the MCP client (agent/mcp): the
// servers' tools, namespaced "server__tool" (a name latch's own tools
// never have), their permissions, and calls.
type MCPServers interface {
	// Tools are the tools offered now, without those denied.
	Tools() []provider.Tool
	// Permission is "allow", "ask" or "deny" for a namespaced name.
	Permission(name string) string
	Call(ctx context.Context, name string, input json.RawMessage) (string, error)
	// Reset is called on /new.
	Reset()
	// StatusLines describe the servers, one line each, for /status.
	StatusLines() []string
}

// isMCPTool reports whether name is an MCP server's tool.
func isMCPTool(name string) bool { return strings.Contains(name, mcpSeparator) }

// mcpSeparator joins server and tool in an MCP tool's name (agent/mcp.Separator).
const mcpSeparator = "__"

// defs is what the model is offered: latch's tools the policy does not
// deny, then the MCP servers'.
func (a *Agent) defs() []provider.Tool {
	defs := a.cfg.Tools.offered(a.cfg.Policy.Defs())
	if a.cfg.Tools != nil && a.cfg.Tools.MCP != nil {
		defs = append(defs, a.cfg.Tools.MCP.Tools()...)
	}
	return defs
}

// permission is the policy for tool: an MCP tool's from its server's
// configuration, latch's own from the policy.
func (a *Agent) permission(tool string) Permission {
	if isMCPTool(tool) {
		if a.cfg.Tools == nil || a.cfg.Tools.MCP == nil {
			return Deny
		}
		return Policy{tool: Permission(a.cfg.Tools.MCP.Permission(tool))}.For(tool)
	}
	return a.cfg.Policy.For(tool)
}

// File is a workspace file the agent hands to the chat.
type File = turn.File

var toolDefs = []provider.Tool{
	{Name: ToolRead, Description: "Read a text file of the workspace. Lines come numbered like `cat -n`; the numbers are not part of the file. Use offset/limit for long files.",
		Schema: schema(`"path":{"type":"string","description":"path relative to the workspace"},"offset":{"type":"integer","description":"first line, 1-based"},"limit":{"type":"integer","description":"number of lines"}`, "path")},
	{Name: ToolWrite, Description: "Create or overwrite a file of the workspace with the given content. Parent directories are created.",
		Schema: schema(`"path":{"type":"string"},"content":{"type":"string"}`, "path", "content")},
	{Name: ToolEdit, Description: "Replace one exact occurrence of `old` with `new` in a file. `old` must occur exactly once; include enough context. Do not include read_file line numbers.",
		Schema: schema(`"path":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"}`, "path", "old", "new")},
	{Name: ToolList, Description: "List files of the workspace matching a glob (`**` matches any depth), e.g. `**/*.go` or `src/*`. Empty lists the top level.",
		Schema: schema(`"pattern":{"type":"string"}`)},
	{Name: ToolGrep, Description: "Search file contents with an RE2 regular expression, matched against each line (^ and $ are a line's start and end). Returns path:line:text.",
		Schema: schema(`"pattern":{"type":"string"},"path":{"type":"string","description":"file or directory, default ."},"glob":{"type":"string","description":"only files matching this glob"}`, "pattern")},
	{Name: ToolBash, Description: "Run a shell command with bash -c in the workspace. After the timeout it is killed with every process it started, also ones that left its process group or session; background processes do not outlive it. Output is capped (the tail is kept).",
		Schema: schema(`"command":{"type":"string"}`, "command")},
	{Name: ToolFetch, Description: "HTTP GET or POST a URL on the public internet and return the status, headers and text body. Private and local addresses are refused.",
		Schema: schema(`"url":{"type":"string"},"method":{"type":"string","enum":["GET","POST"]},"body":{"type":"string"},"content_type":{"type":"string"},"headers":{"type":"object","additionalProperties":{"type":"string"}}`, "url")},
	{Name: ToolSendFile, Description: "Send a file of the workspace to the owner's chat.",
		Schema: schema(`"path":{"type":"string"}`, "path")},
	scheduleDef,
}

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

// Defs returns the tool definitions given to the model, without the tools
// the policy denies outright.
func (p Policy) Defs() []provider.Tool {
	var out []provider.Tool
	for _, d := range toolDefs {
		if p.For(d.Name) != Deny {
			out = append(out, d)
		}
	}
	return out
}

type bashArgs struct {
	Command string `json:"command"`
}

type sendArgs struct {
	Path string `json:"path"`
}

// decode unmarshals tool input strictly: unknown fields are errors the
// model can read and correct.
func decode(input json.RawMessage, v any) error {
	if len(input) == 0 {
		input = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(input)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

// run executes one tool call. send_file returns the file for the caller to
// deliver; the text result is what the model sees.
func (tb *Toolbox) run(ctx context.Context, name string, input json.RawMessage) (string, *File, error) {
	ws := tb.Workspace
	switch name {
	case ToolRead:
		var a tools.ReadArgs
		return call(ctx, input, &a, ws.ReadFile)
	case ToolWrite:
		var a tools.WriteArgs
		return call(ctx, input, &a, ws.WriteFile)
	case ToolEdit:
		var a tools.EditArgs
		return call(ctx, input, &a, ws.EditFile)
	case ToolList:
		var a tools.ListArgs
		return call(ctx, input, &a, ws.ListFiles)
	case ToolGrep:
		var a tools.GrepArgs
		return call(ctx, input, &a, ws.Grep)
	case ToolFetch:
		var a tools.FetchArgs
		return call(ctx, input, &a, tb.Fetcher.Fetch)
	case ToolBash:
		var a bashArgs
		if err := decode(input, &a); err != nil {
			return "", nil, err
		}
		res, err := tools.RunBash(ctx, tools.BashOptions{Dir: ws.Dir(), Timeout: tb.BashTimeout, Reaper: tb.Reaper, Cgroups: tb.Cgroups}, a.Command)
		if err != nil {
			return "", nil, err
		}
		return res.Output + "\n[" + res.Summary() + "]", nil, nil
	case ToolSendFile:
		var a sendArgs
		if err := decode(input, &a); err != nil {
			return "", nil, err
		}
		fname, data, err := ws.ReadAll(a.Path, MaxSendFile)
		if err != nil {
			return "", nil, err
		}
		return fmt.Sprintf("sent %s (%d bytes) to the chat", fname, len(data)), &File{Name: fname, Data: data}, nil
	case ToolSchedule:
		out, err := tb.schedule(ctx, input)
		return out, nil, err
	}
	if isMCPTool(name) && tb.MCP != nil {
		out, err := tb.MCP.Call(ctx, name, input)
		return out, nil, err
	}
	return "", nil, fmt.Errorf("unknown tool %q", name)
}

func call[A any](ctx context.Context, input json.RawMessage, a *A, fn func(context.Context, A) (string, error)) (string, *File, error) {
	if err := decode(input, a); err != nil {
		return "", nil, err
	}
	out, err := fn(ctx, *a)
	return out, nil, err
}

// Summary is a one-line description of a tool call for progress lines and
// approval requests: the command, the path and a size, the URL.
func Summary(name string, input json.RawMessage) string {
	var a struct {
		Path, Command, URL, Method, Pattern, Content, Old, New string
	}
	json.Unmarshal(input, &a)
	if server, tool, ok := strings.Cut(name, mcpSeparator); ok {
		return turn.OneLine(server+" › "+tool+" "+tools.RedactJSON(input), 200)
	}
	switch name {
	case ToolBash:
		return turn.OneLine(a.Command, 200)
	case ToolWrite:
		return fmt.Sprintf("%s (%d bytes, %d lines)", a.Path, len(a.Content), strings.Count(a.Content, "\n")+1)
	case ToolEdit:
		return fmt.Sprintf("%s (-%d +%d lines)", a.Path, strings.Count(a.Old, "\n")+1, strings.Count(a.New, "\n")+1)
	case ToolFetch:
		m := a.Method
		if m == "" {
			m = "GET"
		}
		return m + " " + turn.OneLine(a.URL, 200)
	case ToolList, ToolGrep:
		s := a.Pattern
		if a.Path != "" {
			s += " in " + a.Path
		}
		return turn.OneLine(s, 200)
	case ToolSchedule:
		return turn.OneLine(scheduleLine(input), 200)
	}
	return turn.OneLine(a.Path, 200)
}
