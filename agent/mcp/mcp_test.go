package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/agent/mcp/mcptest"
	"github.com/latchd/latch/agent/mcp/wire"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/internal/pageout"
)

// sidecarBin is the latch-mcp binary the tests run.
var sidecarBin mcptest.Sidecar

func TestMain(m *testing.M) {
	mcptest.Main()
	code := m.Run()
	sidecarBin.Remove()
	os.Exit(code)
}

// syncBuffer is a log sink tests read while the manager writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// goServer is the Go test server (this test binary) as a stdio server
// named name; dir receives its notes.
func goServer(t *testing.T, name, mode string) (Server, string) {
	dir := t.TempDir()
	return Server{Name: name, Command: os.Args[0], Timeout: 10 * time.Second,
		Env: map[string]string{mcptest.EnvServer: mode, mcptest.EnvDir: dir}}, dir
}

type fixture struct {
	m    *Manager
	logs *syncBuffer
}

func start(t *testing.T, opts Options) *fixture {
	t.Helper()
	logs := &syncBuffer{}
	opts.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.Sidecar = sidecarBin.MustPath(t)
	m := New(opts)
	m.Start(context.Background())
	t.Cleanup(m.Close)
	return &fixture{m: m, logs: logs}
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) status(name string) Status {
	for _, s := range f.m.Statuses() {
		if s.Name == name {
			return s
		}
	}
	return Status{}
}

func (f *fixture) waitRunning(t *testing.T, name string, minRestarts int) Status {
	t.Helper()
	var st Status
	waitFor(t, name+" running after "+strconv.Itoa(minRestarts)+" restarts", func() bool {
		st = f.status(name)
		return st.State == "running" && st.Restarts >= minRestarts
	})
	return st
}

func (f *fixture) call(t *testing.T, ctx context.Context, name, input string) (string, error) {
	t.Helper()
	return f.m.Call(ctx, name, json.RawMessage(input))
}

func TestToolsListedAndCalled(t *testing.T) {
	srv, _ := goServer(t, "go", "1")
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "go", 0)
	var names []string
	for _, tl := range f.m.Tools() {
		names = append(names, tl.Name)
		if !strings.Contains(tl.Description, "MCP server go") || !json.Valid(tl.Schema) {
			t.Errorf("tool %s: description %q, schema %s", tl.Name, tl.Description, tl.Schema)
		}
	}
	if !strings.Contains(strings.Join(names, " "), "go__echo") {
		t.Fatalf("tools = %v, want go__echo among them", names)
	}
	got, err := f.call(t, t.Context(), "go__echo", `{"text":"hello"}`)
	if err != nil || got != "echo: hello" {
		t.Fatalf("echo = %q, %v; want %q", got, err, "echo: hello")
	}
	got, err = f.call(t, t.Context(), "go__image", `{}`)
	if err != nil || !strings.Contains(got, "a picture:") || !strings.Contains(got, "[image: image/png, 12 bytes") {
		t.Errorf("image = %q, %v; want the text and the image described", got, err)
	}
	if _, err := f.call(t, t.Context(), "go__fail", `{}`); err == nil || err.Error() != "it failed" {
		t.Errorf("fail: err = %v, want the server's error text", err)
	}
	if _, err := f.call(t, t.Context(), "go__nosuch", `{}`); err == nil {
		t.Error("a tool the server does not have was called")
	}
	if p := f.m.Permission("go__echo"); p != "ask" {
		t.Errorf("default permission = %q, want ask", p)
	}
}

