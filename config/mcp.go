package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// MCP server defaults and bounds.
const (
	// DefaultMCPTimeout bounds one tool call of an MCP server.
	DefaultMCPTimeout = 60 * time.Second
	// MaxMCPTimeout is the longest mcp.servers.timeout accepted.
	MaxMCPTimeout = 24 * time.Hour
	maxMCPHeaders = 64 << 10
)

// MCPConfig is [mcp]: the Model Context Protocol servers whose tools the
// agent is offered beside its own.
type MCPConfig struct {
	Servers []MCPServer
	// Permissions overrides a server's permission for one of its tools,
	// keyed "server.tool" as [mcp.permissions] writes it.
	Permissions map[string]string
}

// MCPServer is one [[mcp.servers]] entry. Exactly one of Command (a stdio
// server latch starts) and URL (a streamable-HTTP server) is set.
type MCPServer struct {
	Name    string
	Command string
	Args    []string
	// Env is what the server's environment holds beyond the minimal one
	// latch gives it (PATH, HOME, USER, LANG, …): values may be secrets.
	Env map[string]string `json:"-"`
	URL string
	// Headers go with every request to URL: headers and headers_file
	// together. Values are secrets.
	Headers     map[string]string `json:"-"`
	HeadersFile string
	Enabled     bool
	Timeout     time.Duration
	Tools       []string // allowlist of the server's tool names; nil offers all
	Permission  string   // PermAllow, PermAsk (default) or PermDeny
	// RestartOnNew restarts the server when the chat starts a new
	// conversation (/new), so it keeps no state from the old one.
	RestartOnNew bool
}

// Stdio reports whether latch starts the server as a child process.
func (s MCPServer) Stdio() bool { return s.Command != "" }

// String describes s without its header or environment values.
func (s MCPServer) String() string {
	return fmt.Sprintf("{Name:%q Command:%q Args:%q Env:%v URL:%q Headers:%v HeadersFile:%q Enabled:%t Timeout:%v Tools:%q Permission:%q RestartOnNew:%t}",
		s.Name, s.Command, s.Args, redactedMap(s.Env), s.URL, redactedMap(s.Headers), s.HeadersFile,
		s.Enabled, s.Timeout, s.Tools, s.Permission, s.RestartOnNew)
}

// GoString is String for %#v.
func (s MCPServer) GoString() string { return "config.MCPServer" + s.String() }

// LogValue keeps header and environment values out of structured logs.
func (s MCPServer) LogValue() slog.Value { return slog.StringValue(s.String()) }

// redactedMap lists m's keys, each with its value redacted.
func redactedMap(m map[string]string) string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":[redacted]"
	}
	return "map[" + strings.Join(parts, " ") + "]"
}

// MCPSecrets returns every header value and every environment value whose
// name says it is a credential, for the log redactor.
func (m MCPConfig) MCPSecrets() []string {
	var out []string
	for _, s := range m.Servers {
		for _, v := range s.Headers {
			out = append(out, v)
			if _, tok, ok := strings.Cut(v, " "); ok { // "Bearer <token>"
				out = append(out, strings.TrimSpace(tok))
			}
		}
		for k, v := range s.Env {
			if secretName(k) {
				out = append(out, v)
			}
		}
	}
	return out
}

