package coder

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/latchd/latch/agent"
)

// EnvCodexAPIKey is the variable `codex exec` takes an API key from.
const EnvCodexAPIKey = "CODEX_API_KEY"

// Codex runs OpenAI's `codex exec --json`, the prompt on its standard
// input, and continues a session with `codex exec resume`.
//
// Codex's non-interactive mode cannot ask anyone before a command runs, so
// latch never lets it ask (approval_policy "never") and bounds it with its
// sandbox instead, chosen from [agent.permissions] by CodexSandbox.
type Codex struct {
	Path      string // default "codex"
	ModelName string
	Profile   string
	// BaseURL, when set, is the Responses API root (with /v1) Codex talks
	// to, as a model provider of its own that takes EnvCodexAPIKey.
	BaseURL string
	Policy  agent.Policy
}

// Codex sandbox modes, as its --sandbox spells them.
const (
	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
)

// CodexSandbox maps latch's policy onto Codex's sandbox:
//
//   - bash, write_file and edit_file all "allow": workspace-write, the
//     workspace writable, the rest of the machine read-only;
//   - anything else (the default asks before bash, write_file and
//     edit_file): read-only, so that nothing the owner would be asked
//     about changes a file; commands that only read still run, since Codex
//     cannot hold one for the owner's press;
//   - network: only with fetch "allow" (and workspace-write); otherwise
//     commands have none.
//
// Full access (danger-full-access) is never chosen.
func CodexSandbox(p agent.Policy) (sandbox string, network bool) {
	for _, tool := range []string{agent.ToolBash, agent.ToolWrite, agent.ToolEdit} {
		if p.For(tool) != agent.Allow {
			return SandboxReadOnly, false
		}
	}
	return SandboxWorkspaceWrite, p.For(agent.ToolFetch) == agent.Allow
}

// Name implements CLI.
func (c *Codex) Name() string { return "codex" }

// Model implements CLI.
func (c *Codex) Model() string { return c.ModelName }

// Command implements CLI.
func (c *Codex) Command(session, _ string) (string, []string) {
	sandbox, network := CodexSandbox(c.Policy)
	args := []string{"exec", "--json", "--skip-git-repo-check", "--color", "never",
		"-c", `approval_policy="never"`, "--sandbox", sandbox,
		// Codex hands its environment to the commands it runs; its key
		// stays out (the rest is latch's minimal environment).
		"-c", `shell_environment_policy.exclude=["` + EnvCodexAPIKey + `"]`}
	if network {
		args = append(args, "-c", "sandbox_workspace_write.network_access=true")
	}
	if c.ModelName != "" {
		args = append(args, "--model", c.ModelName)
	}
	if c.BaseURL != "" {
		args = append(args, "-c", `model_provider="latch"`, "-c", fmt.Sprintf(
			`model_providers.latch={name="latch",base_url=%s,env_key=%q,wire_api="responses"}`,
			strconv.Quote(c.BaseURL), EnvCodexAPIKey))
	}
	if c.Profile != "" {
		args = append(args, "--profile", c.Profile)
	}
	if session != "" {
		args = append(args, "resume", session)
	}
	return cmp.Or(c.Path, "codex"), append(args, "-")
}

// Stream implements CLI.
func (c *Codex) Stream(t *Turn) Stream { return &codexStream{t: t} }

type codexStream struct {
	t    *Turn
	last string // the last agent message: the answer
	said bool
}

// Begin sends the prompt and closes standard input: Codex reads nothing
// more.
func (s *codexStream) Begin() error {
	_, err := s.t.in.Write([]byte(s.t.prompt))
	s.t.CloseInput()
	return err
}

type codexEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Item     *struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Text     string `json:"text"`
		Command  string `json:"command"`
		Output   string `json:"aggregated_output"`
		ExitCode *int   `json:"exit_code"`
		Status   string `json:"status"`
		Server   string `json:"server"`
		Tool     string `json:"tool"`
		Query    string `json:"query"`
		Changes  []struct {
			Path string `json:"path"`
		} `json:"changes"`
	} `json:"item"`
	Usage *struct {
		In  int `json:"input_tokens"`
		Out int `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

// Line implements Stream; what it does not know it skips.
func (s *codexStream) Line(line []byte) error {
	var e codexEvent
	if err := json.Unmarshal(line, &e); err != nil {
		s.t.Log().Warn("skipped a line of the coding agent's output that is not an event", "err", err)
		return nil
	}
	switch e.Type {
	case "thread.started":
		s.t.SetSession(e.ThreadID)
	case "item.started", "item.completed":
		if e.Item != nil {
			s.item(e.Type == "item.completed", e)
		}
	case "turn.completed":
		o := Outcome{Text: s.last, Turns: 1}
		if e.Usage != nil {
			o.Tokens = e.Usage.In + e.Usage.Out
		}
		s.t.Finish(o)
	case "turn.failed":
		why := "the turn failed"
		if e.Error != nil {
			why = cmp.Or(e.Error.Message, why)
		}
		s.t.Finish(Outcome{Text: s.last, Err: errors.New(clip(agent.Visible(why), 300))})
	}
	return nil
}

func (s *codexStream) item(done bool, e codexEvent) {
	it := e.Item
	var name, summary string
	switch it.Type {
	case "agent_message":
		if done && it.Text != "" {
			if s.said {
				s.t.Events().Text("\n\n")
			}
			s.t.Events().Text(it.Text)
			s.last, s.said = it.Text, true
		}
		return
	case "command_execution":
		name, summary = "shell", it.Command
	case "file_change":
		var paths []string
		for _, c := range it.Changes {
			paths = append(paths, c.Path)
		}
		name, summary = "edit", strings.Join(paths, ", ")
	case "mcp_tool_call":
		name, summary = it.Server+"__"+it.Tool, ""
	case "web_search":
		name, summary = "web_search", it.Query
	default:
		return // reasoning, to-do lists, and what a newer version adds
	}
	if it.ID == "" {
		return
	}
	line, _, _ := strings.Cut(summary, "\n")
	s.t.ToolCalled(agent.ToolCall{ID: it.ID, Name: name, Summary: clip(agent.Visible(line), 120)})
	s.t.ToolRuns(it.ID)
	if !done {
		return
	}
	failed := it.Status == "failed" || it.Status == "declined" || (it.ExitCode != nil && *it.ExitCode != 0)
	s.t.ToolDone(it.ID, failed, lastLine(it.Output))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return agent.Visible(s)
}
