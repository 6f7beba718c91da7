package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// DefaultMaxOutput is how many bytes of output RunBash keeps when
// BashOptions.MaxOutput is zero.
const DefaultMaxOutput = 64 << 10

// waitDelay bounds how long RunBash waits for the output pipes to close once
// the command has exited or been killed. By then every process killTree
// could trace to the command is dead, so only one that escaped it (see
// RunBash) can still hold them; it must not be able to hang the call. It
// also bounds how long killTree waits for what it killed to exit.
const waitDelay = 2 * time.Second

// errTimeout is the cancellation cause of BashOptions.Timeout, which tells a
// timeout apart from the caller canceling ctx.
var errTimeout = errors.New("bash: timeout")

// BashOptions configures one RunBash call.
type BashOptions struct {
	Dir       string        // working directory (the workspace); "" = the daemon's
	Timeout   time.Duration // 0 = no timeout beyond ctx
	MaxOutput int           // bytes of combined output kept; 0 = DefaultMaxOutput; the tail is kept
	Env       []string      // nil = SafeEnv(); used as given otherwise; LATCH_JOB is added to either
	// Reaper, when the daemon is a subreaper, keeps its orphan reaping away
	// from this command's own exit status.
	Reaper *Reaper
	// Cgroups, when the daemon has them, gives the command a cgroup of its
	// own, which its processes cannot leave by forking (see Cgroups).
	Cgroups *Cgroups

	pause func(killPhase) // tests only: see treeKill.pause
}

// BashResult is what a finished command left behind.
type BashResult struct {
	// Output is stdout and stderr combined in arrival order. When the
	// command wrote more than MaxOutput bytes only the tail is kept, behind
	// a "[… N bytes cut …]" line.
	Output    string
	ExitCode  int  // -1 when killed by a signal
	TimedOut  bool // killed because BashOptions.Timeout passed
	Canceled  bool // killed (or never started) because ctx was done: /stop
	Truncated bool // Output lost its head
	Duration  time.Duration

	timeout time.Duration  // the Timeout that applied, for Summary
	signal  syscall.Signal // the signal that ended the shell, if any
}

// RunBash runs command with `bash -c` (`sh -c` when there is no bash) in
// opts.Dir, stdin from /dev/null, as the leader of a session and process
// group of its own, with a random LATCH_JOB tag in its environment.
//
// No process of the command outlives the call: on timeout or when ctx is
// done, and when the shell exits on its own but left something running in
// the background, every process of the command gets SIGKILL. A chat command
// or a tool call is one unit that /stop can end, not a way to leave daemons
// behind. That covers the shell's descendants and those that left its
// process group or session (set -m, GNU timeout's setpgid, setsid, a double
// fork): they are found by their session, by the tag and, when latch is a
// subreaper, as orphans it adopted (killTree has the rules).
//
// A PID namespace of the command's own (unshare -p) is no way out: its init
// is one of the command's processes, and killing it kills the namespace.
// Nor is a process the SIGSTOP does not hold (a ptrace tracer can swallow
// it for its tracee): after maxStopRounds the walk kills what it found.
//
// With Cgroups, the shell starts in a cgroup of its own, and every kill
// first kills that cgroup whole (cgroup.kill): no fork, new session,
// dropped tag or fast self-replacement takes a process out of it, so
// nothing that stays in it survives. The walk then runs as well, for a
// process that moved itself to another cgroup its user may write to.
//
// What can escape without Cgroups: a process that leaves the session and
// drops the tag (or makes its environment unreadable) before the kill
// finds it, when latch is not a subreaper (with one, such an orphan is
// killed too, though when another command that started before it is still
// running, only at the end of the last such command); a process that
// replaces itself with a fresh child over and over, faster than the walk
// can stop one (a few lines of C do it: the walk ends at the first look
// that misses it, which in a test was half the time). With or without: a
// process that moved itself out of the cgroup and then outran the walk; a
// process running as another user (sudo), which latch may not signal; a
// process handed to another service manager (systemd-run, at); and
// everything left when latch itself is SIGKILLed, which cannot clean up
// (under systemd, KillMode=mixed kills what is left in the service's
// cgroup, and the next daemon kills what is left in its own tree).
//
// The error is non-nil only when the command could not be started (no
// shell, bad directory, no cgroup for it where Cgroups are in use) or
// waited for; a non-zero exit is reported in the result. If ctx is already
// done the command is not started and the result says Canceled.
func RunBash(ctx context.Context, opts BashOptions, command string) (BashResult, error) {
	if ctx.Err() != nil {
		return BashResult{ExitCode: -1, Canceled: true}, nil
	}
	shell, err := findShell()
	if err != nil {
		return BashResult{}, err
	}
	runCtx, cancel := withTimeout(ctx, opts.Timeout)
	defer cancel()

	group, err := opts.Cgroups.newGroup()
	if err != nil {
		return BashResult{}, err
	}
	defer group.remove()
	out := newTailBuffer(opts.MaxOutput)
	cmd, j := newCommand(runCtx, shell, command, opts, out, group)
	start := time.Now()
	release, err := j.start()
	defer release()
	if err != nil {
		if ctx.Err() != nil { // exec.Start checks ctx too
			return BashResult{ExitCode: -1, Canceled: true}, nil
		}
		return BashResult{}, fmt.Errorf("start %s: %w", shell, err)
	}
	waitErr := j.wait()
	if cmd.ProcessState == nil {
		return BashResult{}, fmt.Errorf("wait for %s: %w", shell, waitErr)
	}

	res := BashResult{
		ExitCode: cmd.ProcessState.ExitCode(),
		Duration: time.Since(start),
		timeout:  opts.Timeout,
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.signal = ws.Signal()
	}
	if j.killedByCtx() {
		res.TimedOut = errors.Is(context.Cause(runCtx), errTimeout)
		res.Canceled = !res.TimedOut
	}
	res.Output, res.Truncated = out.output()
	return res, nil
}

