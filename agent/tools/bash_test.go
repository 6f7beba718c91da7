package tools

import (
	"bytes"
	"context"
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
	"testing"
	"time"
	"unicode/utf8"
)

// printPGID makes a command print its process group first. It reads the
// group from /proc instead of trusting $$, so a command that did not get a
// group of its own is caught rather than probed under the wrong id.
const printPGID = "cut -d' ' -f5 /proc/$$/stat\n"

// hangLimit is how long a call that must not hang may take. The commands
// below would run for 60 s if not killed; the margin is for a noisy 2-core CI.
const hangLimit = 20 * time.Second

// helperEnv, when set to a file name, turns the test binary into the
// escaped-child helper (see TestHelperEscapedChild).
const helperEnv = "LATCH_TOOLS_TEST_HELPER"

func runBash(t *testing.T, ctx context.Context, opts BashOptions, command string) BashResult {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	res, err := RunBash(ctx, opts, command)
	if err != nil {
		t.Fatalf("RunBash(%q): %v", command, err)
	}
	return res
}

// startBash runs command in the background; the channel receives its
// result once RunBash returns.
func startBash(t *testing.T, ctx context.Context, opts BashOptions, command string) chan BashResult {
	done := make(chan BashResult, 1)
	go func() {
		res, err := RunBash(ctx, opts, command)
		if err != nil {
			t.Errorf("RunBash: %v", err)
		}
		done <- res
	}()
	return done
}

func TestRunBashOutputAndExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, command, wantOutput string
		wantExit                  int
	}{
		{"echo", "echo hello", "hello\n", 0},
		{"stderr", "echo oops >&2", "oops\n", 0},
		{"arrival order", "echo 1; echo 2 >&2; echo 3", "1\n2\n3\n", 0},
		{"exit code", "echo bye; exit 3", "bye\n", 3},
		{"false", "false", "", 1},
		{"killed by a signal", "kill -9 $$", "", -1},
		{"stdin is /dev/null", "cat; readlink /proc/self/fd/0", "/dev/null\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runBash(t, t.Context(), BashOptions{}, tt.command)
			if res.Output != tt.wantOutput || res.ExitCode != tt.wantExit {
				t.Errorf("got output %q exit %d, want %q exit %d", res.Output, res.ExitCode, tt.wantOutput, tt.wantExit)
			}
			if res.TimedOut || res.Canceled || res.Truncated {
				t.Errorf("got TimedOut=%v Canceled=%v Truncated=%v, want all false", res.TimedOut, res.Canceled, res.Truncated)
			}
		})
	}
}

func TestRunBashWorkingDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := runBash(t, t.Context(), BashOptions{Dir: dir}, "pwd -P")
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(res.Output); got != want {
		t.Errorf("got working directory %q, want %q", got, want)
	}
}

func TestRunBashStartErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := RunBash(t.Context(), BashOptions{Dir: missing}, "true")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("bad dir: got error %v, want one wrapping fs.ErrNotExist", err)
	}

	t.Setenv("PATH", t.TempDir()) // neither bash nor sh
	if _, err := RunBash(t.Context(), BashOptions{}, "true"); err == nil {
		t.Error("no shell on PATH: got nil error, want one")
	}
}

func TestRunBashFallsBackToSh(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("the fallback needs sh on PATH: %v", err)
	}
	bin := t.TempDir()
	if err := os.Symlink(sh, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	res := runBash(t, t.Context(), BashOptions{}, "echo $0")
	if want := filepath.Join(bin, "sh") + "\n"; res.Output != want {
		t.Errorf("got $0 = %q, want %q", res.Output, want)
	}
}

func TestRunBashCanceledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	res := runBash(t, ctx, BashOptions{Dir: dir}, "touch ran")
	if !res.Canceled || res.Summary() != "stopped" {
		t.Errorf("got Canceled=%v summary %q, want true and \"stopped\"", res.Canceled, res.Summary())
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran although ctx was already canceled")
	}
}