func TestMinimalEnvironment(t *testing.T) {
	srv, _ := goServer(t, "go", "1")
	srv.Env["PASSED"] = "explicitly"
	environ := append(os.Environ(), "LATCH_TELEGRAM_TOKEN=123:telegram-token-value",
		"ANTHROPIC_API_KEY=sk-ant-secret-value", "LATCH_HOME=/somewhere", "OPENAI_API_KEY=sk-openai-value",
		"GITHUB_TOKEN=ghp_ownerstoken", "HOME=/home/test")
	f := start(t, Options{Servers: []Server{srv}, Environ: environ})
	f.waitRunning(t, "go", 0)
	got, err := f.call(t, t.Context(), "go__env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, leaked := range []string{"telegram-token-value", "sk-ant-secret-value", "LATCH_HOME", "sk-openai-value", "ghp_ownerstoken"} {
		if strings.Contains(got, leaked) {
			t.Errorf("the server's environment holds %q:\n%s", leaked, got)
		}
	}
	for _, want := range []string{"PASSED=explicitly", "HOME=/home/test", "PATH="} {
		if !strings.Contains(got, want) {
			t.Errorf("the server's environment lacks %q:\n%s", want, got)
		}
	}
	// The sidecar gets the minimal environment too, without the server's
	// env, and makes itself non-dumpable: its /proc files become root's.
	proc := "/proc/" + strconv.Itoa(f.m.SidecarPid())
	if fi, err := os.Stat(proc + "/environ"); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("the sidecar's %s/environ: %v, %v; want it root's (non-dumpable)", proc, fi, err)
	}
	if os.Geteuid() != 0 {
		return // only root reads a non-dumpable process's environ
	}
	b, err := os.ReadFile(proc + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, leaked := range []string{"telegram-token-value", "sk-ant-secret-value", "LATCH_HOME", "sk-openai-value", "ghp_ownerstoken", "PASSED"} {
		if bytes.Contains(b, []byte(leaked)) {
			t.Errorf("the sidecar's environment holds %q", leaked)
		}
	}
}

// alive reports whether pid names a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

func TestHangingServerIsKilledWhole(t *testing.T) {
	srv, dir := goServer(t, "go", "1")
	srv.Timeout = 2 * time.Second
	f := start(t, Options{Servers: []Server{srv}, Reaper: tools.NewReaper()})
	f.waitRunning(t, "go", 0)
	first := f.m.servers[0].current().proc.Pid()
	_, err := f.call(t, t.Context(), "go__hang", `{}`)
	if err == nil || !strings.Contains(err.Error(), "did not answer hang within 2s") {
		t.Fatalf("hang: err = %v, want a timeout", err)
	}
	raw, rerr := os.ReadFile(filepath.Join(dir, "grandchild"))
	grandchild, _ := strconv.Atoi(string(raw))
	if rerr != nil || grandchild == 0 {
		t.Fatalf("the server noted no grandchild: %v", rerr)
	}
	waitFor(t, "the grandchild in its own session to die", func() bool { return !alive(grandchild) })
	if alive(first) {
		t.Errorf("the hung server %d still runs", first)
	}
	st := f.waitRunning(t, "go", 1)
	if !strings.Contains(st.Err, "timed out") {
		t.Errorf("status error %q, want the timeout", st.Err)
	}
	if got, err := f.call(t, t.Context(), "go__echo", `{"text":"again"}`); err != nil || got != "echo: again" {
		t.Errorf("after the restart echo = %q, %v", got, err)
	}
}

func TestCrashingServerIsRestartedAndReported(t *testing.T) {
	srv, dir := goServer(t, "go", "1")
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "go", 0)
	if _, err := f.call(t, t.Context(), "go__crash", `{}`); err == nil {
		t.Fatal("crash returned no error")
	}
	st := f.waitRunning(t, "go", 1)
	if !strings.Contains(st.Err, "exit") || !strings.Contains(st.Line(), "started again 1× after failing") {
		t.Errorf("status %q, want the exit and the restart reported", st.Line())
	}
	starts, _ := os.ReadFile(filepath.Join(dir, "started"))
	if n := strings.Count(string(starts), "\n"); n != 2 {
		t.Errorf("the server started %d times, want 2", n)
	}
}

