// Package mcp is latch's Model Context Protocol client: it keeps the
// configured MCP servers running (stdio servers as child processes latch
// owns, streamable-HTTP servers as sessions), offers their tools to the
// agent under namespaced names (server__tool) and runs the calls the model
// makes, with a timeout, a size cap and credentials scrubbed from what
// comes back.
//
// It does not link the MCP SDK: the protocol is spoken by a sidecar
// process (cmd/latch-mcp, built on the official go-sdk in agent/mcp/mcpsdk)
// that the Manager starts with the first server and talks to over
// agent/mcp/wire. The daemon still starts, owns and kills the stdio
// servers; the sidecar only gets their pipes. Nothing here runs unless a
// server is configured: New with no servers returns nil, and a nil
// *Manager offers no tools.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/agent/mcp/wire"
	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/logkey"
)

// Separator joins a server's name and its tool's in the name the model
// sees. Server names have no underscore, so the first one splits it.
const Separator = "__"

// MaxResult caps the text of one call's result handed to the model and the
// chat: 64 KiB, like a bash command's output; the head is kept.
const MaxResult = 64 << 10

// toolNameRe is what both Anthropic and OpenAI accept as a tool name.
var toolNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })

// Server is one configured MCP server: Command (with Args and Env) for a
// stdio server latch starts, or URL (with Headers) for a streamable-HTTP
// one.
type Server struct {
	Name    string
	Command string
	Args    []string
	Env     map[string]string // added to the minimal environment
	URL     string
	Headers map[string]string // sent with every request; secrets
	Timeout time.Duration     // one call; also the start and the tool listing
	Tools   []string          // allowlist of tool names; nil: all
	// Permission is "allow", "ask" or "deny"; Permissions["server.tool"]
	// overrides it per tool.
	Permission   string
	RestartOnNew bool
}

// Options configures a Manager.
type Options struct {
	Servers     []Server
	Permissions map[string]string
	// Dir is where stdio servers run: the workspace.
	Dir string
	// Reaper and Cgroups are the daemon's, as for bash; nil outside one.
	Reaper  *tools.Reaper
	Cgroups *tools.Cgroups
	Log     *slog.Logger
	// Secrets are scrubbed from every result and error (the daemon's
	// tokens and keys); the servers' header values are added.
	Secrets []string
	// Environ is the daemon's environment, from which the minimal one is
	// taken; nil means os.Environ.
	Environ []string
	// Sidecar is the path of the latch-mcp binary; "" means
	// DefaultSidecar.
	Sidecar string
}