func TestRunBashOwnProcessGroup(t *testing.T) {
	t.Parallel()
	res := runBash(t, t.Context(), BashOptions{}, "echo $$\n"+printPGID)
	fields := strings.Fields(res.Output)
	if len(fields) != 2 {
		t.Fatalf("got output %q, want pid and pgid", res.Output)
	}
	if fields[0] != fields[1] {
		t.Errorf("got pid %s in group %s, want the shell to lead its own group", fields[0], fields[1])
	}
	if fields[1] == strconv.Itoa(syscall.Getpgrp()) {
		t.Errorf("the command ran in the test's own process group %s", fields[1])
	}
}

func TestRunBashTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, command string }{
		{"sleep", "sleep 60"},
		{"background jobs", "sleep 60 & sleep 60 & wait"},
		{"subshell", "(sleep 60; echo never)"},
		{"ignores SIGTERM", "trap '' TERM HUP INT; sleep 60 & wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runBash(t, t.Context(), BashOptions{Timeout: time.Second}, printPGID+tt.command)
			if !res.TimedOut || res.Canceled || res.ExitCode != -1 {
				t.Errorf("got TimedOut=%v Canceled=%v exit %d, want true false -1", res.TimedOut, res.Canceled, res.ExitCode)
			}
			if res.Duration >= hangLimit {
				t.Errorf("took %v, want well under %v", res.Duration, hangLimit)
			}
			if got, want := res.Summary(), "killed: timeout after 1s"; got != want {
				t.Errorf("got summary %q, want %q", got, want)
			}
			requireGroupGone(t, parsePGID(t, res.Output))
		})
	}
}

// TestRunBashCancelKillsGroup is the /stop path: the caller cancels ctx
// while the command runs.
func TestRunBashCancelKillsGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pgidFile := filepath.Join(dir, "pgid")
	command := "cut -d' ' -f5 /proc/$$/stat > pgid.tmp && mv pgid.tmp pgid\nsleep 60 & sleep 60 & wait"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := startBash(t, ctx, BashOptions{Dir: dir, Timeout: time.Minute}, command)

	pgid := waitForPID(t, pgidFile, done)
	res := cancelAndWait(t, cancel, done)
	if !res.Canceled || res.TimedOut || res.Summary() != "stopped" {
		t.Errorf("got Canceled=%v TimedOut=%v summary %q, want true false \"stopped\"", res.Canceled, res.TimedOut, res.Summary())
	}
	requireGroupGone(t, pgid)
}

// TestRunBashBackgroundChildrenDie checks that what a command leaves running
// in the background dies with it, and that children holding the output
// pipes do not keep the call waiting.
func TestRunBashBackgroundChildrenDie(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, command string }{
		{"holds stdout", "sleep 60 &"},
		{"subshell holds stdout", "(sleep 60; echo never) &"},
		{"holds stderr only", "sleep 60 >/dev/null &"},
		{"detached from output", "(sleep 60 >/dev/null 2>&1 &)"},
		{"nohup", "nohup sleep 60 >/dev/null 2>&1 &"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runBash(t, t.Context(), BashOptions{}, printPGID+tt.command+"\necho done")
			if res.Duration >= hangLimit {
				t.Errorf("took %v, want well under %v", res.Duration, hangLimit)
			}
			if !strings.HasSuffix(res.Output, "\ndone\n") || res.ExitCode != 0 {
				t.Errorf("got output %q exit %d, want it to end in \"done\" with exit 0", res.Output, res.ExitCode)
			}
			requireGroupGone(t, parsePGID(t, res.Output))
		})
	}
}

