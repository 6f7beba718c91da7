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
	// servers are the tracked processes StartProcess started: long-running
	// servers, pid → their LATCH_JOB tag entry. See adoptedOnlyFromUs.
	servers map[int]string
	// ended wakes Run when a command ends, so that after its context is
	// done it notices that the last one has.
	ended chan struct{}
}

// NewReaper returns a Reaper; pass it to RunBash through BashOptions.
func NewReaper() *Reaper {
	return &Reaper{tracked: make(map[int]uint64), servers: make(map[int]string), ended: make(chan struct{}, 1)}
}

// start starts cmd with the reaper locked, so the child is tracked before
// the reaper could ever see it exit. The returned release, called once the
// command is over and its shell reaped, also reaps what the command's end
// killed: killTree waits for those to exit, so they are zombies by then,
// and they must not wait for Run, which may have returned. serverTag is
// the tag entry of a server StartProcess starts, "" for a command.
func (r *Reaper) start(cmd *exec.Cmd, serverTag string) (release func(), err error) {
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
	if serverTag != "" {
		r.servers[pid] = serverTag
	}
	return func() {
		r.mu.Lock()
		delete(r.tracked, pid)
		delete(r.servers, pid)
		r.mu.Unlock()
		r.Reap()
		select {
		case r.ended <- struct{}{}:
		default: // Run has a wake-up pending already
		}
	}, nil
}

// busy reports whether a command started through r is still running.
func (r *Reaper) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tracked) > 0
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

// serverTags returns the tag entries of the running servers other than
// except, by pid. A nil Reaper knows of none.
func (r *Reaper) serverTags(except int) map[int]string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int]string, len(r.servers))
	for pid, tag := range r.servers {
		if pid != except {
			out[pid] = tag
		}
	}
	return out
}

// Run reaps on every SIGCHLD, and every 10 s as a backstop, until ctx ends
// and no command started through r is running. A daemon cancels ctx when
// it begins to stop, but the commands it lets finish in its shutdown grace
// still leave orphans that exit, and kill more when they end; those must
// not stay zombies until the process exits. Each command's end reaps what
// it killed, so a command that starts after Run has returned leaves no
// zombies behind either, only its orphans that exit on their own stay
// zombies until it ends.
func (r *Reaper) Run(ctx context.Context) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	done := ctx.Done()
	for {
		select {
		case <-done:
			done = nil // from now on, only until the last command ends
		case <-sig:
		case <-tick.C:
		case <-r.ended:
			if done != nil {
				continue // the command's end reaped what it killed already
			}
		}
		r.Reap()
		if done == nil && !r.busy() {
			return
		}
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
// So does a pid of 0 or less, which is what SO_PEERCRED reports for a
// process in another pid namespace.
func DescendsFrom(pid, ancestor int) bool {
	if pid <= 0 {
		return true
	}
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
