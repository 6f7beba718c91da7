package mcp

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// everything is the reference server of the MCP project, pinned; npx
// runs it from the npm cache that EnvNPMCache names (.ci/run fills it:
// tests do not reach the network).
const (
	everything  = "@modelcontextprotocol/server-everything@2026.8.31"
	EnvNPMCache = "LATCH_TEST_NPM_CACHE"
)

// descendants lists the live processes below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// TestServerEverythingThroughNpx runs the npm server through npx, a
// wrapper that starts node with the real server below it: the tools are
// listed and called, and Close leaves none of its processes running.
func TestServerEverythingThroughNpx(t *testing.T) {
	cache := os.Getenv(EnvNPMCache)
	npx, err := exec.LookPath("npx")
	if cache == "" || err != nil {
		t.Skipf("needs npx and %s, an npm cache holding %s (.ci/run provides both)", EnvNPMCache, everything)
	}
	srv := Server{Name: "everything", Command: npx, Args: []string{"--offline", "-y", everything, "stdio"},
		Env: map[string]string{"npm_config_cache": cache}, Timeout: 60 * time.Second}
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "everything", 0)
	var names []string
	for _, tl := range f.m.Tools() {
		names = append(names, tl.Name)
	}
	if !strings.Contains(" "+strings.Join(names, " ")+" ", " everything__echo ") {
		t.Fatalf("tools %v, want everything__echo", names)
	}
	got, err := f.call(t, t.Context(), "everything__echo", `{"message":"hello from latch"}`)
	if err != nil || !strings.Contains(got, "hello from latch") {
		t.Fatalf("echo = %q, %v", got, err)
	}
	pid := f.m.servers[0].current().proc.Pid()
	below := descendants(pid)
	if len(below) == 0 {
		t.Fatalf("npx (%d) has no process below it; the real server was expected there", pid)
	}
	f.m.Close()
	for _, p := range append(below, pid) {
		if alive(p) {
			t.Errorf("process %d of the server still runs after Close", p)
		}
	}
}
