package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// subreaperEnv, when set, makes a test run the subreaper half of itself;
// its value is the sleep token of the processes the test starts.
const subreaperEnv = "LATCH_TEST_SUBREAPER"

// inSubreaper runs the test named name again in a child process, where
// body becomes a subreaper (the setting is process-wide and would change
// what every other test sees), and reports whether this is the child.
func inSubreaper(t *testing.T, name string) (token string, child bool) {
	if token := os.Getenv(subreaperEnv); token != "" {
		return token, true
	}
	t.Parallel() // the child process is on its own
	token = sleepToken()
	t.Cleanup(func() { killByToken(token) })
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), subreaperEnv+"="+token)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("subreaper child failed: %v\n%s", err, out)
	}
	return token, false
}

// newSubreaper makes this process a subreaper and returns a Reaper for it,
// which the caller runs, or not, as its test needs.
func newSubreaper(t *testing.T) *Reaper {
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	return NewReaper()
}

// procGone reports whether no process, not even a zombie, has the id pid.
func procGone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return os.IsNotExist(err)
}

// startSubreaper makes this process a subreaper that reaps until the test
// ends.
func startSubreaper(t *testing.T) *Reaper {
	r := newSubreaper(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// TestReaperReapsAdoptedOrphans: a double-forked grandchild that left the
// session must stay our descendant, adopted by us rather than init, while
// the command runs; when the command ends it must be killed and its zombie
// reaped, and the reaper must not steal RunBash's own exit status.
func TestReaperReapsAdoptedOrphans(t *testing.T) {
	token, child := inSubreaper(t, "TestReaperReapsAdoptedOrphans")
	if !child {
		return
	}
	r := startSubreaper(t)
	dir := t.TempDir()
	command := fmt.Sprintf("(setsid sh -c 'echo $$ > pid.tmp; mv pid.tmp pid; exec sleep %s' &)\n"+
		"until [ -e checked ]; do sleep 0.01; done\nexit 3", token)
	done := startBash(t, context.Background(), BashOptions{Dir: dir, Reaper: r, Timeout: 10 * time.Second}, command)
	pid := waitForPID(t, filepath.Join(dir, "pid"), done)
	waitUntil(t, "the orphan to be adopted by the subreaper", func() bool {
		p, ok := readProc(pid)
		return ok && p.ppid == os.Getpid()
	})
	if !DescendsFrom(pid, os.Getpid()) {
		t.Fatalf("escaped grandchild %d does not descend from the subreaper", pid)
	}
	if err := os.WriteFile(filepath.Join(dir, "checked"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.ExitCode != 3 {
		t.Fatalf("RunBash = %+v (its exit status was lost)", res)
	}
	waitUntil(t, "the orphan to be killed and reaped", func() bool { return procGone(pid) })
	for i := 0; i < 20; i++ {
		res, err := RunBash(context.Background(), BashOptions{Reaper: r}, "exit 7")
		if err != nil || res.ExitCode != 7 {
			t.Fatalf("run %d: %+v, %v", i, res, err)
		}
	}
}

// TestReaperOutlivesItsContextWhileCommandsRun: a daemon cancels the
// reaper's context when it begins to stop, and then lets running commands
// finish for its shutdown grace. An orphan of such a command that exits
// meanwhile must still be reaped, and Run must return only once the last
// command has ended. Before, Run returned at once and the orphan stayed a
// zombie as long as the process lived.
func TestReaperOutlivesItsContextWhileCommandsRun(t *testing.T) {
	token, child := inSubreaper(t, "TestReaperOutlivesItsContextWhileCommandsRun")
	if !child {
		return
	}
	r := newSubreaper(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		r.Run(ctx)
	}()
	dir := t.TempDir()
	command := fmt.Sprintf("(setsid sh -c 'echo $$ > pid.tmp; mv pid.tmp pid; until [ -e die ]; do sleep 0.01; done # %s' &)\n"+
		"until [ -e go ]; do sleep 0.01; done", token)
	done := startBash(t, context.Background(), BashOptions{Dir: dir, Reaper: r, Timeout: time.Minute}, command)
	pid := waitForPID(t, filepath.Join(dir, "pid"), done)
	waitUntil(t, "the orphan to be adopted by the subreaper", func() bool {
		p, ok := readProc(pid)
		return ok && p.ppid == os.Getpid()
	})

	cancel() // the daemon begins to stop; the command runs on in the grace
	touch(t, filepath.Join(dir, "die"))
	waitUntil(t, "the orphan that exited in the grace to be reaped", func() bool { return procGone(pid) })
	select {
	case <-ran:
		t.Fatal("Run returned while a command was still running")
	default:
	}

	touch(t, filepath.Join(dir, "go"))
	if res := <-done; res.ExitCode != 0 {
		t.Fatalf("RunBash = %+v", res)
	}
	select {
	case <-ran:
	case <-time.After(hangLimit):
		t.Fatalf("Run still running %v after the last command ended", hangLimit)
	}
}

// TestRunBashReapsWhatItKilled: the orphans a command's end kills are
// reaped by the time RunBash returns, without waiting for Run, which may
// have returned already (a command that an agent turn starts in the
// shutdown grace) or, as here, never ran. Before, they stayed zombies.
func TestRunBashReapsWhatItKilled(t *testing.T) {
	token, child := inSubreaper(t, "TestRunBashReapsWhatItKilled")
	if !child {
		return
	}
	r := newSubreaper(t)
	for _, mode := range []string{"timeout", "stop", "exit"} {
		t.Run(mode, func(t *testing.T) {
			tc := untaggedOrphan(token)
			dir := t.TempDir()
			runEscapeMode(t, mode, BashOptions{Dir: dir, Reaper: r}, tc)
			pids := readPIDs(t, dir, tc.n)
			waitUntil(t, "the killed orphans to be reaped", func() bool {
				for _, pid := range pids {
					if !procGone(pid) {
						return false
					}
				}
				return true
			})
		})
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunBashKillsUntaggedOrphans: an orphan that left the session and
// dropped the LATCH_JOB tag carries nothing of its command but having been
// adopted by latch. Alone, the command must kill it when it times out, is
// stopped or exits.
func TestRunBashKillsUntaggedOrphans(t *testing.T) {
	token, child := inSubreaper(t, "TestRunBashKillsUntaggedOrphans")
	if !child {
		return
	}
	r := startSubreaper(t)
	tc := untaggedOrphan(token)
	for _, mode := range []string{"timeout", "stop", "exit"} {
		t.Run(mode, func(t *testing.T) { // one at a time: a command running alongside would hold the kill off
			dir := t.TempDir()
			runEscapeMode(t, mode, BashOptions{Dir: dir, Reaper: r}, tc)
			requireDead(t, readPIDs(t, dir, tc.n), token)
		})
	}
}

// TestRunBashLeavesOrphansAnotherCommandMayOwn: when a command ends, an
// untagged orphan that another running command could have started (it
// started after that command) is left alone; it dies when the last such
// command ends.
func TestRunBashLeavesOrphansAnotherCommandMayOwn(t *testing.T) {
	token, child := inSubreaper(t, "TestRunBashLeavesOrphansAnotherCommandMayOwn")
	if !child {
		return
	}
	r := startSubreaper(t)
	tc := untaggedOrphan(token)
	first, second := t.TempDir(), t.TempDir()
	// Started first, it leaves its orphan only once told to.
	firstDone := startBash(t, context.Background(), BashOptions{Dir: first, Reaper: r, Timeout: time.Minute},
		"until [ -e go ]; do sleep 0.01; done\n"+tc.launch+"\n"+waitForPIDs(tc.n))
	waitUntil(t, "the first command to start", func() bool { return len(r.running(0)) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	secondDone := startBash(t, ctx, BashOptions{Dir: second, Reaper: r, Timeout: time.Minute}, tc.fg)
	waitForFields(t, filepath.Join(second, "pids"), tc.n, secondDone)
	secondPIDs := readPIDs(t, second, tc.n)

	if err := os.WriteFile(filepath.Join(first, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := <-firstDone; res.ExitCode != 0 {
		t.Fatalf("first command: %+v", res)
	}
	firstPIDs := readPIDs(t, first, tc.n)
	for _, pid := range secondPIDs {
		if !liveWithToken(pid, token) {
			t.Errorf("the first command killed %d, the orphan of the second, still running", pid)
		}
	}
	cancel()
	<-secondDone
	requireDead(t, append(secondPIDs, firstPIDs...), token)
}

// TestRunBashLeavesOlderOrphansAlone: an orphan latch adopted before a
// command started cannot be that command's, so its end leaves it running.
func TestRunBashLeavesOlderOrphansAlone(t *testing.T) {
	token, child := inSubreaper(t, "TestRunBashLeavesOlderOrphansAlone")
	if !child {
		return
	}
	r := startSubreaper(t)
	out, err := exec.Command("setsid", "sh", "-c", "sleep "+token+" >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("no pid in %q", out)
	}
	t.Cleanup(func() {
		if liveWithToken(pid, token) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	var orphan procInfo
	waitUntil(t, "the orphan to be adopted by the subreaper", func() bool {
		var ok bool
		orphan, ok = readProc(pid)
		return ok && orphan.ppid == os.Getpid()
	})
	// Start times count in clock ticks; a command started in the same tick
	// could have started the orphan, as far as anyone can tell.
	waitUntil(t, "the next clock tick", func() bool { return uptimeTicks(t) > orphan.start })
	for _, command := range []string{"true", "sleep 60"} { // exits; times out
		if _, err := RunBash(context.Background(), BashOptions{Reaper: r, Timeout: 100 * time.Millisecond}, command); err != nil {
			t.Fatal(err)
		}
	}
	if !liveWithToken(pid, token) {
		t.Errorf("orphan %d, adopted before the command started, was killed", pid)
	}
}

// uptimeTicks reads the time since boot in the unit of procID.start: the
// kernel's USER_HZ, 100 a second on Linux, as /proc/uptime counts it.
func uptimeTicks(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	secs, _, _ := strings.Cut(string(b), " ")
	whole, frac, _ := strings.Cut(secs, ".")
	w, err1 := strconv.ParseUint(whole, 10, 64)
	f, err2 := strconv.ParseUint(frac, 10, 64)
	if err1 != nil || err2 != nil || len(frac) != 2 {
		t.Fatalf("cannot parse /proc/uptime %q", b)
	}
	return w*100 + f
}

// untaggedOrphan double-forks into a new session without the LATCH_JOB tag.
func untaggedOrphan(token string) escapeCase {
	// Away from the output pipe too: an orphan left alive on purpose must
	// not hold the call for waitDelay.
	launch := fmt.Sprintf("(setsid env -u %s sh -c 'echo $$ >> pids; exec sleep %s' >/dev/null 2>&1 &)", jobEnv, token)
	return escapeCase{name: "untagged orphan", launch: launch, fg: launch + "; sleep " + token, n: 1}
}

// killByToken SIGKILLs every process whose command line holds token, so
// that a failing subreaper child leaves nothing running.
func killByToken(token string) {
	for _, pid := range liveByToken(token) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// waitUntil polls cond until it holds, failing after hangLimit.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v", what, hangLimit)
		}
		<-tick.C
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
	for _, pid := range []int{0, -1} {
		if !DescendsFrom(pid, os.Getpid()) {
			t.Errorf("pid %d (another pid namespace) must count as a descendant (fail closed)", pid)
		}
	}
}

// TestRunBashKillsUntaggedOrphansWhileAServerRuns: a long-running server
// (StartProcess: an MCP server) is older than every orphan, yet a
// command's untagged orphans still die with the command, and the server
// lives on. Counted as a running command, the server would keep every
// orphan alive.
func TestRunBashKillsUntaggedOrphansWhileAServerRuns(t *testing.T) {
	token, child := inSubreaper(t, "TestRunBashKillsUntaggedOrphansWhileAServerRuns")
	if !child {
		return
	}
	r := startSubreaper(t)
	srv, err := StartProcess(ProcessOptions{Dir: t.TempDir(), Env: SafeEnv(), Reaper: r}, "/bin/sh", "-c", "exec sleep 1000")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Kill()
	tc := untaggedOrphan(token)
	for _, mode := range []string{"timeout", "stop", "exit"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			runEscapeMode(t, mode, BashOptions{Dir: dir, Reaper: r}, tc)
			requireDead(t, readPIDs(t, dir, tc.n), token)
		})
	}
	select {
	case <-srv.Done():
		t.Fatalf("the server was killed with a command: %v", srv.Err())
	default:
	}
	srv.Kill()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", srv.Pid())); err == nil {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", srv.Pid())); !strings.Contains(string(b), ") Z") {
			t.Errorf("the server runs after Kill: %s", b)
		}
	}
}
