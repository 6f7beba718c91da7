package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/config"
)

// No test replaces itself: a test that needs execLinked's exec sets its own.
func init() {
	linking.exec = func(string, []string, []string) error { return errors.New("tests do not exec") }
}

// linkingHome is a $LATCH_HOME whose config enables [matrix] when matrix.
func linkingHome(t *testing.T, matrix bool) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if _, err := config.Init(home); err != nil {
		t.Fatal(err)
	}
	if matrix {
		f, err := os.OpenFile(filepath.Join(home, "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("\n[matrix]\nhomeserver = \"http://127.0.0.1:1\"\nuser_id = \"@latch:example.org\"\naccess_token = \"syt_secret\"\n")
		f.Close()
	}
	return home
}

type execCall struct {
	path      string
	argv, env []string
}

// withLinking points execLinked at home and a latch in dir, recording
// the exec it would make.
func withLinking(t *testing.T, home, dir string) *[]execCall {
	t.Helper()
	was := linking
	t.Cleanup(func() { linking = was })
	var calls []execCall
	linking = linkingDeps{
		getenv: func(k string) string {
			if k == config.EnvHome {
				return home
			}
			return ""
		},
		executable: func() (string, error) { return filepath.Join(dir, "latch"), nil },
		exec: func(path string, argv, env []string) error {
			calls = append(calls, execCall{path, argv, env})
			return errors.New("exec recorded")
		},
		environ: func() []string { return []string{"LATCH_MATRIX_TOKEN=syt_env", "HOME=/root"} },
	}
	return &calls
}

// fakeBinary writes an executable named name into dir.
func fakeBinary(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
}

// TestRunExecsLatchMatrix: with [matrix] configured, `latch run` (this
// build links no Matrix adapter) replaces itself with latch-matrix from
// beside it, with its own arguments and its environment untouched (the
// daemon has not yet taken the secrets out of it).
func TestRunExecsLatchMatrix(t *testing.T) {
	dir := t.TempDir()
	fakeBinary(t, dir, "latch")
	fakeBinary(t, dir, "latch-matrix")
	calls := withLinking(t, linkingHome(t, true), dir)
	var out, errOut bytes.Buffer
	Main([]string{"run", "--log-level", "debug"}, &out, &errOut)
	if len(*calls) != 1 {
		t.Fatalf("exec calls: %v; stderr %s", *calls, errOut.String())
	}
	c := (*calls)[0]
	want := filepath.Join(dir, "latch-matrix")
	if c.path != want || !slices.Equal(c.argv, []string{want, "run", "--log-level", "debug"}) {
		t.Errorf("exec %s %q, want %s run --log-level debug", c.path, c.argv, want)
	}
	if !slices.Contains(c.env, "LATCH_MATRIX_TOKEN=syt_env") {
		t.Errorf("exec env %q lacks the token variable", c.env)
	}
	if !strings.Contains(errOut.String(), "exec recorded") {
		t.Errorf("a failed exec is not reported: %q", errOut.String())
	}
}

// TestRunWithoutLatchMatrix: [matrix] configured and no latch-matrix
// beside latch fails as a configuration error (exit 78) that says how to
// build it; it never runs a daemon that silently leaves Matrix out.
func TestRunWithoutLatchMatrix(t *testing.T) {
	dir := t.TempDir()
	fakeBinary(t, dir, "latch")
	calls := withLinking(t, linkingHome(t, true), dir)
	var out, errOut bytes.Buffer
	code := Main([]string{"run"}, &out, &errOut)
	if code != exitConfig || len(*calls) != 0 {
		t.Fatalf("exit %d, exec calls %v, want %d and none", code, *calls, exitConfig)
	}
	for _, want := range []string{"latch-matrix", "missing", "-o " + dir + " ./cmd/latch-matrix"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr %q lacks %q", errOut.String(), want)
		}
	}
	if strings.Contains(errOut.String(), "syt_secret") {
		t.Error("the token is in the error")
	}
}

// TestNoExecWithoutMatrix: without [matrix] nothing is exec'd (latch runs
// itself), and a latch-matrix that links no adapter is refused rather
// than exec'd into itself for ever.
func TestNoExecWithoutMatrix(t *testing.T) {
	dir := t.TempDir()
	fakeBinary(t, dir, "latch-matrix")
	calls := withLinking(t, linkingHome(t, false), dir)
	if err := execLinked([]string{"run"}); err != nil || len(*calls) != 0 {
		t.Fatalf("err %v, exec calls %v", err, *calls)
	}
	calls = withLinking(t, linkingHome(t, true), dir)
	linking.executable = func() (string, error) { return filepath.Join(dir, "latch-matrix"), nil }
	if err := execLinked([]string{"run"}); err == nil || !strings.Contains(err.Error(), "does not link") || len(*calls) != 0 {
		t.Fatalf("err %v, exec calls %v", err, *calls)
	}
}