// newCommand prepares the shell: its own session, tagged, in group (when
// not nil), killed with all its processes when runCtx is done, both output
// streams into out.
func newCommand(runCtx context.Context, shell, command string, opts BashOptions, out *tailBuffer, group *cmdGroup) (*exec.Cmd, *job) {
	cmd := exec.CommandContext(runCtx, shell, "-c", command)
	cmd.Dir = opts.Dir
	env := opts.Env
	if env == nil {
		env = SafeEnv()
	}
	tag := newJobTag()
	cmd.Env = withJobTag(env, tag)
	// Stdin stays nil: exec connects it to /dev/null, so a command that
	// reads input gets EOF instead of waiting for a terminal that is not there.
	// One writer for both streams makes exec use a single pipe, which keeps
	// stdout and stderr in the order the command wrote them.
	cmd.Stdout, cmd.Stderr = out, out
	// A session of its own, not just a process group: a process can move
	// to another group of its session (set -m, GNU timeout) but never into
	// another session, so the session keeps finding those. It also leaves
	// the command without a controlling terminal, which it has no use for.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if group != nil {
		// clone3 starts the shell in the group: no instant outside it.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, group.fd
	}
	cmd.WaitDelay = waitDelay
	j := &job{cmd: cmd, tag: tag, reaper: opts.Reaper, group: group, pause: opts.pause}
	cmd.Cancel = j.cancel
	return cmd, j
}

// findShell prefers bash, which is what the model expects, over POSIX sh.
func findShell() (string, error) {
	path, err := exec.LookPath("bash")
	if err == nil {
		return path, nil
	}
	path, err2 := exec.LookPath("sh")
	if err2 != nil {
		return "", fmt.Errorf("find shell: %w", errors.Join(err, err2))
	}
	return path, nil
}

// withTimeout derives the context the command runs under; a timeout carries
// errTimeout as its cause so RunBash can tell it from /stop.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, errTimeout)
}

// job is one running command. Its shell leads a session and a process
// group whose ids are the shell's pid. The command's processes are only
// ever killed while the shell is unreaped (running or a zombie): until then
// the kernel cannot hand that pid to another process, so the session and
// group ids cannot name someone else's.
type job struct {
	cmd    *exec.Cmd
	tag    string    // LATCH_JOB=<random>, in the environment of its processes
	reaper *Reaper   // nil unless latch is a subreaper
	group  *cmdGroup // nil without Cgroups
	pause  func(killPhase)
	server bool // a long-running server StartProcess started, not a command

	mu      sync.Mutex
	shell   procID // the started shell; see shellID
	reaping bool   // the shell is about to be reaped; its processes are already dead
	ctxKill bool   // cancel killed the command because the run context was done
}

// start starts the shell, registered with the reaper when there is one.
func (j *job) start() (release func(), err error) {
	release = func() {}
	if j.reaper == nil {
		err = j.cmd.Start()
	} else {
		serverTag := ""
		if j.server {
			serverTag = j.tag
		}
		release, err = j.reaper.start(j.cmd, serverTag)
	}
	if err != nil {
		return release, err
	}
	j.mu.Lock()
	j.shellID()
	j.mu.Unlock()
	return release, nil
}

// shellID returns the shell as killTree names it, reading its start time
// on first use: from start, or from cancel if the context ends first. The
// shell is unreaped until wait, so its stat is there; were it not, the
// start would stay 0 and killTree would look at older processes too.
// j.mu must be held.
func (j *job) shellID() procID {
	if j.shell.pid == 0 {
		pid := j.cmd.Process.Pid
		p, _ := readProc(pid)
		j.shell = procID{pid: pid, start: p.start}
	}
	return j.shell
}

