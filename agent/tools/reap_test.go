package tools

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReaperReapsAdoptedOrphans runs as a subreaper in a child process (the
// setting is process-wide): a double-forked grandchild must stay our
// descendant, its zombie must be reaped, and RunBash's own exit status must
// not be stolen by the reaper.
func TestReaperReapsAdoptedOrphans(t *testing.T) {
	if os.Getenv("LATCH_TEST_SUBREAPER") == "1" {
		subreaperChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperReapsAdoptedOrphans$", "-test.v")
	cmd.Env = append(os.Environ(), "LATCH_TEST_SUBREAPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("subreaper child failed: %v\n%s", err, out)
	}
}

func subreaperChild(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	r := NewReaper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	// A grandchild that outlives its parent and escapes the group: it is
	// adopted by us, not by init.
	res, err := RunBash(context.Background(), BashOptions{Reaper: r, Timeout: 10 * time.Second},
		"setsid sh -c 'echo $$; sleep 0.3' & wait_pid=$!; sleep 0.05; exit 3")
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("RunBash = %+v, %v (its exit status was lost)", res, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.Split(res.Output, "\n")[0]))
	if err != nil {
		t.Fatalf("no pid in %q", res.Output)
	}
	if !DescendsFrom(pid, os.Getpid()) {
		t.Fatalf("escaped grandchild %d does not descend from the subreaper", pid)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			break // exited and reaped: no zombie left behind
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d was never reaped", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 0; i < 20; i++ {
		res, err := RunBash(context.Background(), BashOptions{Reaper: r}, "exit 7")
		if err != nil || res.ExitCode != 7 {
			t.Fatalf("run %d: %+v, %v", i, res, err)
		}
	}
}

func TestDescendsFrom(t *testing.T) {
	if DescendsFrom(os.Getpid(), os.Getpid()) {
		t.Error("a process descends from itself")
	}
	if !DescendsFrom(os.Getpid(), os.Getppid()) {
		t.Error("the test does not descend from its parent")
	}
	if DescendsFrom(1, os.Getpid()) {
		t.Error("init descends from the test")
	}
	if !DescendsFrom(1<<30, os.Getpid()) {
		t.Error("an unreadable process must count as a descendant (fail closed)")
	}
}
