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
// RunBash has reaped them. The tracked shells are also the list of running
// commands that RunBash consults before it kills an adopted orphan, so
// every RunBash of the process must be given the same Reaper.
type Reaper struct {
	mu      sync.Mutex
	tracked map[int]uint64 // shell pid → its start time (procID.start)
}

// NewReaper returns a Reaper; pass it to RunBash through BashOptions.
func NewReaper() *Reaper { return &Reaper{tracked: make(map[int]uint64)} }

// start starts cmd with the reaper locked, so the child is tracked before
// the reaper could ever see it exit.
func (r *Reaper) start(cmd *exec.Cmd) (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return func() {}, err
	}
	pid := cmd.Process.Pid
	// The shell is unreaped, so its stat is there; 0 if not, which makes
	// it count as older than any orphan and so keeps killTree off them.
	p, _ := readProc(pid)
	r.tracked[pid] = p.start
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
		if _, ok := r.tracked[pid]; ok {
			continue
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// running returns the shell of every running command other than except,
// with the time it started. A nil Reaper knows of none.
func (r *Reaper) running(except int) map[int]uint64 {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int]uint64, len(r.tracked))
	for pid, start := range r.tracked {
		if pid != except {
			out[pid] = start
		}
	}
	return out
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
		p, ok := readProc(pid)
		if ok && p.state == "Z" && p.ppid == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// DescendsFrom reports whether process pid is a strict descendant of
// ancestor. A process that cannot be read (it exited, or /proc is hidden)
// counts as a descendant: callers use this to refuse, so it fails closed.
func DescendsFrom(pid, ancestor int) bool {
	for i := 0; i < 4096 && pid > 1; i++ {
		p, ok := readProc(pid)
		if !ok {
			return true
		}
		if p.ppid == ancestor {
			return true
		}
		pid = p.ppid
	}
	return false
}
