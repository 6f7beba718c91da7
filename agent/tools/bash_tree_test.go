package tools

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// escapeCase is a command that starts processes which leave the shell's
// process group, session or environment. Each such process appends its pid
// to the file "pids" in the workspace and then becomes `sleep <token>`.
type escapeCase struct {
	name string
	// launch starts the escapers and returns at once; fg is the same in the
	// foreground, as a chat command would run it.
	launch, fg string
	n          int // pids the escapers write
	// treeOnly: nothing but the tree leads to the escapers, so once the
	// shell exits and they are orphaned only a subreaper finds them
	// (TestRunBashKillsUntaggedOrphans).
	treeOnly bool
}

// escapeCases covers each way out of the process group that a command
// takes without trying to: GNU timeout's setpgid(0,0) (when bash does not
// exec it directly), a `set -m` job, setsid, a double fork into a new
// session; and, leaving one trace each, a new group and a new session whose
// environment lost the LATCH_JOB tag; and a process in a session of its own
// that starts a new child whenever its child dies, with and without the tag.
func escapeCases(token string) []escapeCase {
	park := fmt.Sprintf("echo $$ >> pids; exec sleep %s", token)
	// The respawner gives up after 100 children, so one that escaped a
	// broken kill cannot run on for long after the test.
	respawn := shellQuote(fmt.Sprintf(`echo $$ >> pids; i=0; while [ $i -lt 100 ]; do sh -c %s; i=$((i+1)); done`, shellQuote(park)))
	return []escapeCase{
		{"GNU timeout",
			fmt.Sprintf("timeout 60 sh -c 'echo $PPID >> pids; %s' &", park),
			fmt.Sprintf("timeout 60 sh -c 'echo $PPID >> pids; %s'; echo done", park), 2, false},
		{"set -m job",
			fmt.Sprintf("set -m; sh -c '%s' &", park),
			fmt.Sprintf("set -m; sh -c '%s' & wait", park), 1, false},
		{"setsid",
			fmt.Sprintf("setsid sh -c '%s' &", park),
			fmt.Sprintf("setsid sh -c '%s' & wait", park), 1, false},
		{"double fork into a new session",
			fmt.Sprintf("(setsid sh -c '%s' &)", park),
			fmt.Sprintf("(setsid sh -c '%s' &); sleep %s", park, token), 1, false},
		{"own group without the tag",
			fmt.Sprintf("set -m; env -u %s sh -c '%s' &", jobEnv, park),
			fmt.Sprintf("set -m; env -u %s sh -c '%s' & wait", jobEnv, park), 1, false},
		{"new session without the tag",
			fmt.Sprintf("setsid env -u %s sh -c '%s' &", jobEnv, park),
			fmt.Sprintf("setsid env -u %s sh -c '%s' & wait", jobEnv, park), 1, true},
		{"respawner in a new session",
			fmt.Sprintf("setsid sh -c %s &", respawn),
			fmt.Sprintf("setsid sh -c %s & wait", respawn), 2, false},
		{"respawner without the tag",
			fmt.Sprintf("setsid env -u %s sh -c %s &", jobEnv, respawn),
			fmt.Sprintf("setsid env -u %s sh -c %s & wait", jobEnv, respawn), 2, true},
	}
}

// sleepToken returns a sleep duration no other process uses, so a test can
// tell its own processes by their command line even if a pid is reused.
func sleepToken() string {
	return fmt.Sprintf("1000.%09d", rand.IntN(1e9))
}

// waitForPIDs is shell that waits until the pids file holds n pids.
func waitForPIDs(n int) string {
	return fmt.Sprintf("until [ \"$(cat pids 2>/dev/null | wc -w)\" -ge %d ]; do sleep 0.01; done", n)
}

// TestRunBashKillsEscapedProcesses checks that a timeout, /stop and the
// shell's own exit kill the processes that left the shell's process group,
// not just the group. Before the tree kill every case left its sleeps
// running.
func TestRunBashKillsEscapedProcesses(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"timeout", "stop", "exit"} {
		for i, tc := range escapeCases("") {
			if mode == "exit" && tc.treeOnly {
				continue
			}
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				token := sleepToken()
				tc := escapeCases(token)[i]
				dir := t.TempDir()
				killLeftovers(t, dir, token)
				res := runEscapeMode(t, mode, BashOptions{Dir: dir}, tc)
				if res.Duration >= hangLimit {
					t.Errorf("took %v, want well under %v", res.Duration, hangLimit)
				}
				pids := readPIDs(t, dir, tc.n)
				requireDead(t, pids, token)
			})
		}
	}
}

// runEscapeMode runs tc in opts.Dir so that it ends by timeout, by /stop or
// on its own, and checks that the result says so.
func runEscapeMode(t *testing.T, mode string, opts BashOptions, tc escapeCase) BashResult {
	t.Helper()
	dir := opts.Dir
	opts.Timeout = time.Minute
	switch mode {
	case "timeout":
		// The escapers need milliseconds; a timeout that fires before they
		// wrote their pids fails readPIDs instead of passing for nothing.
		opts.Timeout = 3 * time.Second
		res := runBash(t, t.Context(), opts, tc.fg)
		if !res.TimedOut || res.Summary() != "killed: timeout after 3s" {
			t.Errorf("got TimedOut=%v summary %q, want a timeout", res.TimedOut, res.Summary())
		}
		return res
	case "stop":
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := startBash(t, ctx, opts, tc.fg)
		waitForFields(t, filepath.Join(dir, "pids"), tc.n, done)
		res := cancelAndWait(t, cancel, done)
		if !res.Canceled || res.Summary() != "stopped" {
			t.Errorf("got Canceled=%v summary %q, want \"stopped\"", res.Canceled, res.Summary())
		}
		return res
	default:
		res := runBash(t, t.Context(), opts, tc.launch+"\n"+waitForPIDs(tc.n)+"\necho done")
		if res.ExitCode != 0 || res.Output != "done\n" {
			t.Errorf("got output %q exit %d, want \"done\\n\" exit 0", res.Output, res.ExitCode)
		}
		return res
	}
}

