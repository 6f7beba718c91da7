package tools

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// jobEnv names the variable that tags every process of one command. RunBash
// sets it to a random value per command; a child inherits it through fork
// and exec, so a process that left the command's session (a daemon that
// called setsid and forked away) can still be told apart from the owner's
// other processes and from the processes of a command running alongside.
const jobEnv = "LATCH_JOB"

// maxTreeRounds bounds the walk in killTree. Every round stops what it
// finds, so a finite tree needs a handful; the bound is only there so a
// process table that never settles cannot keep the call forever.
const maxTreeRounds = 1000

// maxStopRounds is how many rounds killTree spends stopping what it finds
// before it kills what it has found even though new processes keep
// turning up. A tree whose processes stay stopped settles in a few
// rounds; one that does not has a process the SIGSTOP did not hold (a
// ptrace tracer can swallow it and let its tracee fork on), and only
// SIGKILL, which nothing can swallow, ends that.
const maxStopRounds = 50

// killPhase names a point between two steps of killTree.
type killPhase int

const (
	// phaseLooked: a round has read /proc and claimed what it found.
	phaseLooked killPhase = iota
	// phaseStopped: the round has sent SIGSTOP to what was new.
	phaseStopped
)

// newJobTag returns a fresh "LATCH_JOB=<128 random bits>" entry.
func newJobTag() string {
	return jobEnv + "=" + randomHex(16)
}

// randomHex returns n random bytes in hex: job tags, cgroup and part file
// names.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on Linux; Go crashes instead
	return hex.EncodeToString(b)
}

// withJobTag returns a copy of env with tag in place of any LATCH_JOB it
// had: latch itself may run under another latch's command, and that tag is
// not this command's.
func withJobTag(env []string, tag string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); name != jobEnv {
			out = append(out, kv)
		}
	}
	return append(out, tag)
}

// procID names one process for good: a pid can be reused once its process
// is reaped, but not with the same start time.
type procID struct {
	pid   int
	start uint64 // clock ticks after boot (field 22 of /proc/<pid>/stat)
}

// procInfo is what killTree needs from /proc/<pid>/stat.
type procInfo struct {
	procID
	state           string
	ppid, pgid, sid int
}

// readProc reads the stat file of process pid.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// The command name is in parentheses and may contain anything, so
	// parse from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procInfo{}, false
	}
	p := procInfo{procID: procID{pid: pid}, state: f[0]}
	var errs [4]error
	p.ppid, errs[0] = strconv.Atoi(f[1])
	p.pgid, errs[1] = strconv.Atoi(f[2])
	p.sid, errs[2] = strconv.Atoi(f[3])
	p.start, errs[3] = strconv.ParseUint(f[19], 10, 64)
	return p, errors.Join(errs[:]...) == nil
}