func TestGarbageOnStdout(t *testing.T) {
	srv, _ := goServer(t, "bad", "garbage")
	f := start(t, Options{Servers: []Server{srv}})
	var st Status
	waitFor(t, "the server reported down", func() bool {
		st = f.status("bad")
		return st.Restarts >= 1
	})
	if st.Err == "" || len(f.m.Tools()) != 0 {
		t.Errorf("status %q, tools %v: want it down with a reason and no tools", st.Line(), f.m.Tools())
	}
	if _, err := f.call(t, t.Context(), "bad__echo", `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("a call to it: %v, want it refused as not running", err)
	}
}

func TestHugeResultIsCapped(t *testing.T) {
	srv, _ := goServer(t, "go", "1")
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "go", 0)
	got, err := f.call(t, t.Context(), "go__huge", `{"bytes":5000000}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > MaxResult+200 || !strings.Contains(got, "of 5000000 bytes; latch caps an MCP result at 64 KiB") {
		t.Errorf("result of %d bytes ends %q; want it capped at %d with a note", len(got), got[max(0, len(got)-120):], MaxResult)
	}
	// A message past the frame limit ends the connection, not latch.
	if _, err := f.call(t, t.Context(), "go__huge", `{"bytes":9000000}`); err == nil {
		t.Error("a result past the 8 MiB frame limit came through")
	}
	f.waitRunning(t, "go", 1)
}

func TestStopCancelsTheCall(t *testing.T) {
	srv, dir := goServer(t, "go", "1")
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "go", 0)
	ctx, cancel := context.WithCancelCause(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := f.call(t, ctx, "go__sleep", `{"seconds":600}`)
		errc <- err
	}()
	// The call has reached the server once its session handles it; a
	// cancel before would be as good, but not what is tested.
	time.AfterFunc(200*time.Millisecond, func() { cancel(errors.New("the owner sent /stop")) })
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "/stop") {
		t.Fatalf("stopped call: %v", err)
	}
	waitFor(t, "the server to see notifications/cancelled", func() bool {
		_, err := os.Stat(filepath.Join(dir, "cancelled"))
		return err == nil
	})
	if st := f.status("go"); st.State != "running" || st.Restarts != 0 {
		t.Errorf("after /stop: %q, want the server left running", st.Line())
	}
}

func TestToolListChanged(t *testing.T) {
	srv, _ := goServer(t, "go", "1")
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "go", 0)
	has := func(name string) bool {
		for _, tl := range f.m.Tools() {
			if tl.Name == name {
				return true
			}
		}
		return false
	}
	if has("go__extra") {
		t.Fatal("go__extra offered before it exists")
	}
	if _, err := f.call(t, t.Context(), "go__grow", `{}`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "go__extra to be offered", func() bool { return has("go__extra") })
	if got, err := f.call(t, t.Context(), "go__extra", `{}`); err != nil || got != "extra" {
		t.Errorf("extra = %q, %v", got, err)
	}
}

func TestRestartOnNew(t *testing.T) {
	srv, dir := goServer(t, "go", "1")
	srv.RestartOnNew = true
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "go", 0)
	f.m.Reset()
	waitFor(t, "a second start", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "started"))
		return strings.Count(string(b), "\n") == 2
	})
	if st := f.waitRunning(t, "go", 0); st.Restarts != 0 {
		t.Errorf("a restart on /new counted as a failure: %q", st.Line())
	}
}

func TestCloseStopsEveryServerProcess(t *testing.T) {
	srv, _ := goServer(t, "go", "1")
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "go", 0)
	pid := f.m.servers[0].current().proc.Pid()
	sidecar := f.m.SidecarPid()
	f.m.Close()
	if alive(pid) {
		t.Errorf("server %d runs after Close", pid)
	}
	if sidecar == 0 || alive(sidecar) {
		t.Errorf("sidecar %d runs after Close (0: none was running)", sidecar)
	}
}

// TestSidecarDiesAndIsStartedAgain: when the sidecar dies, its sessions
// end, the daemon kills their server processes whole and starts them
// again with a new sidecar, and the status says why they went down.
func TestSidecarDiesAndIsStartedAgain(t *testing.T) {
	srv, _ := goServer(t, "go", "1")
	f := start(t, Options{Servers: []Server{srv}})
	f.waitRunning(t, "go", 0)
	first, server := f.m.SidecarPid(), f.m.servers[0].current().proc.Pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := f.waitRunning(t, "go", 1)
	if !strings.Contains(st.Err, "MCP sidecar exited") {
		t.Errorf("status after the sidecar died: %+v; want it named as the cause", st)
	}
	if second := f.m.SidecarPid(); second == 0 || second == first {
		t.Errorf("sidecar pid %d after %d died; want a new one", second, first)
	}
	if alive(server) {
		t.Errorf("the server process %d of the dead sidecar's session still runs", server)
	}
	if got, err := f.call(t, t.Context(), "go__echo", `{"text":"again"}`); err != nil || !strings.Contains(got, "again") {
		t.Errorf("echo after the restart = %q, %v", got, err)
	}
}