// TestRunBashKillsOnlyItsOwnCommand runs commands side by side: killing
// one, by /stop or at its own exit, must leave the other's escaped
// processes running.
func TestRunBashKillsOnlyItsOwnCommand(t *testing.T) {
	t.Parallel()
	killsOnlyItsOwn(t, nil)
}

// killsOnlyItsOwn is TestRunBashKillsOnlyItsOwnCommand with or without
// cgroups; with them even the escapers only the tree leads to die at the
// shell's exit.
func killsOnlyItsOwn(t *testing.T, cgroups *Cgroups) {
	type run struct {
		dir, token string
		n          int
		cancel     context.CancelFunc
		done       chan BashResult
	}
	start := func(command func(launch string, n int) string) *run {
		r := &run{dir: t.TempDir(), token: sleepToken()}
		killLeftovers(t, r.dir, r.token)
		var launch []string
		for _, tc := range escapeCases(r.token) {
			if tc.treeOnly && cgroups == nil {
				continue // the exiting command would leave it behind
			}
			launch = append(launch, tc.launch)
			r.n += tc.n
		}
		var ctx context.Context
		ctx, r.cancel = context.WithCancel(t.Context())
		t.Cleanup(r.cancel)
		r.done = startBash(t, ctx, BashOptions{Dir: r.dir, Timeout: time.Minute, Cgroups: cgroups}, command(strings.Join(launch, "\n"), r.n))
		waitForFields(t, filepath.Join(r.dir, "pids"), r.n, r.done)
		return r
	}
	finish := func(r *run) {
		t.Helper()
		select {
		case <-r.done:
		case <-time.After(hangLimit):
			t.Fatalf("RunBash still running after %v", hangLimit)
		}
	}
	parked := func(launch string, n int) string { return launch + "\n" + waitForPIDs(n) + "\nsleep 1000" }
	exits := func(launch string, n int) string {
		return launch + "\n" + waitForPIDs(n) + "\nuntil [ -e go ]; do sleep 0.01; done"
	}

	kept := start(parked)
	stopped, exited := start(parked), start(exits)
	keptPIDs := readPIDs(t, kept.dir, kept.n)

	stopped.cancel()
	finish(stopped)
	requireDead(t, readPIDs(t, stopped.dir, stopped.n), stopped.token)
	if err := os.WriteFile(filepath.Join(exited.dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	finish(exited)
	requireDead(t, readPIDs(t, exited.dir, exited.n), exited.token)

	select {
	case res := <-kept.done:
		t.Fatalf("the other command ended too: %+v", res)
	default:
	}
	for _, pid := range keptPIDs {
		if !liveWithToken(pid, kept.token) {
			t.Errorf("process %d of the other command was killed", pid)
		}
	}
	kept.cancel()
	finish(kept)
	requireDead(t, keptPIDs, kept.token)
}

// killLeftovers makes sure that processes a failing test leaves behind die
// with it: the ones listed in dir/pids whose command line holds token.
func killLeftovers(t *testing.T, dir, token string) {
	t.Cleanup(func() {
		data, _ := os.ReadFile(filepath.Join(dir, "pids"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && liveWithToken(pid, token) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// liveWithToken reports whether pid is a live (not zombie) process whose
// command line holds token. The token keeps a reused pid from counting.
func liveWithToken(pid int, token string) bool {
	p, ok := readProc(pid)
	if !ok || p.state == "Z" {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(token))
}

// liveByToken lists the live processes whose command line holds token.
func liveByToken(token string) []int {
	procs, _ := scanProcs()
	var alive []int
	for _, p := range procs {
		if liveWithToken(p.pid, token) {
			alive = append(alive, p.pid)
		}
	}
	return alive
}

// readPIDs reads the pids file of a command that has finished; fewer than
// n pids means the command did not get far enough to prove anything.
func readPIDs(t *testing.T, dir string, n int) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatalf("the command wrote no pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid %q in %q", f, data)
		}
		pids = append(pids, pid)
	}
	if len(pids) < n {
		t.Fatalf("got pids %v, want %d: the command was killed before its processes started", pids, n)
	}
	return pids
}

// requireDead polls until none of pids, and no other process whose command
// line holds token (one started after pids was read: a respawned child),
// runs anymore; SIGKILL takes a moment to land on a stopped process.
func requireDead(t *testing.T, pids []int, token string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		alive := liveByToken(token)
		for _, pid := range pids {
			if liveWithToken(pid, token) && !slices.Contains(alive, pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the command are still running", alive)
		}
		<-tick.C
	}
}

// waitForFields polls until file path holds n whitespace-separated fields,
// failing early if the command finishes first.
func waitForFields(t *testing.T, path string, n int, done <-chan BashResult) {
	t.Helper()
	deadline := time.After(hangLimit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(path); err == nil && len(strings.Fields(string(data))) >= n {
			return
		}
		select {
		case res := <-done:
			t.Fatalf("command ended before writing %d pids to %s: %+v", n, path, res)
		case <-deadline:
			t.Fatalf("no %d pids in %s after %v", n, path, hangLimit)
		case <-tick.C:
		}
	}
}