// scanProcs reads every process in /proc. All of /proc, not the kernel's
// per-thread children lists: those need CONFIG_PROC_CHILDREN, which some
// kernels lack, and an orphan is not in its old parent's list anyway.
func scanProcs() ([]procInfo, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	procs := make([]procInfo, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok { // else it exited since ReadDir
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// treeKill kills the processes of one command: its shell, everything that
// descends from it, and whatever left the tree but can still be traced to
// it. A process is this command's when it started no earlier than the shell
// and
//
//   - it is the shell, or its parent is one of this command's processes;
//   - it is in a session one of them was in. The shell leads a session of
//     its own, setpgid cannot cross sessions and setsid only makes new ones,
//     so every member of such a session descends from this command (the
//     session id stays reserved while the session has a member);
//   - its environment carries the command's LATCH_JOB tag; or
//   - with a Reaper, latch is a subreaper: an untracked child of latch in a
//     session other than latch's own is an orphan adopted from some
//     command (latch starts nothing else that leaves its session), and it
//     is this one's when no other running command started early enough to
//     have started it. It may instead be the leftover of a command that
//     overlapped this one and has ended, and so has outlived its limit too.
//
// Processes in latch's own session, latch itself and the shells of other
// commands are never this command's.
type treeKill struct {
	root   procID // the shell, as it was when it started
	tag    string
	reaper *Reaper
	// pause, when set, runs at each phase. Tests use it to let the
	// command's processes act at the worst moment a scheduler could pick.
	pause func(killPhase)
	// exitBy bounds how long the kills wait for what they killed to exit;
	// set by the first kill.
	exitBy time.Time

	self, selfSid, selfPgrp int
	sessions                map[int]bool
	ours                    map[int]uint64 // pid → start of every process found
	stopped, killed         map[procID]bool
}

// killTree SIGKILLs every process of a command (see treeKill). It runs in
// rounds: each reads /proc, SIGSTOPs what it finds that is not stopped yet,
// so it can no longer fork or exit, and looks again; once a round finds
// nothing new, everything found gets SIGKILL, its process group too, and
// the rounds go on until one finds nothing left to kill. A process forked
// between a look and its parent's SIGSTOP is found by the next round as
// long as it stays in the tree, keeps the tag or the session, or is adopted
// by latch. Stopping first is what keeps the tree: a parent killed before
// its new child was seen would hand the child to init, and a child that
// also left the session and dropped the tag could no longer be told apart.
// If new processes still turn up after maxStopRounds, what was found is
// killed anyway. Each kill waits (up to waitDelay in all) for what it
// killed to exit, so the next look sees the orphans it left and the caller
// can reap them. The shell's session id is its pid: the caller guarantees
// that the shell is unreaped, or accepts that the pid may have been reused.
func killTree(root procID, tag string, reaper *Reaper, pause func(killPhase)) {
	k := &treeKill{
		root: root, tag: tag, reaper: reaper, pause: pause,
		self: os.Getpid(), selfPgrp: syscall.Getpgrp(),
		sessions: map[int]bool{root.pid: true},
		ours:     make(map[int]uint64),
		stopped:  make(map[procID]bool),
		killed:   make(map[procID]bool),
	}
	k.selfSid, _ = unix.Getsid(0)
	signalProc(root, unix.SIGSTOP) // a stopped shell can neither fork nor exit mid-walk
	k.stopped[root] = true
	for round := range maxTreeRounds {
		procs, err := scanProcs()
		if err != nil { // no /proc: the process group is all that can be found
			_ = killGroup(root.pid)
			return
		}
		found := k.claim(procs)
		k.at(phaseLooked)
		if round < maxStopRounds && k.stopNew(found) {
			k.at(phaseStopped)
			continue
		}
		if !k.killAll(found) {
			return
		}
	}
	_ = killGroup(root.pid)
}

// at runs the pause hook, if any.
func (k *treeKill) at(phase killPhase) {
	if k.pause != nil {
		k.pause(phase)
	}
}

// stopNew SIGSTOPs the processes of found not yet stopped or killed, and
// reports whether there were any.
func (k *treeKill) stopNew(found []procInfo) bool {
	fresh := false
	for _, p := range found {
		if !k.stopped[p.procID] && !k.killed[p.procID] {
			signalProc(p.procID, unix.SIGSTOP)
			k.stopped[p.procID] = true
			fresh = true
		}
	}
	return fresh
}

// killAll SIGKILLs the process groups of found, then each process not
// killed yet, and reports whether there was any. Every group is signalled
// while a stopped member keeps its id reserved; all its members are in that
// member's session, so they are this command's.
func (k *treeKill) killAll(found []procInfo) bool {
	var todo []procInfo
	for _, p := range found {
		if !k.killed[p.procID] {
			todo = append(todo, p)
		}
	}
	groups := make(map[int]bool)
	for _, p := range todo {
		if p.pgid > 1 && p.pgid != k.selfPgrp && !groups[p.pgid] {
			groups[p.pgid] = true
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	}
	var sent []procID
	for _, p := range todo {
		if signalProc(p.procID, unix.SIGKILL) {
			sent = append(sent, p.procID)
		}
		k.killed[p.procID] = true
	}
	if k.exitBy.IsZero() {
		k.exitBy = time.Now().Add(waitDelay)
	}
	for _, p := range sent {
		awaitExit(p, k.exitBy)
	}
	return len(todo) > 0
}

// awaitExit waits until process p has exited (all its threads), or until
// deadline: a process stuck in the kernel (D state, a dead NFS server) can
// take its SIGKILL late, and must not hold the call for long. Without
// pidfds (Linux before 5.3) it does not wait.
func awaitExit(p procID, deadline time.Time) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return // gone (or no pidfds)
	}
	defer unix.Close(fd)
	if q, ok := readProc(p.pid); !ok || q.start != p.start {
		return // the pid names another process now: p is gone
	}
	// A pidfd polls readable once the whole thread group has exited; a
	// zombie leader whose other threads still run does not count.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if n > 0 || !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// claim returns the processes of the snapshot procs that are this
// command's, remembering them and their sessions for later rounds.
func (k *treeKill) claim(procs []procInfo) []procInfo {
	byPID := make(map[int]procInfo, len(procs))
	for _, p := range procs {
		byPID[p.pid] = p
	}
	// Taken after the scan: a command that registers later started after
	// every process of the snapshot, so it cannot have started any of them.
	others := k.reaper.running(k.root.pid)
	servers := k.reaper.serverTags(k.root.pid)
	mine := make(map[int]bool)
	checked := make(map[int]bool) // the tag and adoption were looked at
	var found []procInfo
	take := func(p procInfo) {
		mine[p.pid] = true
		k.ours[p.pid] = p.start
		k.sessions[p.sid] = true
		found = append(found, p)
	}
	for {
		for grew := true; grew; { // the cheap rules, to a fixed point
			grew = false
			for _, p := range procs {
				if !mine[p.pid] && k.candidate(p, others) && k.linked(p, byPID) {
					take(p)
					grew = true
				}
			}
		}
		grew := false
		for _, p := range procs {
			if mine[p.pid] || checked[p.pid] || !k.candidate(p, others) {
				continue
			}
			checked[p.pid] = true
			if k.tagged(p.pid) || k.adoptedOnlyFromUs(p, others, servers) {
				take(p)
				grew = true
			}
		}
		if !grew {
			return found
		}
	}
}

// candidate rules out what can never be this command's: latch, its
// session, init, the other commands' shells and what started before this
// one. Zombies stay in: signalling one does no harm, and a process whose
// first thread exited shows as a zombie while its other threads run.
func (k *treeKill) candidate(p procInfo, others map[int]uint64) bool {
	if p.pid <= 1 || p.pid == k.self || p.sid == k.selfSid {
		return false
	}
	if _, ok := others[p.pid]; ok {
		return false
	}
	return p.start >= k.root.start
}

// linked reports whether p is the shell, a child of this command's
// process, a process seen in an earlier round, or a member of one of its
// sessions.
func (k *treeKill) linked(p procInfo, byPID map[int]procInfo) bool {
	if p.procID == k.root || k.sessions[p.sid] {
		return true
	}
	if start, ok := k.ours[p.pid]; ok && start == p.start {
		return true
	}
	parent, ok := byPID[p.ppid]
	if !ok {
		return false
	}
	start, ok := k.ours[parent.pid]
	return ok && start == parent.start
}

// tagged reports whether process pid carries this command's LATCH_JOB tag.
// The environment of another user's process cannot be read; nor can such a
// process be signalled, so it is not missed.
func (k *treeKill) tagged(pid int) bool { return hasEnvEntry(pid, k.tag) }

// hasEnvEntry reports whether process pid's environment holds entry.
func hasEnvEntry(pid int, entry string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for e := range bytes.SplitSeq(env, []byte{0}) {
		if string(e) == entry {
			return true
		}
	}
	return false
}

// adoptedOnlyFromUs reports whether p is an orphan latch adopted as a
// subreaper that only this command can have left behind: every other
// running command's shell started after p did. A running server
// (StartProcess) runs for as long as the daemon, so it would be older
// than every orphan and no command's would be killed: servers are left
// out of that comparison, and an orphan that carries a server's tag is
// that server's, not this command's.
func (k *treeKill) adoptedOnlyFromUs(p procInfo, others map[int]uint64, servers map[int]string) bool {
	if k.reaper == nil || p.ppid != k.self {
		return false
	}
	for pid, start := range others {
		if _, server := servers[pid]; !server && start <= p.start {
			return false
		}
	}
	for _, tag := range servers {
		if hasEnvEntry(p.pid, tag) {
			return false
		}
	}
	return true
}

// signalProc sends sig to p if p.pid still names that process, and
// reports whether it did (not when p is gone or belongs to another user).
// The pidfd pins the process, so the check cannot be raced by the pid's
// reuse.
func signalProc(p procID, sig unix.Signal) bool {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if errors.Is(err, unix.ENOSYS) { // Linux before 5.3: check, then kill
		if q, ok := readProc(p.pid); ok && q.start == p.start {
			return unix.Kill(p.pid, sig) == nil
		}
		return false
	}
	if err != nil {
		return false // gone
	}
	defer unix.Close(fd)
	if q, ok := readProc(p.pid); ok && q.start == p.start {
		return unix.PidfdSendSignal(fd, sig, nil, 0) == nil
	}
	return false
}
