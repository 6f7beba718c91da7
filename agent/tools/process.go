package tools

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// ProcessOptions configures one StartProcess call.
type ProcessOptions struct {
	Dir string   // working directory (the workspace)
	Env []string // the whole environment, used as given; LATCH_JOB is added
	// Stderr receives the process's standard error; nil discards it.
	Stderr io.Writer
	// Reaper and Cgroups as for RunBash: the process is tracked by the
	// daemon's reaper and, where latch has cgroups, starts in one of its
	// own.
	Reaper  *Reaper
	Cgroups *Cgroups
	// ExtraFiles are passed on as descriptors 3, 4, … (exec.Cmd's).
	ExtraFiles []*os.File
}

// Process is a long-running child latch owns, such as an MCP server: it is
// started as RunBash starts a command (a session and process group of its
// own, a LATCH_JOB tag, its own cgroup where latch has them, tracked by the
// reaper) and it ends the way a command ends: when it exits, or when Kill
// is called, every process it started is killed with it, also those that
// left its session (a wrapper such as npx or uvx and the real server it
// runs, a double fork). It talks over its standard input and output.
type Process struct {
	j      *job
	stdin  *os.File
	stdout *os.File
	done   chan struct{}
	err    error // how the leader ended; set before done closes

	killOnce sync.Once
}

// StartProcess starts path with args (args[0] is not the program name) and
// returns it running. The caller reads Stdout and writes Stdin, and must
// call Kill once it no longer needs it.
func StartProcess(opts ProcessOptions, path string, args ...string) (*Process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	group, err := opts.Cgroups.newGroup()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = opts.Dir
	tag := newJobTag()
	cmd.Env = withJobTag(opts.Env, tag)
	// Files, not io.Readers: exec hands them to the child and copies
	// nothing, so the pipes stay open however the child ends and only the
	// caller's reads and writes touch them.
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.Stderr = opts.Stderr
	cmd.ExtraFiles = opts.ExtraFiles
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if group != nil {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, group.fd
	}
	cmd.WaitDelay = waitDelay
	j := &job{cmd: cmd, tag: tag, reaper: opts.Reaper, group: group, server: true}
	release, err := j.start()
	inR.Close()
	outW.Close()
	if err != nil {
		release()
		group.remove()
		closeAll(inW, outR)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &Process{j: j, stdin: inW, stdout: outR, done: make(chan struct{})}
	go func() {
		p.err = j.wait()
		release()
		group.remove()
		close(p.done)
	}()
	return p, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Stdin is the process's standard input.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Stdout is the process's standard output.
func (p *Process) Stdout() io.ReadCloser { return p.stdout }

// Pid is the leader's process id.
func (p *Process) Pid() int { return p.j.cmd.Process.Pid }

// Done is closed once the leader has exited and every process it started
// has been killed.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err says how the leader ended, once Done is closed: nil for exit 0.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return errors.New("still running")
	}
}

// Kill kills the process with every process it started, waits until they
// are gone and closes the pipes. It may be called more than once.
func (p *Process) Kill() {
	p.killOnce.Do(func() {
		p.j.cancel()
		<-p.done
		p.stdin.Close()
		p.stdout.Close()
	})
	<-p.done
}