// cancel is exec.Cmd.Cancel: it runs when the timeout passes or ctx is done.
func (j *job) cancel() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.reaping {
		return os.ErrProcessDone
	}
	j.kill(j.shellID())
	j.ctxKill = true
	return nil
}

// killedByCtx reports whether the command was killed because of the context.
func (j *job) killedByCtx() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ctxKill
}

// wait waits for the shell to exit, kills what is left of the command
// while the shell is still a zombie, and only then reaps it. Killing first
// also closes the output pipes that background children held, so Wait
// returns at once instead of after waitDelay.
func (j *job) wait() error {
	j.mu.Lock()
	shell := j.shellID()
	j.mu.Unlock()
	if err := waitExited(shell.pid); err != nil {
		// Cannot watch without reaping (only if something else reaps our
		// children); fall back to killing after Wait and accept the tiny
		// window in which the shell's pid, the session id, could be reused.
		waitErr := j.cmd.Wait()
		j.kill(shell)
		return waitErr
	}
	j.mu.Lock()
	j.kill(shell)
	j.reaping = true
	j.mu.Unlock()
	return j.cmd.Wait()
}

// kill ends every process of the command: the whole cgroup at once, then
// the walk, for what left the cgroup.
func (j *job) kill(shell procID) {
	j.group.kill(time.Now().Add(waitDelay))
	killTree(shell, j.tag, j.reaper, j.pause)
}

// waitExited blocks until process pid has exited but leaves it unreaped
// (WNOWAIT), so its pid, the group's pgid, stays reserved.
func waitExited(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// killGroup sends SIGKILL to every process in group pgid. killTree falls
// back to it when it cannot read /proc.
func killGroup(pgid int) error {
	// kill(-0) would hit latch's own group and kill(-1) every process we
	// may signal; neither can be a group we started.
	if pgid <= 1 {
		return fmt.Errorf("kill process group %d: not a command's group", pgid)
	}
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	if err != nil {
		return fmt.Errorf("kill process group %d: %w", pgid, err)
	}
	return nil
}

// Summary describes the result in one line for the chat, for example
// "exit 0 · 12ms", "killed: timeout after 1s" or "stopped".
func (r BashResult) Summary() string {
	var s string
	switch {
	case r.Canceled:
		s = "stopped"
	case r.TimedOut:
		after := r.timeout
		if after <= 0 {
			after = r.Duration
		}
		s = "killed: timeout after " + roundDuration(after).String()
	case r.signal != 0:
		s = fmt.Sprintf("killed by %s · %s", unix.SignalName(r.signal), roundDuration(r.Duration))
	default:
		s = fmt.Sprintf("exit %d · %s", r.ExitCode, roundDuration(r.Duration))
	}
	if r.Truncated {
		s += " · output truncated"
	}
	return s
}

// roundDuration keeps two or three significant digits, enough for a chat.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(time.Millisecond)
	default:
		return d.Round(100 * time.Millisecond)
	}
}

// tailBuffer is an io.Writer that keeps only the last limit bytes written,
// in a ring that never grows past limit, so a command printing gigabytes
// costs limit bytes of memory. It is safe for concurrent use.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte // len(buf) <= limit; a ring starting at start once full
	start int
	total int64 // bytes ever written
}

func newTailBuffer(limit int) *tailBuffer {
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	return &tailBuffer{limit: limit}
}

// Write always accepts all of p; what falls off the front is counted.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if n >= b.limit {
		b.buf = append(b.buf[:0], p[n-b.limit:]...)
		b.start = 0
		return n, nil
	}
	if room := b.limit - len(b.buf); room > 0 {
		k := min(room, len(p))
		b.buf = append(b.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // the ring is full: overwrite the oldest bytes
		c := copy(b.buf[b.start:], p)
		p = p[c:]
		b.start = (b.start + c) % b.limit
	}
	return n, nil
}

// output returns the kept tail and whether the head was cut. A cut never
// splits a UTF-8 sequence: the partial rune at the front is dropped too, so
// the chat and the model are not handed a broken character.
func (b *tailBuffer) output() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := make([]byte, 0, len(b.buf))
	kept = append(kept, b.buf[b.start:]...)
	kept = append(kept, b.buf[:b.start]...)
	cut := b.total - int64(len(kept))
	if cut == 0 {
		return string(kept), false
	}
	for i := 0; i < utf8.UTFMax-1 && len(kept) > 0 && !utf8.RuneStart(kept[0]); i++ {
		kept = kept[1:]
		cut++
	}
	return fmt.Sprintf("[… %d bytes cut …]\n%s", cut, kept), true
}
