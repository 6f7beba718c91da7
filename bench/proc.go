package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// Linux fixes it at 100 on every architecture Go supports.
const clockTick = 10 * time.Millisecond

// moduleRoot is the directory of the module bench runs in.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("find the module (run bench from the latch repository): %v", err)
	}
	return filepath.Dir(mod), nil
}

// build compiles ./cmd/latch of the module bench runs in into dir, and
// ./cmd/latch-matrix beside it (latch runs it in its place when Matrix is
// configured).
func build(ctx context.Context, dir string) (string, error) {
	// The release build the README gives: static (no cgo, so no libc
	// mapped in), without symbol table and DWARF.
	if _, err := goBuild(ctx, filepath.Join(dir, "latch-matrix"), "./cmd/latch-matrix", "-s -w"); err != nil {
		return "", err
	}
	return goBuild(ctx, filepath.Join(dir, "latch"), "./cmd/latch", "-s -w")
}

// goBuild compiles pkg of the module into bin, statically (no cgo) and
// with ldflags.
func goBuild(ctx context.Context, bin, pkg, ldflags string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ldflags, "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	// An installed binary is clean in the page cache; one just written is
	// dirty until written back, and the kernel gives back no dirty page
	// (the daemon's page-out would keep them during the first run).
	f, err := os.Open(bin)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return bin, f.Sync()
}

// process is one running `latch run`.
type process struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	logPath string
	done    chan struct{} // closed once the process has exited
	err     error         // Wait's result, set before done closes
	once    sync.Once
}

// spawn starts bin with args and env, its output appended to logPath. The
// child gets SIGKILL if bench dies without cleaning up.
func spawn(bin string, args, env []string, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the daemon to stop (SIGTERM, as a service manager would), and
// kills it if it has not within 10 s. It is safe to call more than once.
func (p *process) stop() {
	p.once.Do(func() {
		if p.exited() {
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// failure describes an unexpected state of the daemon with the end of its
// log, which usually says why.
func (p *process) failure(what string) error {
	state := "running"
	if p.exited() {
		state = fmt.Sprintf("exited: %v", p.err)
	}
	return fmt.Errorf("%s (daemon %s)\n--- end of %s ---\n%s", what, state, p.logPath, logTail(p.logPath, 15))
}

func logTail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(len(all)-lines, 0):], "\n")
}

// memory is a process's resident set, in KiB, from /proc/<pid>/status.
type memory struct {
	RSS  int64 `json:"rss_kib"`      // VmRSS
	Anon int64 `json:"rss_anon_kib"` // RssAnon: heap, stacks
	File int64 `json:"rss_file_kib"` // RssFile: binary text and data, the bbolt mmap
	Peak int64 `json:"hwm_kib"`      // VmHWM: the highest VmRSS so far
	// Goroutines and Stacks (bytes) are from latch status, read at idle only.
	Goroutines int64 `json:"goroutines,omitempty"`
	Stacks     int64 `json:"stack_bytes,omitempty"`
}

func readMemory(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	fields := map[string]*int64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File, "VmHWM:": &m.Peak}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && fields[f[0]] != nil {
			*fields[f[0]], _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return m, nil
}

// majorFaults is a process's count of page faults that read from disk
// (majflt, field 12 of /proc/<pid>/stat).
func majorFaults(pid int) (int64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(f[9], 10, 64)
}

// statFields are the fields of /proc/<pid>/stat from field 3 (state) on.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return nil, errors.New("short /proc stat")
	}
	return f, nil
}

// cpuTime is utime+stime of a process (its own threads, not its children).
func cpuTime(pid int) (time.Duration, error) {
	// Field 3 (state) is index 0; utime is field 14.
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+s) * clockTick, nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// fsName names the file system dir is on, since fsync cost dominates
// bbolt's commit and differs by orders of magnitude between them.
func fsName(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	names := map[int64]string{
		0xEF53: "ext4", 0x01021994: "tmpfs", 0x794C7630: "overlayfs",
		0x58465342: "xfs", 0x9123683E: "btrfs", 0x2FC12FC1: "zfs",
	}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// commitFloor times n bbolt-like commits in dir: a 4 KiB page written and
// fdatasynced, then a 4 KiB meta page written and fdatasynced. It returns
// the median, the floor under every latency that waits for a commit.
func commitFloor(dir string, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	var ds []time.Duration
	for i := range n {
		t := time.Now()
		for _, off := range []int64{int64(1+i%8) * 4096, 0} {
			if _, err := f.WriteAt(page, off); err != nil {
				return 0, err
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				return 0, err
			}
		}
		ds = append(ds, time.Since(t))
	}
	return quantile(ds, 0.5), nil
}
