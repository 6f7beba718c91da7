package tools

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// The tree is this daemon's own: a directory latch-<pid>-<random> in the
// cgroup latch runs in, with one cmd-<n> per running command. The process walk
// (killTree) still runs after the group is killed, for a process that
// moved itself out of its cgroup, which the same user may do.
//
// A nil *Cgroups is valid and contains nothing: commands then rely on the
// walk alone.
type Cgroups struct {
	dir string // this daemon's cgroup, in which each command gets one
	seq atomic.Uint64

	mu    sync.Mutex
	stale []string // command groups not removed yet (a process would not die)
}

// cgroupState is what OpenCgroups needs to know about the machine; tests
// give their own.
type cgroupState struct {
	procCgroup  []byte // /proc/self/cgroup
	mountinfo   []byte // /proc/self/mountinfo
	systemd     bool   // systemd manages the machine (/run/systemd/system)
	invocation  bool   // systemd started this process ($INVOCATION_ID)
	delegatedTo func(dir string) bool
}

// ErrNoCgroups means commands cannot be put in cgroups of their own here;
// the error wrapping it says why.
var ErrNoCgroups = errors.New("no cgroup per command")

// OpenCgroups finds the cgroup latch runs in and makes the daemon's own
// below it. That needs the unified hierarchy (cgroup v2) with cgroup.kill
// (Linux 5.14), write access, and, where systemd manages the machine, a
// cgroup systemd delegated (the service's Delegate=yes): systemd owns
// every other cgroup, and a tree made below one of those would be in its
// way. Groups of an earlier daemon that died without removing them are
// killed and removed. The error wraps ErrNoCgroups.
func OpenCgroups() (*Cgroups, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	_, statErr := os.Stat("/run/systemd/system")
	dir, err := ownCgroup(cgroupState{
		procCgroup:  self,
		mountinfo:   mounts,
		systemd:     statErr == nil,
		invocation:  os.Getenv("INVOCATION_ID") != "",
		delegatedTo: delegated,
	})
	if err != nil {
		return nil, err
	}
	return openCgroupsIn(dir)
}

// ownCgroup returns the directory of the cgroup this process is in, when
// latch may make its tree below it.
func ownCgroup(s cgroupState) (string, error) {
	var rel string
	found := false
	for line := range strings.SplitSeq(string(s.procCgroup), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = path, true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("%w: not in a cgroup v2 hierarchy", ErrNoCgroups)
	}
	mount, root, ok := cgroup2Mount(s.mountinfo)
	if !ok {
		return "", fmt.Errorf("%w: cgroup v2 is not mounted", ErrNoCgroups)
	}
	sub, ok := strings.CutPrefix(rel, root)
	if !ok || (sub != "" && sub[0] != '/') || strings.Contains(rel, "/..") {
		return "", fmt.Errorf("%w: cgroup %q is outside the mounted tree", ErrNoCgroups, rel)
	}
	dir := filepath.Join(mount, sub)
	if s.systemd && !s.delegatedTo(dir) {
		// A unit of ours started by systemd is delegated when its unit
		// says Delegate=yes, as the one latch installs does; systemd's
		// user manager marks none of its cgroups.
		if !s.invocation || filepath.Base(dir) != "latch.service" {
			return "", fmt.Errorf("%w: systemd did not delegate cgroup %s to latch (run latch as its service, whose unit has Delegate=yes)", ErrNoCgroups, rel)
		}
	}
	return dir, nil
}

// cgroup2Mount finds the cgroup2 mount in mountinfo: its mount point and
// the cgroup it shows as its root.
func cgroup2Mount(mountinfo []byte) (mount, root string, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		pre, post, found := strings.Cut(sc.Text(), " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		return unescapeMount(f[4]), strings.TrimSuffix(unescapeMount(f[3]), "/"), true
	}
	return "", "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// delegated reports whether systemd marked the cgroup at dir as delegated
// (systemd 251 and later set these attributes with Delegate=yes).
func delegated(dir string) bool {
	buf := make([]byte, 8)
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, name, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	return false
}

// openCgroupsIn makes the daemon's cgroup in parent, after removing what
// dead daemons left there.
func openCgroupsIn(parent string) (*Cgroups, error) {
	removeDeadDaemons(parent)
	// The random part keeps two daemons of one process (tests start
	// several) out of each other's tree.
	var r [4]byte
	_, _ = rand.Read(r[:])
	dir := filepath.Join(parent, "latch-"+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(r[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	// Every cgroup but the root has cgroup.kill, where the kernel has it.
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("%w: no cgroup.kill (Linux 5.14 or later has it): %w", ErrNoCgroups, err)
	}
	return &Cgroups{dir: dir}, nil
}

// removeDeadDaemons kills and removes the trees of latch daemons in parent
// whose process is gone: they died without removing them (SIGKILL, a
// crash), and what still runs there is a command nobody ends any more.
func removeDeadDaemons(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ours := strings.CutPrefix(e.Name(), "latch-")
		digits, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(digits)
		if !e.IsDir() || !ours || err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == nil || pid == os.Getpid() {
			continue // alive (or its pid taken by another process: leave it)
		}
		removeTree(filepath.Join(parent, e.Name()), time.Now().Add(waitDelay))
	}
}

// removeTree kills everything in the cgroup tree at dir and removes it,
// leaves first. It reports whether dir is gone.
func removeTree(dir string, deadline time.Time) bool {
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()), deadline)
		}
	}
	awaitEmpty(dir, deadline)
	err := unix.Rmdir(dir)
	return err == nil || errors.Is(err, unix.ENOENT)
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
	c   *Cgroups
	dir string
	fd  int // the directory, open for clone3's CLONE_INTO_CGROUP
}

// newGroup makes the cgroup of a command that is about to start; nil when
// c is nil. It first retries removing groups that earlier commands left.
func (c *Cgroups) newGroup() (*cmdGroup, error) {
	if c == nil {
		return nil, nil
	}
	c.retryStale()
	dir := filepath.Join(c.dir, "cmd-"+strconv.FormatUint(c.seq.Add(1), 10))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the command's cgroup: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("open the command's cgroup: %w", err)
	}
	return &cmdGroup{c: c, dir: dir, fd: fd}, nil
}

// kill SIGKILLs every process in the group at once; a process forking
// while it happens is killed with its child. It waits (until deadline) for
// them to exit, so their output pipes close and their orphans are there to
// reap.
func (g *cmdGroup) kill(deadline time.Time) {
	if g == nil {
		return
	}
	_ = os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0)
	awaitEmpty(g.dir, deadline)
}

// remove removes the group once its command is over; a group that still
// holds a process (one stuck in the kernel) is killed again and removed
// by a later command or by Close.
func (g *cmdGroup) remove() {
	if g == nil {
		return
	}
	_ = unix.Close(g.fd)
	if err := unix.Rmdir(g.dir); err == nil || errors.Is(err, unix.ENOENT) {
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