// secretName reports whether an environment variable's name says it holds
// a credential.
func secretName(name string) bool {
	u := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "COOKIE"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

type fileMCP struct {
	Servers     []fileMCPServer   `toml:"servers"`
	Permissions map[string]string `toml:"permissions"`
}

type fileMCPServer struct {
	Name         string            `toml:"name"`
	Command      string            `toml:"command"`
	Args         []string          `toml:"args"`
	Env          map[string]string `toml:"env"`
	URL          string            `toml:"url"`
	Headers      map[string]string `toml:"headers"`
	HeadersFile  string            `toml:"headers_file"`
	Enabled      *bool             `toml:"enabled"`
	Timeout      string            `toml:"timeout"`
	Tools        []string          `toml:"tools"`
	Permission   string            `toml:"permission"`
	RestartOnNew bool              `toml:"restart_on_new"`
}

// mcpServerKeys are the keys of one [[mcp.servers]] entry.
var mcpServerKeys = []string{"name", "command", "args", "env", "url", "headers", "headers_file",
	"enabled", "timeout", "tools", "permission", "restart_on_new"}

// knownMCPKey reports whether k (as toml.Key.String spells it) belongs
// to the [mcp] schema. env, headers and permissions take keys of the
// owner's choosing.
func knownMCPKey(k string) bool {
	switch k {
	case "mcp", "mcp.servers", "mcp.permissions":
		return true
	}
	if strings.HasPrefix(k, "mcp.permissions.") {
		return true
	}
	field, ok := strings.CutPrefix(k, "mcp.servers.")
	if !ok {
		return false
	}
	for _, table := range []string{"env.", "headers."} {
		if strings.HasPrefix(field, table) {
			return true
		}
	}
	return slices.Contains(mcpServerKeys, field)
}

// mcpSecretsHeld reports whether config.toml holds an MCP credential (a
// header or an environment value), which makes it as private as a token.
func mcpSecretsHeld(m fileMCP) bool {
	for _, s := range m.Servers {
		if len(s.Headers) > 0 || len(s.Env) > 0 {
			return true
		}
	}
	return false
}

// mcpFileSecrets lists the MCP values of config.toml an error must not
// show: the headers, and env values whose names say they are credentials.
func mcpFileSecrets(m fileMCP) []string {
	var out []string
	for _, s := range m.Servers {
		for _, v := range s.Headers {
			out = append(out, v)
		}
		for k, v := range s.Env {
			if secretName(k) {
				out = append(out, v)
			}
		}
	}
	return out
}

// mcpNameRe is what a server name may be. The model sees a tool as
// server__tool, and Anthropic and OpenAI both take tool names of
// ^[a-zA-Z0-9_-]{1,64}$; a name without underscores keeps the split
// unambiguous and leaves the tool most of the 64.
// Compiled on first use: a config without [mcp] pays nothing at start.
var mcpNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,23}$`) })

// headerNameRe is an HTTP header field name (RFC 9110 token).
var headerNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$") })

// applyMCPFile copies [mcp] into cfg, reading headers files.
func (l Loader) applyMCPFile(cfg *Config, m fileMCP, secrets *[]string) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", cfg.Path, key, fmt.Sprintf(format, args...)))
	}
	names := map[string]bool{}
	for i, f := range m.Servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		if f.Name != "" {
			key = fmt.Sprintf("mcp.servers %q", f.Name)
		}
		s, ok := l.mcpServer(cfg, f, key, bad, secrets)
		if !ok {
			continue
		}
		if names[s.Name] {
			bad(key, "a second server of that name; names must be unique")
			continue
		}
		names[s.Name] = true
		cfg.MCP.Servers = append(cfg.MCP.Servers, s)
	}
	for k, v := range m.Permissions {
		server, tool, ok := strings.Cut(k, ".")
		switch {
		case !ok || server == "" || tool == "":
			bad("mcp.permissions", "%q: a key is \"server.tool\"", k)
		case !names[server]:
			bad("mcp.permissions", "%q: no [[mcp.servers]] is named %q", k, server)
		case v != PermAllow && v != PermAsk && v != PermDeny:
			bad("mcp.permissions", "%q: must be %q, %q or %q", k, PermAllow, PermAsk, PermDeny)
		default:
			if cfg.MCP.Permissions == nil {
				cfg.MCP.Permissions = make(map[string]string)
			}
			cfg.MCP.Permissions[k] = v
		}
	}
	return errs
}

// mcpServer validates one server entry.
func (l Loader) mcpServer(cfg *Config, f fileMCPServer, key string, bad func(string, string, ...any), secrets *[]string) (MCPServer, bool) {
	s := MCPServer{Name: f.Name, Command: f.Command, Args: f.Args, Env: f.Env,
		Enabled: f.Enabled == nil || *f.Enabled, Timeout: DefaultMCPTimeout, Tools: f.Tools,
		Permission: PermAsk, RestartOnNew: f.RestartOnNew}
	ok := true
	fail := func(format string, args ...any) { bad(key, format, args...); ok = false }
	if !mcpNameRe().MatchString(f.Name) {
		fail("name must be 1-24 letters, digits and '-', starting with a letter or digit (the model sees its tools as name__tool)")
	}
	switch {
	case f.Command != "" && f.URL != "":
		fail("command and url are both set; a server is either started by latch (command) or reached over HTTP (url)")
	case f.Command == "" && f.URL == "":
		fail("set command (a stdio server latch starts) or url (a streamable-HTTP server)")
	case f.Command != "":
		if len(f.Headers) > 0 || f.HeadersFile != "" {
			fail("headers and headers_file are for a url server")
		}
		for k := range f.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				fail("env: %q is not a variable name", k)
			}
		}
	default:
		if len(f.Args) > 0 || len(f.Env) > 0 {
			fail("args and env are for a command server")
		}
		u, err := mcpURL(f.URL)
		if err != nil {
			fail("url: %v", err)
		}
		s.URL = u
		s.Headers = map[string]string{}
		for k, v := range f.Headers {
			s.Headers[k] = v
		}
		if f.HeadersFile != "" {
			p, err := l.resolvePath(f.HeadersFile, cfg.Home)
			if err == nil {
				err = readHeadersFile(p, s.Headers, secrets)
			}
			if err != nil {
				fail("headers_file: %v", err)
			}
			s.HeadersFile = p
		}
		for k, v := range s.Headers {
			if !headerNameRe().MatchString(k) || strings.ContainsAny(v, "\r\n\x00") {
				fail("headers: %q is not a valid header (the value is not shown)", k)
			}
		}
	}
	if f.Timeout != "" {
		d, err := parseDuration(f.Timeout, time.Second, MaxMCPTimeout)
		if err != nil {
			fail("timeout: %v", err)
		}
		s.Timeout = d
	}
	switch f.Permission {
	case "":
	case PermAllow, PermAsk, PermDeny:
		s.Permission = f.Permission
	default:
		fail("permission must be %q, %q or %q", PermAllow, PermAsk, PermDeny)
	}
	for _, t := range f.Tools {
		if t == "" {
			fail("tools: an empty tool name")
		}
	}
	return s, ok
}

// mcpURL checks an MCP server's URL: https, or http only to a loopback
// address, since its headers carry credentials.
func mcpURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%s is not an absolute http(s) URL", quoteURL(raw))
	}
	if u.User != nil {
		return "", fmt.Errorf("%s holds a user name or password; put credentials in headers or headers_file", quoteURL(raw))
	}
	switch u.Scheme {
	case "https":
	case "http":
		host := u.Hostname()
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", fmt.Errorf("%s: plain http only to a loopback address (its headers would cross the network in clear); use https", quoteURL(raw))
		}
	default:
		return "", fmt.Errorf("%s is not an http(s) URL", quoteURL(raw))
	}
	return u.String(), nil
}

// readHeadersFile adds the "Name: value" lines of path (blank lines and
// lines starting with # skipped) to h. The file must be private to the
// owner, like a token file.
func readHeadersFile(path string, h map[string]string, secrets *[]string) error {
	data, fi, err := readFile(path, maxMCPHeaders)
	if err != nil {
		return err
	}
	if err := checkPrivate(path, fi, "headers file"); err != nil {
		return err
	}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		*secrets = append(*secrets, value, line)
		if !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("%s line %d: expected \"Name: value\" (the line is not shown)", path, i+1)
		}
		h[strings.TrimSpace(name)] = value
	}
	return nil
}