func TestStreamableHTTPHeaderNeverShows(t *testing.T) {
	const secret = "Bearer s3cr3t-mcp-header-value"
	ts := httptest.NewServer(mcptest.Handler("Authorization", secret))
	t.Cleanup(ts.Close)
	f := start(t, Options{Servers: []Server{
		{Name: "web", URL: ts.URL, Headers: map[string]string{"Authorization": secret}, Timeout: 10 * time.Second},
		{Name: "nokey", URL: ts.URL, Timeout: 10 * time.Second},
	}})
	f.waitRunning(t, "web", 0)
	got, err := f.call(t, t.Context(), "web__headers", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "Authorization: [redacted]") {
		t.Errorf("headers = %q, want the header named with its value redacted", got)
	}
	if got, err := f.call(t, t.Context(), "web__echo", `{"text":"`+secret+`"}`); err != nil || strings.Contains(got, "s3cr3t") {
		t.Errorf("echo of the secret = %q, %v; want it scrubbed", got, err)
	}
	waitFor(t, "the server without the header to fail", func() bool { return f.status("nokey").Restarts >= 1 })
	for _, out := range []string{f.logs.String(), f.status("nokey").Line(), f.status("web").Line()} {
		if strings.Contains(out, "s3cr3t") {
			t.Errorf("the header's value shows:\n%s", out)
		}
	}
}

func TestNamespace(t *testing.T) {
	list := []wire.Tool{
		{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "dup"}, {Name: "dup"},
		{Name: "has space"},
		{Name: strings.Repeat("n", 70)},
		{Name: "other"},
	}
	offered, raw, skipped := namespace("srv", nil, list)
	var names []string
	for _, o := range offered {
		names = append(names, o.Name)
	}
	if strings.Join(names, ",") != "srv__read,srv__other" {
		t.Errorf("offered %v, want srv__read and srv__other", names)
	}
	if !raw["read"] || raw["dup"] {
		t.Errorf("raw = %v", raw)
	}
	joined := strings.Join(skipped, "\n")
	for _, want := range []string{`"dup" is listed more than once`, `"has space"`, "nnnn"} {
		if !strings.Contains(joined, want) {
			t.Errorf("skipped %q lacks %q", joined, want)
		}
	}
	if strings.Count(joined, "dup") != 1 {
		t.Errorf("the duplicate is reported %d times, want once", strings.Count(joined, "dup"))
	}
	offered, _, skipped = namespace("srv", []string{"other", "gone"}, list)
	if len(offered) != 1 || offered[0].Name != "srv__other" || !strings.Contains(strings.Join(skipped, ""), `"gone" is in tools`) {
		t.Errorf("allowlist: offered %v, skipped %v", offered, skipped)
	}
	if s := string(offered[0].Schema); s != `{"type":"object"}` {
		t.Errorf("a tool without a schema gets %s", s)
	}
}

func TestPermissions(t *testing.T) {
	m := New(Options{Servers: []Server{{Name: "a", Permission: "allow"}, {Name: "b"}},
		Permissions: map[string]string{"a.rm": "deny", "b.ls": "allow"}})
	for name, want := range map[string]string{"a__x": "allow", "a__rm": "deny", "b__x": "ask", "b__ls": "allow", "c__x": "deny", "read_file": "deny"} {
		if got := m.Permission(name); got != want {
			t.Errorf("Permission(%s) = %s, want %s", name, got, want)
		}
	}
	var none *Manager
	if none.Tools() != nil || none.Permission("a__x") != "deny" || none.Statuses() != nil {
		t.Error("a nil Manager offers something")
	}
}

// The daemon's LATCH_NO_PAGEOUT=1 reaches the sidecar, and nothing else of
// latch's does.
func TestSidecarEnvKeepsPageOutSwitch(t *testing.T) {
	daemon := []string{"PATH=/bin", pageout.EnvNoPageOut + "=1", "LATCH_TELEGRAM_TOKEN=secret"}
	if got, want := sidecarEnv(daemon), []string{"PATH=/bin", pageout.EnvNoPageOut + "=1"}; !slices.Equal(got, want) {
		t.Errorf("sidecarEnv(%q) = %q, want %q", daemon, got, want)
	}
	if got := sidecarEnv([]string{"PATH=/bin", pageout.EnvNoPageOut + "=0"}); !slices.Equal(got, []string{"PATH=/bin"}) {
		t.Errorf("sidecarEnv with %s=0 = %q, want PATH only", pageout.EnvNoPageOut, got)
	}
}
