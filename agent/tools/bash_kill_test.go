package tools

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The tests in this file make killTree's steps matter one at a time. Left
// to the scheduler, a command's processes almost never get the CPU between
// killTree's look at /proc and its next signal, so a test that only runs a
// hostile command passes with or without the step it means to check. Here
// BashOptions.pause runs at each phase of the walk and hands the CPU to a
// puppet: a process of the command that, when told through a FIFO, starts
// a child that leaves the session and carries no tag, so nothing but its
// parent links it to the command. The pause waits until the puppet has
// either done it or been stopped; both happen for sure, so which of the two
// does decides the test, not timing.

// puppet is the process the pause hook drives. It is a child of the
// command's shell, without the tag, in the shell's group.
type puppet struct {
	t          *testing.T
	dir, token string
	orders     *os.File // the FIFO it reads orders from
	children   int      // children it started so far; only the pause hook touches it
	cgroups    *Cgroups // the command's, if any
}

// newPuppet prepares a puppet's directory and FIFO.
func newPuppet(t *testing.T) *puppet {
	t.Helper()
	p := &puppet{t: t, dir: t.TempDir(), token: sleepToken()}
	killLeftovers(t, p.dir, p.token)
	path := filepath.Join(p.dir, "orders")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// O_RDWR: opening a FIFO so never blocks, and writing to it never
	// fails for want of a reader, whatever became of the puppet.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p.orders = f
	return p
}

// run runs the puppet as the command's only job and waits until it reads
// orders. The run ends by /stop: finish cancels it.
func (p *puppet) run(pause func(killPhase)) (cancel context.CancelFunc, done chan BashResult) {
	p.t.Helper()
	// A child told "x" waits until its parent has exited, so that once it
	// says it is ready nothing but the tag or the session could lead to
	// it, and it has neither.
	child := fmt.Sprintf(`echo $$ >> pids
if [ "$2" = x ]; then while [ "$(cut -d' ' -f4 /proc/$$/stat)" = "$1" ]; do sleep 0.01; done; fi
echo $$ >> ready
exec sleep %s`, p.token)
	// "f": start a child and stay; "x": start a child and exit.
	parent := fmt.Sprintf(`exec 3<>orders
echo $$ >> pids
echo $$ > puppet.tmp && mv puppet.tmp puppet
while read -r order <&3; do
	setsid sh -c %s child "$$" "$order" &
	if [ "$order" = x ]; then exit 0; fi
done # %s`, shellQuote(child), p.token)
	command := fmt.Sprintf("env -u %s sh -c %s &\nwait", jobEnv, shellQuote(parent))

	ctx, cancel := context.WithCancel(p.t.Context())
	p.t.Cleanup(cancel)
	done = startBash(p.t, ctx, BashOptions{Dir: p.dir, Timeout: time.Minute, Cgroups: p.cgroups, pause: pause}, command)
	waitForPID(p.t, filepath.Join(p.dir, "puppet"), done)
	return cancel, done
}

// order tells the puppet to start a child ("f") or to start one and exit
// ("x"), and waits until the child is ready or the puppet is stopped (the
// walk got to it first) or dead. It reports whether a child started. It
// runs on killTree's goroutine, so it must not call t.Fatal.
func (p *puppet) order(what string) bool {
	pid, err := readPID(filepath.Join(p.dir, "puppet"))
	if err != nil {
		p.t.Errorf("no puppet: %v", err)
		return false
	}
	if _, err := p.orders.WriteString(what + "\n"); err != nil {
		p.t.Errorf("order %q: %v", what, err)
		return false
	}
	want := p.children + 1
	deadline := time.Now().Add(hangLimit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(filepath.Join(p.dir, "ready")); err == nil && len(strings.Fields(string(data))) >= want {
			p.children = want
			return true
		}
		if q, ok := liveProc(pid); !ok || q.state == "T" {
			return false
		}
		if time.Now().After(deadline) {
			p.t.Errorf("the puppet neither started child %d nor stopped within %v", want, hangLimit)
			return false
		}
		<-tick.C
	}
}

// liveProc reads process pid unless it is gone or a zombie.
func liveProc(pid int) (procInfo, bool) {
	p, ok := readProc(pid)
	return p, ok && p.state != "Z" && p.state != "X"
}

// finish stops the run and checks that nothing of it survived.
func (p *puppet) finish(cancel context.CancelFunc, done chan BashResult) {
	p.t.Helper()
	res := cancelAndWait(p.t, cancel, done)
	if !res.Canceled {
		p.t.Errorf("got %+v, want the run stopped", res)
	}
	requireDead(p.t, readPIDs(p.t, p.dir, 1), p.token)
}

