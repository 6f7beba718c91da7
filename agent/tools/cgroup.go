package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroups puts every command in a cgroup (v2) of its own, so that ending
// the command reaches every process it started, however it got away:
// a fork or exec is no way out of a cgroup, nor is a new session, a
// dropped LATCH_JOB tag or a process that replaces itself with a fresh
// child faster than any walk of /proc can stop it. The kernel kills the
// whole group at once (cgroup.kill), racing forks included.
//
// The tree is this daemon's own: a directory latch-<pidns>-<pid>-<start>-
// <random> in the cgroup latch runs in (named so that a later daemon can
// tell whether this one still runs), with one cmd-<random> per running
// command. Nothing else ever runs in the daemon's directory: a process
// found there moved itself out of its command's group, and is killed with
// the next command's end. The process walk (killTree) still runs after the
// group is killed, for a process that moved itself elsewhere, which the
// same user may do.
//
// A command runs as the owner's user, who owns its cgroup: it can chmod
// cgroup.kill, so each group's is opened before the command starts, and
// written through that descriptor, which the kernel checked at open.
//
// A nil *Cgroups is valid and contains nothing: commands then rely on the
// walk alone.
type Cgroups struct {
	dir string // this daemon's cgroup, in which each command gets one

	mu    sync.Mutex
	stale []string // command groups not removed yet (a process would not die)
}

// openCgroupsIn makes the daemon's cgroup in parent, after removing what
// dead daemons left there, and checks that a process can be started in a
// cgroup of it.
func openCgroupsIn(parent string) (*Cgroups, error) {
	ns, err := pidNamespace("self")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	self, ok := readProc(os.Getpid())
	if !ok {
		return nil, fmt.Errorf("%w: cannot read /proc/self/stat", ErrNoCgroups)
	}
	removeDeadDaemons(parent, ns)
	name := fmt.Sprintf("latch-%d-%d-%d-%s", ns, self.pid, self.start, randomHex(4))
	c := &Cgroups{dir: filepath.Join(parent, name)}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	if err := c.probe(); err != nil {
		removeTree(c.dir, time.Now())
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	return c, nil
}

// probe checks what commands will need: cgroup.kill (Linux 5.14; every
// cgroup but the root has it) and clone3 into a cgroup, which a seccomp
// filter may refuse (Docker's and Podman's default profiles do). The
// probe's child never runs anything: it fails to exec a path that cannot
// exist in cgroupfs, which tells clone3 worked.
func (c *Cgroups) probe() error {
	g, err := c.newGroup()
	if err != nil {
		return err
	}
	defer g.remove()
	cmd := exec.Command(filepath.Join(g.dir, "no-such-program"))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.fd}
	err = cmd.Start()
	if err == nil {
		_ = cmd.Wait()
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("start a process in a cgroup (clone3): %w", err)
}

// pidNamespace returns the inode of the PID namespace of process pid
// ("self" for this one).
func pidNamespace(pid string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/ns/pid", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// removeDeadDaemons kills and removes the trees of latch daemons in parent
// that are gone: they died without removing them (SIGKILL, a crash), and
// what still runs there is a command nobody ends any more. Only trees of
// daemons in this PID namespace are judged (another namespace's pids mean
// nothing here), and a daemon is gone when no process has its pid with
// its start time.
func removeDeadDaemons(parent string, ns uint64) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		f := strings.Split(e.Name(), "-")
		if len(f) != 5 || f[0] != "latch" || f[1] != strconv.FormatUint(ns, 10) {
			continue
		}
		pid, err1 := strconv.Atoi(f[2])
		start, err2 := strconv.ParseUint(f[3], 10, 64)
		if err1 != nil || err2 != nil || pid <= 0 {
			continue
		}
		if p, ok := readProc(pid); ok && p.start == start {
			continue // still running (maybe as another user, or it is us)
		}
		removeTree(filepath.Join(parent, e.Name()), time.Now().Add(waitDelay))
	}
}

// removeTree kills everything in the cgroup tree at dir and removes it,
// leaves first. A cgroup.kill or directory a command made read-only is
// made writable again: the daemon's user owns the tree. It reports
// whether dir is gone.
func removeTree(dir string, deadline time.Time) bool {
	killCgroup(dir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()), deadline)
		}
	}
	awaitEmpty(dir, deadline)
	err := unix.Rmdir(dir)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		_ = os.Chmod(filepath.Dir(dir), 0o755)
		err = unix.Rmdir(dir)
	}
	return err == nil || errors.Is(err, unix.ENOENT)
}

// killCgroup writes to the cgroup.kill of dir by its path, making it
// writable first if need be.
func killCgroup(dir string) {
	path := filepath.Join(dir, "cgroup.kill")
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		_ = os.Chmod(path, 0o200)
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return
	}
	_, _ = unix.Write(fd, []byte("1"))
	_ = unix.Close(fd)
}