// Manager runs the servers and their tools.
type Manager struct {
	opts    Options
	log     *slog.Logger
	secrets []string
	servers []*server
	sidecar *sidecar

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// New returns a Manager for opts, or nil when no server is configured.
func New(opts Options) *Manager {
	if len(opts.Servers) == 0 {
		return nil
	}
	m := &Manager{opts: opts, log: opts.Log}
	m.sidecar = &sidecar{m: m}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	var values []string
	for _, s := range opts.Servers {
		for _, v := range s.Headers {
			values = append(values, v)
		}
		for k, v := range s.Env {
			if tools.IsCredentialHeader(k) {
				values = append(values, v)
			}
		}
	}
	m.secrets = append(tools.SecretsOf(values...), tools.SecretsOf(opts.Secrets...)...)
	for _, s := range opts.Servers {
		m.servers = append(m.servers, &server{m: m, cfg: s, restart: make(chan struct{}, 1)})
	}
	return m
}

// Start starts every server's supervisor; they run until Close.
func (m *Manager) Start(ctx context.Context) {
	if m == nil {
		return
	}
	ctx, m.cancel = context.WithCancel(ctx)
	for _, s := range m.servers {
		m.wg.Go(func() { s.run(ctx) })
	}
}

// Close stops every server, each with every process it started, waits
// for them, then stops the sidecar.
func (m *Manager) Close() {
	if m == nil || m.cancel == nil {
		return
	}
	m.cancel()
	m.wg.Wait()
	m.sidecar.close()
}

// SidecarPid is the running sidecar's process id; 0 for none.
func (m *Manager) SidecarPid() int {
	if m == nil {
		return 0
	}
	return m.sidecar.pid()
}

// Reset restarts the servers configured with restart_on_new, when the
// chat starts a new conversation.
func (m *Manager) Reset() {
	if m == nil {
		return
	}
	for _, s := range m.servers {
		if s.cfg.RestartOnNew {
			s.requestRestart("a new conversation began")
		}
	}
}

// Tools returns the tools the model is offered now: those of the running
// servers, namespaced, without the ones whose permission is deny.
func (m *Manager) Tools() []provider.Tool {
	if m == nil {
		return nil
	}
	var out []provider.Tool
	for _, s := range m.servers {
		for _, t := range s.toolList() {
			if m.Permission(t.Name) != "deny" {
				out = append(out, t)
			}
		}
	}
	return out
}

// split returns the server and tool a namespaced name stands for.
func (m *Manager) split(name string) (*server, string, bool) {
	srv, tool, ok := strings.Cut(name, Separator)
	if !ok {
		return nil, "", false
	}
	for _, s := range m.servers {
		if s.cfg.Name == srv {
			return s, tool, true
		}
	}
	return nil, "", false
}

// Permission is "allow", "ask" or "deny" for the namespaced tool name;
// "deny" for a name no server has.
func (m *Manager) Permission(name string) string {
	if m == nil {
		return "deny"
	}
	s, tool, ok := m.split(name)
	if !ok {
		return "deny"
	}
	if p, ok := m.opts.Permissions[s.cfg.Name+"."+tool]; ok {
		return p
	}
	if s.cfg.Permission == "" {
		return "ask"
	}
	return s.cfg.Permission
}

// errTimeout is the cause of a call's own timeout.
var errTimeout = errors.New("mcp: call timed out")

// Call runs the namespaced tool name with input (a JSON object). The text
// is what the model sees; an error's text too. ctx ending (/stop) cancels
// the call: the server is sent notifications/cancelled.
func (m *Manager) Call(ctx context.Context, name string, input json.RawMessage) (string, error) {
	if m == nil {
		return "", fmt.Errorf("unknown tool %q", name)
	}
	s, tool, ok := m.split(name)
	if !ok || !s.hasTool(tool) {
		return "", fmt.Errorf("unknown tool %q", name)
	}
	c := s.current()
	if c == nil {
		return "", fmt.Errorf("MCP server %s is not running: %s", s.cfg.Name, m.scrub(s.lastError()))
	}
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	start := time.Now()
	callCtx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, errTimeout)
	defer cancel()
	res, err := c.session.call(callCtx, tool, input)
	log := m.log.With("mcp_server", s.cfg.Name, "tool", tool, "duration", time.Since(start).Round(time.Millisecond))
	switch {
	case ctx.Err() != nil:
		log.Info("mcp call stopped")
		return "", fmt.Errorf("stopped: %w", context.Cause(ctx))
	case errors.Is(context.Cause(callCtx), errTimeout):
		log.Warn("mcp call timed out; restarting the server")
		what := "latch cancelled the call"
		if c.proc != nil {
			s.kill(c, fmt.Sprintf("a call of %s timed out after %v", tool, s.cfg.Timeout))
			what = "latch stopped the server, with every process it started, and starts it again"
		}
		return "", fmt.Errorf("MCP server %s did not answer %s within %v; %s", s.cfg.Name, tool, s.cfg.Timeout, what)
	case err != nil:
		log.Warn("mcp call failed", logkey.Err, m.scrub(err.Error()))
		return "", errors.New(m.scrub(fmt.Sprintf("MCP server %s: %v", s.cfg.Name, err)))
	}
	text := capText(m.scrub(res.Text))
	log.Info("mcp call", "is_error", res.IsError, "bytes", len(text))
	if res.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

// scrub hides the secrets latch knows of and every credential-looking
// line.
func (m *Manager) scrub(s string) string {
	return tools.ScrubCredentialLines(tools.Scrub(s, m.secrets))
}

// Status is one server's state, for /status, latch status and doctor.
type Status struct {
	Name      string
	Transport string // "stdio" or "http"
	State     string // "starting", "running" or "down"
	Tools     int
	Restarts  int    // times it had to be started again after a failure
	Err       string // why it is down, or last went down; scrubbed
	Skipped   []string
	Offered   []string // the namespaced names of the tools offered
}

// Line is s in one line: "notes (stdio): running, 4 tools".
func (s Status) Line() string {
	b := fmt.Sprintf("%s (%s): %s", s.Name, s.Transport, s.State)
	if s.State == "running" {
		b += fmt.Sprintf(", %d tools", s.Tools)
	}
	if s.Restarts > 0 {
		b += fmt.Sprintf(", started again %d× after failing", s.Restarts)
	}
	if s.Err != "" {
		b += " (last failure: " + s.Err + ")"
	}
	if len(s.Skipped) > 0 {
		b += "; not offered: " + strings.Join(s.Skipped, "; ")
	}
	return b
}

// Statuses reports every server, in configuration order.
func (m *Manager) Statuses() []Status {
	if m == nil {
		return nil
	}
	out := make([]Status, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s.status())
	}
	return out
}