// TestRunBashEscapedChildIsKilled covers a program that daemonizes: it
// leaves the shell's session while holding the output pipe, and the shell
// exits without waiting for it. It must die with the command (it carries
// the command's LATCH_JOB tag), and the call must not hang on the pipe.
// Before the tree kill it kept running and only WaitDelay ended the call.
func TestRunBashEscapedChildIsKilled(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "helper.pid")
	t.Cleanup(func() {
		if pid, err := readPID(pidFile); err == nil && liveWithToken(pid, "TestHelperEscapedChild") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// The shell waits for the helper to have left the session before it
	// exits, so the helper has escaped the group for sure when it is killed.
	command := fmt.Sprintf(`%s=%s %s -test.run='^TestHelperEscapedChild$' &
i=0; while [ ! -e %[2]s ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done
echo started`, helperEnv, shellQuote(pidFile), shellQuote(exe))
	res := runBash(t, t.Context(), BashOptions{}, command)
	if res.Duration >= hangLimit {
		t.Errorf("took %v, want well under %v", res.Duration, hangLimit)
	}
	if res.Output != "started\n" {
		t.Errorf("got output %q, want \"started\\n\"", res.Output)
	}
	pid, err := readPID(pidFile)
	if err != nil {
		t.Fatalf("helper did not start: %v", err)
	}
	requireDead(t, []int{pid}, "TestHelperEscapedChild")
}

// TestHelperEscapedChild is not a test. With helperEnv set, the test binary
// plays a program that daemonizes: it leaves the command's session and
// process group with setsid, writes its pid to the file named by helperEnv and lingers,
// still holding the stdout and stderr it inherited.
func TestHelperEscapedChild(t *testing.T) {
	pidFile := os.Getenv(helperEnv)
	if pidFile == "" {
		return
	}
	if _, err := syscall.Setsid(); err != nil {
		os.Exit(2)
	}
	if err := os.WriteFile(pidFile+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		os.Exit(2)
	}
	if err := os.Rename(pidFile+".tmp", pidFile); err != nil {
		os.Exit(2)
	}
	time.Sleep(time.Minute) // linger like a daemon; bounded in case the kill fails
	os.Exit(0)
}

func TestRunBashOutputKeepsTail(t *testing.T) {
	t.Parallel()
	const lines = 20000
	var full strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&full, "%d\n", i)
	}
	full.WriteString("END\n")
	count := fmt.Sprintf("i=1; while [ $i -le %d ]; do echo $i; i=$((i+1)); done; echo END", lines)

	tests := []struct {
		name      string
		maxOutput int
		wantKept  int
	}{
		{"explicit cap", 1000, 1000},
		{"default cap", 0, DefaultMaxOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runBash(t, t.Context(), BashOptions{MaxOutput: tt.maxOutput}, count)
			want := fmt.Sprintf("[… %d bytes cut …]\n%s", full.Len()-tt.wantKept, full.String()[full.Len()-tt.wantKept:])
			if res.Output != want {
				t.Errorf("got %d bytes starting %q, want %d bytes starting %q", len(res.Output), head(res.Output), len(want), head(want))
			}
			if !res.Truncated || !strings.HasSuffix(res.Summary(), " · output truncated") {
				t.Errorf("got Truncated=%v summary %q, want true and a truncation note", res.Truncated, res.Summary())
			}
		})
	}

	t.Run("exactly the cap", func(t *testing.T) {
		t.Parallel()
		res := runBash(t, t.Context(), BashOptions{MaxOutput: 6}, "echo 12345")
		if res.Output != "12345\n" || res.Truncated {
			t.Errorf("got %q Truncated=%v, want \"12345\\n\" false", res.Output, res.Truncated)
		}
	})
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		limit         int
		writes        []string
		want          string
		wantTruncated bool
	}{
		{"fits", 5, []string{"ab", "cd"}, "abcd", false},
		{"exactly full", 4, []string{"ab", "cd"}, "abcd", false},
		{"ring wraps", 5, []string{"abc", "def"}, "[… 1 bytes cut …]\nbcdef", true},
		{"one big write", 5, []string{"abcdefgh"}, "[… 3 bytes cut …]\ndefgh", true},
		{"many small writes", 3, strings.Split("0123456789", ""), "[… 7 bytes cut …]\n789", true},
		{"big write after small", 3, []string{"a", "bcdef", "g"}, "[… 4 bytes cut …]\nefg", true},
		// "aé€" is 1+2+3 bytes; the last 4 start inside é, whose
		// orphaned second byte must go too.
		{"cut inside a rune", 4, []string{"aé€"}, "[… 3 bytes cut …]\n€", true},
		{"cut at a rune start", 3, []string{"aé€"}, "[… 3 bytes cut …]\n€", true},
		{"rune split across writes", 4, []string{"x€", "\xe2", "\x82\xac"}, "[… 4 bytes cut …]\n€", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newTailBuffer(tt.limit)
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			got, truncated := b.output()
			if got != tt.want || truncated != tt.wantTruncated {
				t.Errorf("got %q truncated=%v, want %q truncated=%v", got, truncated, tt.want, tt.wantTruncated)
			}
			if !utf8.ValidString(got) {
				t.Errorf("got invalid UTF-8 %q", got)
			}
		})
	}
}

