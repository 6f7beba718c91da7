package tools

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes the calling process a child subreaper
// (PR_SET_CHILD_SUBREAPER): every process it starts stays its descendant
// even after double-forking, so "does this caller descend from the daemon?"
// has a reliable answer. The process must then reap the orphans it adopts:
// run a Reaper.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// Reaper reaps adopted orphans without stealing the exit status of the
// children RunBash waits for: those are tracked from before fork until
// RunBash has reaped them.
type Reaper struct {
	mu      sync.Mutex
	tracked map[int]bool
}

// NewReaper returns a Reaper; pass it to RunBash through BashOptions.
func NewReaper() *Reaper { return &Reaper{tracked: make(map[int]bool)} }

// start starts cmd with the reaper locked, so the child is tracked before
// the reaper could ever see it exit.
func (r *Reaper) start(cmd *exec.Cmd) (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return func() {}, err
	}
	pid := cmd.Process.Pid
	r.tracked[pid] = true
	return func() {
		r.mu.Lock()
		delete(r.tracked, pid)
		r.mu.Unlock()
	}, nil
}

// Reap reaps every zombie child of this process that nobody else waits
// for, and returns how many it reaped. The /proc scan runs without the lock
// so RunBash never waits for it; a child RunBash starts meanwhile is
// tracked before it can exit, and is checked again under the lock.
func (r *Reaper) Reap() int {
	zombies := zombieChildren(os.Getpid())
	if len(zombies) == 0 {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, pid := range zombies {
		if r.tracked[pid] {
			continue
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// Run reaps on every SIGCHLD, and every 10 s as a backstop, until ctx ends.
func (r *Reaper) Run(ctx context.Context) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
		case <-tick.C:
		}
		r.Reap()
	}
}

// zombieChildren lists the zombie processes whose parent is ppid. It reads
// the kernel's list of each thread's children when there is one, and scans
// all of /proc otherwise.
func zombieChildren(ppid int) []int {
	var pids []int
	lists, _ := filepath.Glob("/proc/" + strconv.Itoa(ppid) + "/task/*/children")
	for _, l := range lists {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if lists == nil {
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, path := range stats {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			pids = append(pids, pid)
		}
	}
	var out []int
	for _, pid := range pids {
		state, parent, ok := procStat("/proc/" + strconv.Itoa(pid) + "/stat")
		if ok && state == "Z" && parent == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads the state and parent pid from a /proc/<pid>/stat file.
func procStat(path string) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, false
	}
	// The command name is in parentheses and may contain anything, so
	// parse from the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}

// DescendsFrom reports whether process pid is a strict descendant of
// ancestor. A process that cannot be read (it exited, or /proc is hidden)
// counts as a descendant: callers use this to refuse, so it fails closed.
func DescendsFrom(pid, ancestor int) bool {
	for i := 0; i < 4096 && pid > 1; i++ {
		_, ppid, ok := procStat("/proc/" + strconv.Itoa(pid) + "/stat")
		if !ok {
			return true
		}
		if ppid == ancestor {
			return true
		}
		pid = ppid
	}
	return false
}
