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
// the command has exited or been killed. By then every process of the group
// is dead, so only a process that left the group (setsid, set -m, a daemon)
// can still hold them; it must not be able to hang the call.
const waitDelay = 2 * time.Second

// errTimeout is the cancellation cause of BashOptions.Timeout, which tells a
// timeout apart from the caller canceling ctx.
var errTimeout = errors.New("bash: timeout")

// BashOptions configures one RunBash call.
type BashOptions struct {
	Dir       string        // working directory (the workspace); "" = the daemon's
	Timeout   time.Duration // 0 = no timeout beyond ctx
	MaxOutput int           // bytes of combined output kept; 0 = DefaultMaxOutput; the tail is kept
	Env       []string      // nil = SafeEnv(); used as given otherwise
	// Reaper, when the daemon is a subreaper, keeps its orphan reaping away
	// from this command's own exit status.
	Reaper *Reaper
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
// opts.Dir, stdin from /dev/null, in a process group of its own.
//
// No process of that group outlives the call: on timeout or when ctx is done
// the whole group gets SIGKILL, and when the shell exits on its own whatever
// it left running in the background gets SIGKILL too. A command's background
// children do not outlive it: a chat command or a tool call is one unit that
// /stop can end, not a way to leave daemons behind. A process that leaves the
// group on purpose (setsid, set -m) escapes this; containing it would take a
// cgroup.
//
// The error is non-nil only when the command could not be started (no shell,
// bad directory) or waited for; a non-zero exit is reported in the result.
// If ctx is already done the command is not started and the result says
// Canceled.
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

	out := newTailBuffer(opts.MaxOutput)
	cmd, group := newCommand(runCtx, shell, command, opts, out)
	start := time.Now()
	release, err := startTracked(cmd, opts.Reaper)
	defer release()
	if err != nil {
		if ctx.Err() != nil { // exec.Start checks ctx too
			return BashResult{ExitCode: -1, Canceled: true}, nil
		}
		return BashResult{}, fmt.Errorf("start %s: %w", shell, err)
	}
	waitErr := group.wait()
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
	if group.killedByCtx() {
		res.TimedOut = errors.Is(context.Cause(runCtx), errTimeout)
		res.Canceled = !res.TimedOut
	}
	res.Output, res.Truncated = out.output()
	return res, nil
}

// startTracked starts cmd, registered with reaper when there is one.
func startTracked(cmd *exec.Cmd, reaper *Reaper) (release func(), err error) {
	if reaper == nil {
		return func() {}, cmd.Start()
	}
	return reaper.start(cmd)
}

// newCommand prepares the shell: its own process group, killed as a whole
// when runCtx is done, both output streams into out.
func newCommand(runCtx context.Context, shell, command string, opts BashOptions, out *tailBuffer) (*exec.Cmd, *procGroup) {
	cmd := exec.CommandContext(runCtx, shell, "-c", command)
	cmd.Dir = opts.Dir
	cmd.Env = opts.Env
	if cmd.Env == nil {
		cmd.Env = SafeEnv()
	}
	// Stdin stays nil: exec connects it to /dev/null, so a command that
	// reads input gets EOF instead of waiting for a terminal that is not there.
	// One writer for both streams makes exec use a single pipe, which keeps
	// stdout and stderr in the order the command wrote them.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = waitDelay
	group := &procGroup{cmd: cmd}
	cmd.Cancel = group.cancel
	return cmd, group
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

// procGroup is the process group of one command; its pgid is the pid of the
// shell, the group leader. The group is only ever signalled while the leader
// is unreaped (running or a zombie): until then the kernel cannot hand that
// pid to another process, so -pgid cannot name someone else's group.
type procGroup struct {
	cmd *exec.Cmd

	mu      sync.Mutex
	reaping bool // the leader is about to be reaped; the group is already dead
	ctxKill bool // cancel sent SIGKILL because the run context was done
}

// cancel is exec.Cmd.Cancel: it runs when the timeout passes or ctx is done.
func (g *procGroup) cancel() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reaping {
		return os.ErrProcessDone
	}
	if err := killGroup(g.cmd.Process.Pid); err != nil {
		return err
	}
	g.ctxKill = true
	return nil
}

// killedByCtx reports whether the group was killed because of the context.
func (g *procGroup) killedByCtx() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctxKill
}

// wait waits for the shell to exit, kills what is left of its group while
// the shell is still a zombie, and only then reaps it. Killing first also
// closes the output pipes that background children held, so Wait returns
// at once instead of after waitDelay.
func (g *procGroup) wait() error {
	pid := g.cmd.Process.Pid
	if err := waitExited(pid); err != nil {
		// Cannot watch without reaping (only if something else reaps our
		// children); fall back to killing after Wait and accept the tiny
		// window in which the pgid could be reused.
		waitErr := g.cmd.Wait()
		_ = killGroup(pid)
		return waitErr
	}
	g.mu.Lock()
	_ = killGroup(pid) // ESRCH cannot happen: the zombie leader is a member
	g.reaping = true
	g.mu.Unlock()
	return g.cmd.Wait()
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

// killGroup sends SIGKILL to every process in group pgid.
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
