package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var testCgroupSeq atomic.Int64

// testCgroups gives a test a Cgroups of its own: the daemon's tree inside a
// cgroup made for the test below the one the test runs in, removed at the
// end. Without a writable cgroup v2 with cgroup.kill the test skips, unless
// LATCH_REQUIRE_ROOT_TESTS is set (CI runs as root, where there is one).
func testCgroups(t testing.TB) *Cgroups {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	var mounts []byte
	if err == nil {
		mounts, err = os.ReadFile("/proc/self/mountinfo")
	}
	var own string
	if err == nil {
		// Whatever manages the machine, the test's own cgroup is for the
		// test to use: it makes one below it and removes it.
		own, err = ownCgroup(cgroupState{procCgroup: self, mountinfo: mounts})
	}
	parent := filepath.Join(own, fmt.Sprintf("latch-test-%d-%d", os.Getpid(), testCgroupSeq.Add(1)))
	if err == nil {
		err = os.Mkdir(parent, 0o755)
	}
	var c *Cgroups
	if err == nil {
		t.Cleanup(func() { removeTree(parent, time.Now().Add(waitDelay)) })
		c, err = openCgroupsIn(parent)
	}
	if err != nil {
		msg := "no cgroup for the test: " + err.Error()
		if os.Getenv("LATCH_REQUIRE_ROOT_TESTS") != "" {
			t.Fatal(msg + "; LATCH_REQUIRE_ROOT_TESTS is set")
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// commandGroups lists the command cgroups left in c's tree.
func commandGroups(t *testing.T, c *Cgroups) []string {
	t.Helper()
	entries, err := os.ReadDir(c.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		if e.IsDir() {
			left = append(left, e.Name())
		}
	}
	return left
}

// TestCgroupsKillEveryEscape: in a cgroup of its own, a command's
// processes die with it whichever way they left its tree, session and
// environment, and however it ends. The cases only the tree leads to
// (a new session without the tag, orphaned at the shell's exit) are the
// ones the walk alone cannot find without a subreaper: without the cgroup
// they run on.
func TestCgroupsKillEveryEscape(t *testing.T) {
	t.Parallel()
	cg := testCgroups(t)
	for _, mode := range []string{"timeout", "stop", "exit"} {
		for i := range escapeCases("") {
			t.Run(mode+"/"+escapeCases("")[i].name, func(t *testing.T) {
				t.Parallel()
				token := sleepToken()
				tc := escapeCases(token)[i]
				dir := t.TempDir()
				killLeftovers(t, dir, token)
				res := runEscapeMode(t, mode, BashOptions{Dir: dir, Cgroups: cg}, tc)
				if res.Duration >= hangLimit {
					t.Errorf("took %v, want well under %v", res.Duration, hangLimit)
				}
				requireDead(t, readPIDs(t, dir, tc.n), token)
			})
		}
	}
	t.Cleanup(func() {
		if left := commandGroups(t, cg); len(left) > 0 {
			t.Errorf("command cgroups left behind: %v", left)
		}
	})
}

// TestCgroupsKillWhatOutranTheWalk: a process that replaces itself with a
// fresh child in a session of its own, without the tag, between the walk's
// look at /proc and its SIGSTOP leaves nothing that links the child to the
// command (without a subreaper). The pause makes the puppet do it at the
// walk's first look. The cgroup is killed before the walk starts, so the
// puppet is dead by then and has no child; without the cgroup its child
// runs on after RunBash returns.
func TestCgroupsKillWhatOutranTheWalk(t *testing.T) {
	t.Parallel()
	p := newPuppet(t)
	p.cgroups = testCgroups(t)
	var acted atomic.Bool
	cancel, done := p.run(func(phase killPhase) {
		if phase == phaseLooked && !acted.Swap(true) && p.order("x") {
			t.Log("the puppet replaced itself during the walk")
		}
	})
	p.finish(cancel, done)
	if !acted.Load() {
		t.Error("the walk never looked")
	}
}

// TestCgroupsKillOnlyTheirOwnCommand: ending one command kills its cgroup,
// not a command running beside it.
func TestCgroupsKillOnlyTheirOwnCommand(t *testing.T) {
	t.Parallel()
	killsOnlyItsOwn(t, testCgroups(t))
}

// TestCgroupsStartTheShellInside: the shell is in the command's cgroup
// from its first instruction (clone3 puts it there), and the group is gone
// once the command is over.
func TestCgroupsStartTheShellInside(t *testing.T) {
	t.Parallel()
	cg := testCgroups(t)
	res := runBash(t, t.Context(), BashOptions{Dir: t.TempDir(), Cgroups: cg}, "grep ^0:: /proc/self/cgroup")
	want := regexp.MustCompile("/" + regexp.QuoteMeta(filepath.Base(cg.Dir())) + "/cmd-[0-9a-f]{16}\n$")
	if res.ExitCode != 0 || !want.MatchString(res.Output) {
		t.Errorf("the command's cgroup: %q (exit %d), want a path matching %s", res.Output, res.ExitCode, want)
	}
	if left := commandGroups(t, cg); len(left) > 0 {
		t.Errorf("command cgroups left after the command: %v", left)
	}
}

// TestCgroupsWithoutTheirTree: when the daemon's cgroup was removed behind
// latch's back, the next command makes it again; when no cgroup can be
// made for a command, it is refused rather than run uncontained, and the
// refusal shows no host path.
func TestCgroupsWithoutTheirTree(t *testing.T) {
	t.Parallel()
	cg := testCgroups(t)
	if err := os.Remove(cg.Dir()); err != nil {
		t.Fatal(err)
	}
	if res, err := RunBash(t.Context(), BashOptions{Dir: t.TempDir(), Cgroups: cg}, "echo ran"); err != nil || res.Output != "ran\n" {
		t.Errorf("after the tree was removed: %+v, %v; want the command run", res, err)
	}
	// No more cgroups below the daemon's: mkdir fails.
	if err := os.WriteFile(filepath.Join(cg.Dir(), "cgroup.max.descendants"), []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
	res, err := RunBash(t.Context(), BashOptions{Dir: t.TempDir(), Cgroups: cg}, "echo ran")
	if err == nil || res.Output != "" || strings.Contains(err.Error(), "/sys/") || strings.Contains(err.Error(), cg.Dir()) {
		t.Errorf("got %+v, %v; want the command refused, without a host path", res, err)
	}
}

// deadDaemonTree makes the tree a daemon of process p (pid, start time) in
// PID namespace ns would leave in parent, with one command group, and
// returns its path.
func deadDaemonTree(t *testing.T, parent string, ns uint64, pid int, start uint64) string {
	t.Helper()
	dir := filepath.Join(parent, fmt.Sprintf("latch-%d-%d-%d-0a1b2c3d", ns, pid, start))
	if err := os.MkdirAll(filepath.Join(dir, "cmd-0123456789abcdef"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOpenCgroupsRemovesDeadDaemons: a daemon that was SIGKILLed left its
// tree and a command running in it. The next daemon kills that command
// and removes the tree, also when the dead daemon's pid was reused since.
// It leaves the tree of a daemon that still runs (whoever it runs as), and
// a tree of another PID namespace, whose pids it cannot judge.
func TestOpenCgroupsRemovesDeadDaemons(t *testing.T) {
	t.Parallel()
	own := testCgroups(t)
	parent := filepath.Join(own.Dir(), "home")
	ns, err := pidNamespace("self")
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	initProc, _ := readProc(1) // init runs as long as the machine does
	deadTree := deadDaemonTree(t, parent, ns, dead.Process.Pid, 1)
	reused := deadDaemonTree(t, parent, ns, 1, initProc.start+1) // pid 1, but not that process
	live := deadDaemonTree(t, parent, ns, 1, initProc.start)
	elsewhere := deadDaemonTree(t, parent, ns+1, dead.Process.Pid, 1)

	token := sleepToken()
	left := exec.Command("sleep", token)
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = left.Process.Kill(); _ = left.Wait() })
	if err := os.WriteFile(filepath.Join(deadTree, "cmd-0123456789abcdef", "cgroup.procs"), []byte(strconv.Itoa(left.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}

	c, err := openCgroupsIn(parent)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	select {
	case <-exited:
	case <-time.After(hangLimit):
		t.Fatal("the dead daemon's command still runs")
	}
	for _, tc := range []struct {
		dir  string
		kept bool
	}{{deadTree, false}, {reused, false}, {live, true}, {elsewhere, true}} {
		if _, err := os.Stat(tc.dir); (err == nil) != tc.kept {
			t.Errorf("%s: %v, want kept %t", filepath.Base(tc.dir), err, tc.kept)
		}
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	for _, dir := range []string{live, elsewhere} {
		removeTree(dir, time.Now())
	}
	if err := os.Remove(parent); err != nil {
		t.Error(err)
	}
}

// TestOwnCgroup: where latch makes its tree, and where it must not.
func TestOwnCgroup(t *testing.T) {
	t.Parallel()
	const unified = "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	const hybrid = "25 24 0:22 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n" +
		"26 25 0:23 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n" +
		"27 25 0:24 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
	const service = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/latch.service\n"
	marked := func(string) bool { return true }
	unmarked := func(string) bool { return false }
	for _, tc := range []struct {
		name               string
		cgroup, mounts     string
		systemd, invoked   bool
		delegated          func(string) bool
		want, wantErrMatch string
	}{
		{"delegated service", service, unified, true, true, marked,
			"/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/latch.service", ""},
		{"latch's service, not delegated (an older unit)", service, unified, true, true, unmarked, "", "did not delegate"},
		{"latch's service name, not started by systemd", service, unified, true, false, marked, "", "did not delegate"},
		{"a terminal's scope", "0::/user.slice/user-1000.slice/session-3.scope\n", unified, true, false, unmarked, "", "did not delegate"},
		{"another service", "0::/system.slice/cron.service\n", unified, true, true, unmarked, "", "did not delegate"},
		{"no systemd", "0::/\n", unified, false, false, unmarked, "/sys/fs/cgroup", ""},
		{"hybrid hierarchy", "1:name=systemd:/x\n0::/x\n", hybrid, false, false, unmarked, "/sys/fs/cgroup/unified/x", ""},
		{"cgroup v1 only", "1:name=systemd:/x\n2:pids:/x\n", unified, false, false, unmarked, "", "not in a cgroup v2"},
		{"not mounted", "0::/x\n", "25 24 0:22 / /sys rw - sysfs sysfs rw\n", false, false, unmarked, "", "not mounted"},
		{"mounted from a subtree", "0::/outer/x\n", "30 25 0:26 /outer /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", false, false, unmarked, "/sys/fs/cgroup/x", ""},
		{"outside the mounted subtree", "0::/other/x\n", "30 25 0:26 /outer /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", false, false, unmarked, "", "outside"},
		{"cgroup namespace: the host's mount first", "0::/x\n",
			"30 25 0:26 /../.. /sys/fs/cgroup-host rw - cgroup2 cgroup2 rw\n31 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			false, false, unmarked, "/sys/fs/cgroup/x", ""},
		{"escaped mount point", "0::/x\n", "30 25 0:26 / /sys/fs/cg\\040v2 rw - cgroup2 cgroup2 rw\n", false, false, unmarked, "/sys/fs/cg v2/x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ownCgroup(cgroupState{
				procCgroup: []byte(tc.cgroup), mountinfo: []byte(tc.mounts),
				systemd: tc.systemd, invocation: tc.invoked, delegated: tc.delegated,
			})
			if tc.wantErrMatch != "" {
				if err == nil || !errors.Is(err, ErrNoCgroups) || !strings.Contains(err.Error(), tc.wantErrMatch) {
					t.Errorf("got %q, %v; want an ErrNoCgroups saying %q", got, err, tc.wantErrMatch)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// BenchmarkRunBashTrueInCgroup is BenchmarkRunBashTrue with a cgroup per
// command: what making, killing and removing it adds.
func BenchmarkRunBashTrueInCgroup(b *testing.B) {
	cg := testCgroups(b)
	dir := b.TempDir()
	for b.Loop() {
		if _, err := RunBash(context.Background(), BashOptions{Dir: dir, Timeout: 10 * time.Second, Cgroups: cg}, "true"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCgroupsKillWhatMovedIntoTheDaemonsCgroup: a command may move its
// processes into the daemon's own cgroup, which its user may write to,
// and leave them there in a session of their own without the tag: neither
// its group's kill nor the walk (without a subreaper) finds them. Nothing
// else ever runs in the daemon's cgroup, so what is there dies with the
// next command's end.
func TestCgroupsKillWhatMovedIntoTheDaemonsCgroup(t *testing.T) {
	t.Parallel()
	cg := testCgroups(t)
	token := sleepToken()
	dir := t.TempDir()
	killLeftovers(t, dir, token)
	launch := fmt.Sprintf("(echo $BASHPID > %s; setsid env -u %s sh -c 'echo $$ >> pids; exec sleep %s' &)",
		shellQuote(filepath.Join(cg.Dir(), "cgroup.procs")), jobEnv, token)
	tc := escapeCase{name: "moved into the daemon's cgroup", launch: launch, fg: launch + "; sleep " + token, n: 1}
	runEscapeMode(t, "exit", BashOptions{Dir: dir, Cgroups: cg}, tc)
	requireDead(t, readPIDs(t, dir, tc.n), token)
}

// nobodyCgroupEnv names the cgroup a re-executed test runs in as nobody.
const nobodyCgroupEnv = "LATCH_TEST_NOBODY_CGROUP"

// TestCgroupsKillThroughChmod: a daemon that is not root is refused a
// write to a cgroup.kill its user made read-only, and a command runs as
// that user: it can chmod its own group's cgroup.kill, then leave the walk
// nothing to find. Each group's cgroup.kill is opened before the command
// starts and written through that descriptor, which the kernel checked at
// open. Root bypasses file modes, so the test re-runs itself as nobody in
// a cgroup it owns.
func TestCgroupsKillThroughChmod(t *testing.T) {
	if parent := os.Getenv(nobodyCgroupEnv); parent != "" {
		killThroughChmodAsNobody(t, parent)
		return
	}
	t.Parallel()
	if os.Getuid() != 0 {
		msg := "needs root to make a cgroup for nobody"
		if os.Getenv("LATCH_REQUIRE_ROOT_TESTS") != "" {
			t.Fatal(msg + "; LATCH_REQUIRE_ROOT_TESTS is set")
		}
		t.Skip(msg)
	}
	own := testCgroups(t)
	parent := filepath.Join(own.Dir(), "nobody")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		if err := os.Chown(filepath.Join(parent, name), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary where nobody may run it.
	bin, err := os.MkdirTemp("", "latch-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	data, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = errors.Join(os.Chmod(bin, 0o755), os.WriteFile(filepath.Join(bin, "tools.test"), data, 0o755))
	}
	if err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "tools.test"), "-test.run=^TestCgroupsKillThroughChmod$", "-test.v")
	cmd.Dir = bin
	cmd.Env = append(os.Environ(), nobodyCgroupEnv+"="+parent, "TMPDIR=/tmp")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: 65534, Gid: 65534},
		UseCgroupFD: true, CgroupFD: int(fd.Fd()),
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestCgroupsKillThroughChmod")) {
		t.Errorf("as nobody: %v\n%s", err, out)
	}
}

// killThroughChmodAsNobody is TestCgroupsKillThroughChmod's run as nobody,
// in the cgroup parent.
func killThroughChmodAsNobody(t *testing.T, parent string) {
	if os.Getuid() == 0 {
		t.Fatal("runs as root; the test means nobody")
	}
	cg, err := openCgroupsIn(parent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.Close(); err != nil {
			t.Error(err)
		}
	})
	token := sleepToken()
	dir := t.TempDir()
	killLeftovers(t, dir, token)
	launch := fmt.Sprintf("chmod 0444 %s/cmd-*/cgroup.kill; (setsid env -u %s sh -c 'echo $$ >> pids; exec sleep %s' &)",
		shellQuote(cg.Dir()), jobEnv, token)
	tc := escapeCase{name: "chmod cgroup.kill", launch: launch, fg: launch + "; sleep " + token, n: 1}
	for _, mode := range []string{"exit", "stop"} {
		t.Run(mode, func(t *testing.T) {
			runEscapeMode(t, mode, BashOptions{Dir: dir, Cgroups: cg}, tc)
			requireDead(t, readPIDs(t, dir, tc.n), token)
			_ = os.Remove(filepath.Join(dir, "pids"))
		})
	}
}

// noClone3Env names the cgroup a re-executed test probes under a seccomp
// filter that refuses clone3.
const noClone3Env = "LATCH_TEST_NO_CLONE3_CGROUP"

// TestOpenCgroupsProbesClone3: under a seccomp filter that answers clone3
// with ENOSYS (Docker's and Podman's default profiles do), a command could
// not start in a cgroup at all. OpenCgroups finds that out at start and
// refuses cgroups, saying why, so commands run with the walk alone instead
// of failing every time. The filter cannot be lifted, so the test re-runs
// itself under it.
func TestOpenCgroupsProbesClone3(t *testing.T) {
	if parent := os.Getenv(noClone3Env); parent != "" {
		refuseClone3(t)
		c, err := openCgroupsIn(parent)
		if err == nil || !errors.Is(err, ErrNoCgroups) || !strings.Contains(err.Error(), "clone3") {
			t.Errorf("openCgroupsIn under the filter: %v, want ErrNoCgroups naming clone3", err)
			_ = c.Close()
		}
		if entries, _ := os.ReadDir(parent); len(entries) != 0 {
			var dirs []string
			for _, e := range entries {
				if e.IsDir() {
					dirs = append(dirs, e.Name())
				}
			}
			if len(dirs) != 0 {
				t.Errorf("left behind: %v", dirs)
			}
		}
		return
	}
	t.Parallel()
	own := testCgroups(t)
	parent := filepath.Join(own.Dir(), "probe")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestOpenCgroupsProbesClone3$", "-test.v")
	cmd.Env = append(os.Environ(), noClone3Env+"="+parent)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestOpenCgroupsProbesClone3")) {
		t.Errorf("under the filter: %v\n%s", err, out)
	}
}

// refuseClone3 installs, for every thread of the process, a seccomp filter
// that answers clone3 with ENOSYS and allows everything else.
func refuseClone3(t *testing.T) {
	t.Helper()
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_CLONE3},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&prog))); errno != 0 {
		t.Fatalf("seccomp: %v", errno)
	}
}
