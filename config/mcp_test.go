package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadMCP(t *testing.T) {
	h := newHome(t)
	writeFile(t, filepath.Join(h, "mcp.headers"), "# the notes server\nAuthorization: Bearer hdr-secret-value-123\n\nX-Team: blue\n", 0o600)
	writeFile(t, filepath.Join(h, "config.toml"), `
[[mcp.servers]]
name = "notes"
command = "npx"
args = ["-y", "@example/notes@1.2.3"]
env = { NOTES_DIR = "/srv/notes", NOTES_TOKEN = "env-secret-value-456" }
timeout = "30s"
tools = ["read", "search"]
permission = "allow"
restart_on_new = true

[[mcp.servers]]
name = "cal"
url = "https://cal.example/mcp"
headers_file = "mcp.headers"
headers = { "X-Extra" = "1" }

[[mcp.servers]]
name = "off"
url = "http://127.0.0.1:9/mcp"
enabled = false

[mcp.permissions]
"notes.delete" = "deny"
"cal.create" = "allow"
`, 0o600)
	cfg, err := testLoader(t, nil).Load(h)
	checkErr(t, err, nil)
	s := cfg.MCP.Servers
	if len(s) != 3 {
		t.Fatalf("servers = %v", s)
	}
	n, c, o := s[0], s[1], s[2]
	if !n.Stdio() || n.Command != "npx" || strings.Join(n.Args, " ") != "-y @example/notes@1.2.3" || n.Env["NOTES_DIR"] != "/srv/notes" ||
		n.Timeout != 30*time.Second || strings.Join(n.Tools, ",") != "read,search" || n.Permission != PermAllow || !n.RestartOnNew || !n.Enabled {
		t.Errorf("notes = %v", n)
	}
	if c.Stdio() || c.Headers["Authorization"] != "Bearer hdr-secret-value-123" || c.Headers["X-Team"] != "blue" || c.Headers["X-Extra"] != "1" ||
		c.Permission != PermAsk || c.Timeout != DefaultMCPTimeout || c.HeadersFile != filepath.Join(h, "mcp.headers") {
		t.Errorf("cal = %v (headers %d)", c, len(c.Headers))
	}
	if o.Enabled {
		t.Error("enabled = false was ignored")
	}
	if cfg.MCP.Permissions["notes.delete"] != PermDeny || cfg.MCP.Permissions["cal.create"] != PermAllow {
		t.Errorf("permissions = %v", cfg.MCP.Permissions)
	}
	for _, out := range []string{fmt.Sprint(cfg.MCP.Servers), fmt.Sprintf("%+v", cfg.MCP), fmt.Sprintf("%#v", c)} {
		if strings.Contains(out, "secret-value") {
			t.Errorf("printing the config shows a secret: %s", out)
		}
	}
	secrets := strings.Join(cfg.MCP.MCPSecrets(), " ")
	for _, want := range []string{"Bearer hdr-secret-value-123", "hdr-secret-value-123", "env-secret-value-456"} {
		if !strings.Contains(secrets, want) {
			t.Errorf("MCPSecrets lacks %q", want)
		}
	}
	if strings.Contains(secrets, "/srv/notes") {
		t.Error("MCPSecrets holds a value whose name is no credential's")
	}
}

func TestLoadMCPRefuses(t *testing.T) {
	for _, tt := range []struct{ name, toml, want string }{
		{"no transport", `[[mcp.servers]]
name = "a"`, "set command"},
		{"both", `[[mcp.servers]]
name = "a"
command = "x"
url = "https://x"`, "both set"},
		{"bad name", `[[mcp.servers]]
name = "a_b"
command = "x"`, "name must be"},
		{"duplicate", `[[mcp.servers]]
name = "a"
command = "x"
[[mcp.servers]]
name = "a"
command = "y"`, "unique"},
		{"plain http", `[[mcp.servers]]
name = "a"
url = "http://mcp.example/x"`, "plain http only to a loopback"},
		{"userinfo", `[[mcp.servers]]
name = "a"
url = "https://u:pw-secret-xyz@mcp.example/"`, "user name or password"},
		{"headers on stdio", `[[mcp.servers]]
name = "a"
command = "x"
headers = { A = "b" }`, "for a url server"},
		{"bad permission", `[[mcp.servers]]
name = "a"
command = "x"
permission = "yes"`, "permission must be"},
		{"unknown key", `[[mcp.servers]]
name = "a"
command = "x"
cmd = "y"`, "unknown key"},
		{"permission of no server", `[[mcp.servers]]
name = "a"
command = "x"
[mcp.permissions]
"b.t" = "allow"`, "no [[mcp.servers]] is named"},
		{"timeout", `[[mcp.servers]]
name = "a"
command = "x"
timeout = "2d"`, "timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHome(t)
			writeFile(t, filepath.Join(h, "config.toml"), tt.toml, 0o600)
			_, err := testLoader(t, nil).Load(h)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw-secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestMCPHeadersMakeTheConfigPrivate(t *testing.T) {
	h := newHome(t)
	writeFile(t, filepath.Join(h, "config.toml"), "[[mcp.servers]]\nname = \"a\"\nurl = \"https://x.example\"\nheaders = { Authorization = \"Bearer abcdefghijklmnop\" }\n", 0o644)
	_, err := testLoader(t, nil).Load(h)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "abcdefghijklmnop") {
		t.Errorf("a 0644 config with MCP headers: %v, want it refused with the fix and without the value", err)
	}
	writeFile(t, filepath.Join(h, "hdr"), "Authorization: Bearer abcdefghijklmnop\n", 0o644)
	writeFile(t, filepath.Join(h, "config.toml"), "[[mcp.servers]]\nname = \"a\"\nurl = \"https://x.example\"\nheaders_file = \"hdr\"\n", 0o600)
	_, err = testLoader(t, nil).Load(h)
	if err == nil || !strings.Contains(err.Error(), "open to other users") || strings.Contains(err.Error(), "abcdefghijklmnop") {
		t.Errorf("a 0644 headers file: %v, want it refused", err)
	}
}