// Dir is the daemon's cgroup, in which each command gets one of its own.
func (c *Cgroups) Dir() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// Close kills and removes what is left of the daemon's tree. Commands must
// have ended.
func (c *Cgroups) Close() error {
	if c == nil {
		return nil
	}
	if !removeTree(c.dir, time.Now().Add(waitDelay)) {
		return fmt.Errorf("remove cgroup %s: processes are still in it", c.dir)
	}
	return nil
}

// cmdGroup is the cgroup of one command.
type cmdGroup struct {
	c      *Cgroups
	dir    string
	fd     int // the directory, open for clone3's CLONE_INTO_CGROUP
	killFd int // its cgroup.kill, opened before the command could chmod it
}

// errNoGroup is what a command is refused with when it cannot have a
// cgroup. The refusal reaches the chat and the model, so its cause is
// given without the host path.
var errNoGroup = errors.New("no cgroup for the command")

// newGroup makes the cgroup of a command that is about to start; nil when
// c is nil. It first retries removing groups that earlier commands left,
// and remakes the daemon's tree if it was removed (or made read-only)
// behind latch's back. Its name is random: a command cannot make the next
// one's name first.
func (c *Cgroups) newGroup() (*cmdGroup, error) {
	if c == nil {
		return nil, nil
	}
	c.retryStale()
	dir := filepath.Join(c.dir, "cmd-"+randomHex(8))
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) {
		err = errors.Join(os.Mkdir(c.dir, 0o755), os.Mkdir(dir, 0o755))
	} else if errors.Is(err, fs.ErrPermission) {
		err = errors.Join(os.Chmod(c.dir, 0o755), os.Mkdir(dir, 0o755))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoGroup, pathless(err))
	}
	g := &cmdGroup{c: c, dir: dir, fd: -1, killFd: -1}
	g.fd, err = unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		g.killFd, err = unix.Open(filepath.Join(dir, "cgroup.kill"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		g.remove()
		return nil, fmt.Errorf("%w: %w", errNoGroup, err)
	}
	return g, nil
}

// pathless drops the path from a *PathError.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// kill SIGKILLs every process in the group at once; a process forking
// while it happens is killed with its child. It waits (until deadline) for
// them to exit, so their output pipes close and their orphans are there to
// reap. Then it kills what moved itself into the daemon's own cgroup.
func (g *cmdGroup) kill(deadline time.Time) {
	if g == nil {
		return
	}
	_, _ = unix.Write(g.killFd, []byte("1"))
	awaitEmpty(g.dir, deadline)
	g.c.sweep(deadline)
}

// maxSweepRounds bounds sweep: a process that forks as it is moved leaves
// its child behind for the next round.
const maxSweepRounds = 20

// sweep kills the processes in the daemon's own cgroup, where nothing
// runs but what moved itself there out of its command's group: each round
// moves them into a fresh group (a move cannot race a fork) and kills it.
func (c *Cgroups) sweep(deadline time.Time) {
	procs := filepath.Join(c.dir, "cgroup.procs")
	for range maxSweepRounds {
		pids, err := os.ReadFile(procs)
		if err != nil || len(bytes.TrimSpace(pids)) == 0 {
			return
		}
		trap := filepath.Join(c.dir, "trap-"+randomHex(8))
		if os.Mkdir(trap, 0o755) != nil {
			return
		}
		for pid := range strings.FieldsSeq(string(pids)) {
			if p, err := strconv.Atoi(pid); err == nil && p != os.Getpid() {
				_ = os.WriteFile(filepath.Join(trap, "cgroup.procs"), []byte(pid), 0)
			}
		}
		removeTree(trap, deadline)
	}
}

// remove removes the group once its command is over. kill has emptied
// it; only if that failed (a process stuck in the kernel, a group made
// read-only by its command) is it killed again, and left to a later
// command or to Close if it still holds a process.
func (g *cmdGroup) remove() {
	if g == nil {
		return
	}
	for _, fd := range []int{g.fd, g.killFd} {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
	if err := unix.Rmdir(g.dir); err == nil || removeTree(g.dir, time.Now()) {
		return
	}
	g.c.mu.Lock()
	g.c.stale = append(g.c.stale, g.dir)
	g.c.mu.Unlock()
}

// retryStale removes the groups whose processes have died since.
func (c *Cgroups) retryStale() {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.stale[:0]
	for _, dir := range c.stale {
		if !removeTree(dir, time.Now()) {
			kept = append(kept, dir)
		}
	}
	c.stale = kept
}

// awaitEmpty waits until no process is left in the cgroup at dir, or until
// deadline. cgroup.events says "populated 0" then; the kernel wakes a
// poll for priority data on it at every change.
func awaitEmpty(dir string, deadline time.Time) {
	f, err := os.Open(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 256)
	for {
		n, err := f.ReadAt(buf, 0)
		if err != nil && n == 0 {
			return
		}
		if bytes.Contains(buf[:n], []byte("populated 0")) {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
