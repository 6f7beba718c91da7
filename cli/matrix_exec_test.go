package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/matrix/matrixtest"
)

// TestLatchRunsMatrixAsLatchMatrix: the release binaries, built: with
// [matrix] configured, `latch run` becomes latch-matrix from beside it,
// in the same process (so systemd's pid and the control socket are the
// ones it started), and that process's Matrix gateway latches the owner's
// DM with a code minted by `latch pair matrix`; `latch doctor` checks
// Matrix through latch-matrix too. Without the exec, latch refuses to
// start (TestRunWithoutLatchMatrix) and the doctor's check fails.
func TestLatchRunsMatrixAsLatchMatrix(t *testing.T) {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", dir+string(filepath.Separator),
		"github.com/latchd/latch/cmd/latch", "github.com/latchd/latch/cmd/latch-matrix")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const (
		token = "syt_bGF0Y2g_execsecretvalue_1"
		owner = "@owner:" + matrixtest.Domain
		dm    = "!ownerdm:" + matrixtest.Domain
	)
	srv := matrixtest.New(token)
	defer srv.Close()
	srv.Room(dm, matrixtest.Bot, owner)

	home := filepath.Join(t.TempDir(), "home")
	env := append(os.Environ(), "LATCH_HOME="+home, "LATCH_MATRIX_TOKEN="+token)
	latch := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "latch"), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{{"init"}, {"config", "set", "matrix.homeserver", srv.URL()},
		{"config", "set", "matrix.user_id", matrixtest.Bot}} {
		if out, err := latch(args...); err != nil {
			t.Fatalf("latch %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	var logs bytes.Buffer
	run := exec.Command(filepath.Join(dir, "latch"), "run")
	run.Env, run.Stdout, run.Stderr = env, &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var runErr error
	go func() { runErr = run.Wait(); close(exited) }()
	defer func() {
		run.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			run.Process.Kill()
			<-exited
		}
		if runErr != nil {
			t.Errorf("latch run: %v", runErr)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	}()

	// The process that latch started is latch-matrix now.
	waitExec(t, exited, "latch run to become latch-matrix", func() bool {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(run.Process.Pid) + "/exe")
		return err == nil && exe == filepath.Join(dir, "latch-matrix")
	})
	var code string
	waitExec(t, exited, "a pairing code from the running daemon", func() bool {
		out, err := latch("pair", "matrix")
		if err != nil {
			return false
		}
		m := regexp.MustCompile(`/pair (\S+)`).FindStringSubmatch(out)
		if m != nil {
			code = m[1]
		}
		return m != nil
	})
	srv.Text(owner, dm, "/pair "+code)
	waitExec(t, exited, "the Matrix gateway to latch the owner's DM", func() bool {
		for _, m := range srv.Sent(dm) {
			if strings.HasPrefix(m.Body, "Paired") {
				return true
			}
		}
		return false
	})

	out, _ := latch("doctor", "--json")
	var rep struct {
		Checks []struct{ Name, Status, Detail string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Name == "matrix" {
			found = true
			if !strings.Contains(c.Detail, matrixtest.Bot) {
				t.Errorf("doctor's matrix check did not run latch-matrix's: %s %s", c.Status, c.Detail)
			}
		}
	}
	if !found || strings.Contains(out, token) {
		t.Errorf("doctor: matrix check found %v, token shown %v:\n%s", found, strings.Contains(out, token), out)
	}
}

// waitExec polls ok for up to 30 s, failing if the daemon exits first.
func waitExec(t *testing.T, exited <-chan struct{}, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		select {
		case <-exited:
			t.Fatalf("the daemon exited while waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
