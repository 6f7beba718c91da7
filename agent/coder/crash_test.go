package coder

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
)

// The helper process of TestClaudeCodeKilledMidTurn: latch's side of a
// turn, in a process of its own that the test kills with SIGKILL.
const (
	envHelper    = "LATCH_CODER_HELPER"
	envHelperDB  = "LATCH_CODER_HELPER_DB"
	envHelperWS  = "LATCH_CODER_HELPER_WS"
	envHelperBin = "LATCH_CODER_HELPER_BIN"
	envHelperEnv = "LATCH_CODER_HELPER_ENV" // the CLI's whole environment, one variable a line
)

func TestCoderHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) == "" {
		t.Skip("helper process of TestClaudeCodeKilledMidTurn")
	}
	f := &claudeFixture{ws: os.Getenv(envHelperWS), bin: os.Getenv(envHelperBin),
		env: strings.Split(os.Getenv(envHelperEnv), "\n")}
	policy := agent.DefaultPolicy()
	policy[agent.ToolBash] = agent.Allow
	b := f.backend(t, openDB(t, os.Getenv(envHelperDB)), policy)
	b.TurnWith(t.Context(), testKey, "remember the word kumquat", newRecorder(), agent.Hooks{})
	t.Fatal("the turn ended; it should have been killed")
}

// TestClaudeCodeKilledMidTurn: latch is SIGKILLed while Claude Code runs a
// tool. The next start reports the turn as interrupted and does not run it
// again, and the next message continues the session (--resume).
func TestClaudeCodeKilledMidTurn(t *testing.T) {
	f := newClaude(t)
	f.api.Script(bashUse("toolu_1", "echo $$ > pid.txt; exec sleep 600"), anthropictest.Text("never"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestCoderHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envHelper+"=1", envHelperDB+"="+f.dbPath, envHelperWS+"="+f.ws,
		envHelperBin+"="+f.bin, envHelperEnv+"="+strings.Join(f.env, "\n"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(waitFile(t, filepath.Join(f.ws, "pid.txt")))
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// Without a subreaper or cgroup around it (systemd's KillMode does
	// that for the daemon) the CLI outlives the helper: clean up what runs
	// in the workspace.
	killIn(t, f.ws)
	waitGone(t, pid)
	requests := len(f.api.Requests())

	db := openDB(t, f.dbPath)
	policy := agent.DefaultPolicy()
	b := f.backend(t, db, policy)
	ev := newRecorder()
	if err := b.ResumeWith(t.Context(), testKey, ev, agent.Hooks{}); err != nil {
		t.Fatalf("resume: %v\nhelper said:\n%s", err, out)
	}
	if _, final, _, _ := ev.snapshot(); final != MsgInterrupted {
		t.Errorf("resumed turn said %q, want %q", final, MsgInterrupted)
	}
	if got := len(f.api.Requests()); got != requests {
		t.Errorf("the cut turn ran again: %d model requests, want %d", got, requests)
	}
	f.api.Script(anthropictest.Text("The word was kumquat."))
	if err := b.TurnWith(t.Context(), testKey, "what was the word?", newRecorder(), agent.Hooks{}); err != nil {
		t.Fatal(err)
	}
	reqs := f.api.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "kumquat") {
		t.Error("the next turn did not continue the session killed mid-turn")
	}
}

// killIn SIGKILLs every process whose working directory is dir.
func killIn(t *testing.T, dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