// TestKillTreeStopsBeforeKilling: once the walk has looked at a process and
// stopped it, the process cannot start anything before it is killed. The
// pause gives the puppet the CPU right after the first round's stop and
// tells it to start a child and exit, which would orphan the child beyond
// reach. Without the SIGSTOP the child runs on after RunBash returns.
func TestKillTreeStopsBeforeKilling(t *testing.T) {
	t.Parallel()
	p := newPuppet(t)
	var acted atomic.Bool
	cancel, done := p.run(func(phase killPhase) {
		if phase == phaseStopped && !acted.Swap(true) && p.order("x") {
			t.Errorf("the puppet started a child after the walk had stopped it")
		}
	})
	p.finish(cancel, done)
	if !acted.Load() {
		t.Error("the walk never stopped anything")
	}
}

// TestKillTreeLooksAgainAfterStopping: a process can fork after the walk
// has read /proc and before its SIGSTOP lands. The pause makes the puppet do
// just that at the first look; its child is linked to the command only by
// its parent, so it must be found by looking again while the parent is
// stopped, before anything is killed.
func TestKillTreeLooksAgainAfterStopping(t *testing.T) {
	t.Parallel()
	p := newPuppet(t)
	var acted atomic.Bool
	cancel, done := p.run(func(phase killPhase) {
		if phase == phaseLooked && !acted.Swap(true) && !p.order("f") {
			t.Errorf("the puppet was stopped before the walk had sent any stop")
		}
	})
	p.finish(cancel, done)
	if p.children != 1 {
		t.Errorf("the puppet started %d children, want 1", p.children)
	}
}

// TestKillTreeKillsWhatItCannotStop: a process that the SIGSTOP does not
// hold (a ptrace tracer can swallow the signal for its tracee) and that
// keeps forking would keep the walk finding new processes for good. The
// pause resumes the puppet after every round's stop and has it start
// another child; the walk must still kill it and all its children. Before
// maxStopRounds the walk gave up after maxTreeRounds and only killed the
// shell's process group, which left the children running.
func TestKillTreeKillsWhatItCannotStop(t *testing.T) {
	t.Parallel()
	p := newPuppet(t)
	var rounds atomic.Int32
	cancel, done := p.run(func(phase killPhase) {
		if phase != phaseStopped {
			return
		}
		rounds.Add(1)
		if pid, err := readPID(filepath.Join(p.dir, "puppet")); err == nil {
			_ = syscall.Kill(pid, syscall.SIGCONT) // what a tracer that swallowed the SIGSTOP would do
		}
		p.order("f")
	})
	p.finish(cancel, done)
	if n := rounds.Load(); n < maxStopRounds {
		t.Errorf("the walk stopped new processes in %d rounds, want it to keep at it for %d", n, maxStopRounds)
	}
}

// TestRunBashKillsPIDNamespace: a command can put processes in a PID
// namespace of their own (unshare -p, unprivileged with a user namespace).
// Its init is still a child of the command, visible in latch's /proc with
// latch's pids, and SIGSTOP and SIGKILL from an ancestor namespace reach it;
// killing it kills everything in the namespace, also what left the session
// and dropped the tag inside it.
func TestRunBashKillsPIDNamespace(t *testing.T) {
	t.Parallel()
	unshare := pidNamespaceCommand(t)
	for _, mode := range []string{"timeout", "stop", "exit"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			token := sleepToken()
			t.Cleanup(func() { killByToken(token) })
			// pids holds the processes' pids inside the namespace, which
			// only count them; requireDead finds them by token.
			inner := fmt.Sprintf("echo $$ >> pids; exec sleep %s", token)
			init := fmt.Sprintf("echo $$ >> pids; (setsid env -u %s sh -c %s &); exec sleep %s", jobEnv, shellQuote(inner), token)
			launch := fmt.Sprintf("%s setsid env -u %s sh -c %s &", unshare, jobEnv, shellQuote(init))
			tc := escapeCase{name: "pid namespace", launch: launch, fg: launch + " wait", n: 2}
			dir := t.TempDir()
			runEscapeMode(t, mode, BashOptions{Dir: dir}, tc)
			readPIDs(t, dir, tc.n)
			requireDead(t, nil, token)
		})
	}
}

// pidNamespaceCommand returns the unshare command line that gives a child
// a PID namespace of its own: unprivileged through a user namespace where
// the system allows that, else as root. Without either the test skips,
// unless LATCH_REQUIRE_ROOT_TESTS is set.
func pidNamespaceCommand(t *testing.T) string {
	t.Helper()
	var why []string
	for _, flags := range []string{"-Urpf", "-pf"} {
		out, err := exec.CommandContext(t.Context(), "unshare", flags, "true").CombinedOutput()
		if err == nil {
			return "unshare " + flags
		}
		why = append(why, fmt.Sprintf("unshare %s: %v %s", flags, err, strings.TrimSpace(string(out))))
	}
	msg := "cannot make a PID namespace (no unprivileged user namespaces and not root): " + strings.Join(why, "; ")
	if os.Getenv("LATCH_REQUIRE_ROOT_TESTS") != "" {
		t.Fatal(msg + "; LATCH_REQUIRE_ROOT_TESTS is set")
	}
	t.Skip(msg)
	return ""
}