// namespace turns a server's tool list into what the model is offered,
// and says which tools it leaves out: not in the allowlist, a name the
// providers refuse, or a name listed twice (neither is offered, rather
// than one silently standing for the other).
func namespace(server string, allow []string, list []wire.Tool) (offered []provider.Tool, raw map[string]bool, skipped []string) {
	count := map[string]int{}
	for _, t := range list {
		count[t.Name]++
	}
	raw = map[string]bool{}
	reported := map[string]bool{}
	for _, t := range list {
		name := server + Separator + t.Name
		switch {
		case allow != nil && !slices.Contains(allow, t.Name):
			continue
		case count[t.Name] > 1:
			if !reported[t.Name] {
				reported[t.Name] = true
				skipped = append(skipped, fmt.Sprintf("%q is listed more than once", oneLine(t.Name, 80)))
			}
			continue
		case !toolNameRe().MatchString(name):
			skipped = append(skipped, fmt.Sprintf("%q (as %s the name is not one the model providers accept: 1-64 of a-z A-Z 0-9 _ -)", oneLine(t.Name, 80), oneLine(name, 80)))
			continue
		}
		raw[t.Name] = true
		offered = append(offered, provider.Tool{Name: name, Description: describe(server, t.Description), Schema: objectSchema(t.InputSchema)})
	}
	for _, a := range allow {
		if count[a] == 0 {
			skipped = append(skipped, fmt.Sprintf("%q is in tools but the server has no such tool", a))
		}
	}
	return offered, raw, skipped
}

// describe prefixes a tool's description with its server, cut to 2 KB.
func describe(server, desc string) string {
	d := "(MCP server " + server + ") " + strings.TrimSpace(desc)
	if len(d) > 2048 {
		d = tools.CutText(d, 2048) + "…"
	}
	return d
}

// objectSchema returns the tool's input schema, or an open object schema
// where the server gave none or something else.
func objectSchema(s json.RawMessage) json.RawMessage {
	var probe struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(s, &probe) != nil || probe.Type != "object" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return s
}

// capText keeps the first MaxResult bytes of s and says what it left out.
func capText(s string) string {
	if len(s) <= MaxResult {
		return s
	}
	return tools.CutText(s, MaxResult) + fmt.Sprintf("\n[result cut: showing the first %d of %d bytes; latch caps an MCP result at 64 KiB]", MaxResult, len(s))
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return tools.CutText(s, n) + "…"
	}
	return s
}

// StatusLines is Statuses as one line each, for /status.
func (m *Manager) StatusLines() []string {
	var out []string
	for _, s := range m.Statuses() {
		out = append(out, s.Line())
	}
	return out
}

// Probe starts each server of opts once, lists its tools and stops it
// again, with everything it started: `latch doctor`'s check. Each status
// is "running" with the tools it offers, or "down" with why.
func Probe(ctx context.Context, opts Options) []Status {
	m := New(opts)
	if m == nil {
		return nil
	}
	defer m.sidecar.close()
	out := make([]Status, 0, len(m.servers))
	for _, s := range m.servers {
		c, err := s.connect(ctx)
		if err != nil {
			s.failed(err)
		}
		st := s.status() // before down forgets the tools
		st.Restarts = 0
		if err == nil {
			s.down(c)
		}
		out = append(out, st)
	}
	return out
}