func TestTailBufferBoundedMemory(t *testing.T) {
	t.Parallel()
	const limit = 1 << 10
	b := newTailBuffer(limit)
	chunks := [][]byte{bytes.Repeat([]byte("x"), 100), bytes.Repeat([]byte("y"), 4<<10)}
	for i := range 2000 { // about 4 MiB
		if _, err := b.Write(chunks[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.buf) != limit || cap(b.buf) > 2*limit {
		t.Errorf("got buffer len %d cap %d, want len %d and cap at most %d", len(b.buf), cap(b.buf), limit, 2*limit)
	}
}

func TestTailBufferConcurrentWrites(t *testing.T) {
	t.Parallel()
	const writers, writes, limit = 8, 1000, 100
	b := newTailBuffer(limit)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range writes {
				_, _ = b.Write([]byte("0123456789"))
			}
		})
	}
	wg.Wait()
	got, _ := b.output()
	want := fmt.Sprintf("[… %d bytes cut …]\n%s", writers*writes*10-limit, strings.Repeat("0123456789", limit/10))
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRunBashDoesNotLeakSecrets runs `env` with the default environment:
// latch's credentials must not reach the command.
func TestRunBashDoesNotLeakSecrets(t *testing.T) {
	secrets := []string{
		"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY",
		"LATCH_TELEGRAM_TOKEN", "LATCH_DISCORD_TOKEN", "LATCH_WEBHOOK_SECRET",
	}
	for i, name := range secrets {
		t.Setenv(name, fmt.Sprintf("s3cr3t-%d-value", i))
	}
	t.Setenv("LATCH_TOOLS_TEST_PLAIN", "visible")

	res := runBash(t, t.Context(), BashOptions{}, "env")
	for i, name := range secrets {
		if strings.Contains(res.Output, name+"=") || strings.Contains(res.Output, fmt.Sprintf("s3cr3t-%d-value", i)) {
			t.Errorf("%s reached the command", name)
		}
	}
	for _, want := range []string{"LATCH_TOOLS_TEST_PLAIN=visible\n", "LATCH_RUN=1\n"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("env output lacks %q", want)
		}
	}
}

