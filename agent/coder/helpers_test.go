package coder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/store"
)

// EnvCLITools names the folder where .ci/run installs the pinned coding
// agent CLIs from npm (npm install --prefix): the tests run the real
// programs, against latch's protocol fakes on loopback.
const EnvCLITools = "LATCH_TEST_CODER_TOOLS"

// cliPath returns the installed CLI bin (claude, codex), or skips saying
// how to get it (CI installs it, and fails a skipped test).
func cliPath(t *testing.T, bin string) string {
	t.Helper()
	dir := os.Getenv(EnvCLITools)
	if dir == "" {
		t.Skipf("needs %s, a folder holding the npm packages of the coding agent CLIs (.ci/run fills it)", EnvCLITools)
	}
	p := filepath.Join(dir, "node_modules", ".bin", bin)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s names %s, which has no %s: %v", EnvCLITools, dir, bin, err)
	}
	return p
}

// recorder is an agent.Events that keeps what a turn reported; approvals
// are also sent on a channel, for the test to answer.
type recorder struct {
	mu        sync.Mutex
	text      strings.Builder
	final     string
	started   []agent.ToolCall
	finished  []finished
	approvals chan agent.Approval
	startedCh chan agent.ToolCall
}

type finished struct {
	call   agent.ToolCall
	result agent.ToolResult
}

func newRecorder() *recorder {
	return &recorder{approvals: make(chan agent.Approval, 16), startedCh: make(chan agent.ToolCall, 16)}
}

func (r *recorder) Text(d string) { r.mu.Lock(); r.text.WriteString(d); r.mu.Unlock() }
func (r *recorder) ToolStarted(c agent.ToolCall) {
	r.mu.Lock()
	r.started = append(r.started, c)
	r.mu.Unlock()
	r.startedCh <- c
}
func (r *recorder) ToolFinished(c agent.ToolCall, res agent.ToolResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = append(r.finished, finished{c, res})
}
func (r *recorder) Approval(a agent.Approval) { r.approvals <- a }
func (r *recorder) File(agent.File) error     { return errors.New("no files here") }
func (r *recorder) Final(text string)         { r.mu.Lock(); r.final = text; r.mu.Unlock() }

func (r *recorder) snapshot() (text, final string, started []agent.ToolCall, done []finished) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.text.String(), r.final, append([]agent.ToolCall(nil), r.started...), append([]finished(nil), r.finished...)
}

func openDB(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var testKey = agent.SessionKey{Gateway: "telegram", Chat: "42"}

// waitApproval returns the next approval request, failing after a minute.
func waitApproval(t *testing.T, r *recorder) agent.Approval {
	t.Helper()
	select {
	case a := <-r.approvals:
		return a
	case <-time.After(time.Minute):
		t.Fatal("no approval request came")
	}
	return agent.Approval{}
}

// waitFile waits for path to hold something and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return ""
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// waitGone polls until pid has exited.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// turnResult runs a turn in the background and hands back its error.
func turnAsync(ctx context.Context, b *Backend, prompt string, ev agent.Events) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- b.TurnWith(ctx, testKey, prompt, ev, agent.Hooks{}) }()
	return ch
}

func minimalEnv(t *testing.T, extra map[string]string) []string {
	extra["HOME"] = t.TempDir()
	return tools.MinimalEnv(nil, extra)
}

// waitProcess waits for a process whose command line holds marker and
// returns its pid.
func waitProcess(t *testing.T, marker string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if strings.Contains(string(cmdline), marker) {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no process with %q appeared", marker)
	return 0
}