func TestBashResultSummary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  BashResult
		want string
	}{
		{"exit 0", BashResult{Duration: 12 * time.Millisecond}, "exit 0 · 12ms"},
		{"sub-millisecond", BashResult{Duration: 850 * time.Microsecond}, "exit 0 · 850µs"},
		{"exit 2", BashResult{ExitCode: 2, Duration: 1234 * time.Millisecond}, "exit 2 · 1.2s"},
		{"timeout", BashResult{ExitCode: -1, TimedOut: true, Duration: 1003 * time.Millisecond, timeout: time.Second}, "killed: timeout after 1s"},
		{"stopped", BashResult{ExitCode: -1, Canceled: true, Duration: 3 * time.Second}, "stopped"},
		{"signal", BashResult{ExitCode: -1, signal: syscall.SIGSEGV, Duration: 5 * time.Millisecond}, "killed by SIGSEGV · 5ms"},
		{"truncated", BashResult{Truncated: true, Duration: 3 * time.Millisecond}, "exit 0 · 3ms · output truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.res.Summary(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("real signal", func(t *testing.T) {
		t.Parallel()
		res := runBash(t, t.Context(), BashOptions{}, "kill -9 $$")
		if got := res.Summary(); !strings.HasPrefix(got, "killed by SIGKILL · ") {
			t.Errorf("got %q, want \"killed by SIGKILL · …\"", got)
		}
	})
}

// parsePGID reads the process group a command printed with printPGID.
func parsePGID(t *testing.T, output string) int {
	t.Helper()
	line, _, _ := strings.Cut(output, "\n")
	pgid, err := strconv.Atoi(line)
	if err != nil || pgid <= 1 {
		t.Fatalf("no process group at the start of %q", head(output))
	}
	if pgid == syscall.Getpgrp() {
		t.Fatalf("the command ran in the test's own process group %d", pgid)
	}
	return pgid
}

// requireGroupGone polls until no live process is left in group pgid.
func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		alive, err := groupMembers(pgid)
		if err != nil {
			t.Fatalf("probe process group %d: %v", pgid, err)
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has live members: %v", pgid, alive)
		}
		<-tick.C
	}
}

// groupMembers lists the live processes of group pgid. kill(-pgid, 0)
// answers ESRCH once the group is empty, but killed processes whose parent
// died stay zombies until init reaps them, and some container inits never
// do; a zombie is dead, so /proc decides when kill still finds someone.
func groupMembers(pgid int) ([]string, error) {
	err := syscall.Kill(-pgid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return liveMembers(pgid)
}

// liveMembers scans /proc for processes of group pgid that are not zombies.
func liveMembers(pgid int) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var alive []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited since ReadDir
		}
		// "pid (comm) state ppid pgrp ...", where comm may hold anything.
		end := bytes.LastIndexByte(stat, ')')
		fields := strings.Fields(string(stat[end+1:]))
		if len(fields) < 3 || fields[2] != strconv.Itoa(pgid) || fields[0] == "Z" {
			continue
		}
		alive = append(alive, e.Name()+" "+string(stat[:end+1])+" "+fields[0])
	}
	return alive, nil
}

// waitForPID polls for a pid file a command writes, failing early if the
// command finishes without writing it.
func waitForPID(t *testing.T, path string, done <-chan BashResult) int {
	t.Helper()
	deadline := time.After(hangLimit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if pid, err := readPID(path); err == nil {
			return pid
		}
		select {
		case res := <-done:
			t.Fatalf("command ended before writing %s: %+v", path, res)
		case <-deadline:
			t.Fatalf("no %s after %v", path, hangLimit)
		case <-tick.C:
		}
	}
}

func readPID(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func head(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}

// BenchmarkRunBashTrue is the fixed cost of a command: fork and exec of
// bash, and at its end the walk of /proc that kills whatever it left.
func BenchmarkRunBashTrue(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := RunBash(context.Background(), BashOptions{Dir: dir, Timeout: 10 * time.Second}, "true"); err != nil {
			b.Fatal(err)
		}
	}
}

// cancelAndWait cancels a running RunBash and returns its result, failing
// the test if it has not returned within hangLimit.
func cancelAndWait(t *testing.T, cancel context.CancelFunc, done <-chan BashResult) BashResult {
	t.Helper()
	cancel()
	select {
	case res := <-done:
		return res
	case <-time.After(hangLimit):
		t.Fatalf("RunBash still running %v after cancel", hangLimit)
		return BashResult{}
	}
}
