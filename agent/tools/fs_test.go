package tools

import (
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fsFixture is a workspace next to a directory the tools must never reach:
//
//	base/ws/      the workspace
//	base/out/     outside; holds secret ("TOPSECRET-…")
//	base/x        outside; what "../x" names from the workspace
type fsFixture struct {
	t      *testing.T
	w      *Workspace
	base   string
	ws     string
	out    string
	secret string // marker that only files outside the workspace contain
}

func newFSFixture(t *testing.T) *fsFixture {
	t.Helper()
	// EvalSymlinks: on some systems the temp dir sits behind a symlink, and
	// the naive checker in the race test compares resolved paths.
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fx := &fsFixture{
		t:      t,
		base:   base,
		ws:     filepath.Join(base, "ws"),
		out:    filepath.Join(base, "out"),
		secret: "TOPSECRET-" + rand.Text()[:10],
	}
	for _, d := range []string{fx.ws, fx.out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fsMustWrite(t, filepath.Join(fx.out, "secret"), "hello "+fx.secret+"\n")
	fsMustWrite(t, filepath.Join(base, "x"), "x "+fx.secret+"\n")
	w, err := OpenWorkspace(fx.ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close workspace: %v", err)
		}
	})
	fx.w = w
	return fx
}

// file writes a file in the workspace, making parent directories.
func (fx *fsFixture) file(rel, content string) {
	fx.t.Helper()
	p := filepath.Join(fx.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		fx.t.Fatal(err)
	}
	fsMustWrite(fx.t, p, content)
}

// link makes the symlink rel in the workspace pointing to target, verbatim.
func (fx *fsFixture) link(target, rel string) {
	fx.t.Helper()
	p := filepath.Join(fx.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		fx.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		fx.t.Fatal(err)
	}
}

// read returns a workspace file's content, failing the test if it is missing.
func (fx *fsFixture) read(rel string) string {
	fx.t.Helper()
	b, err := os.ReadFile(filepath.Join(fx.ws, rel))
	if err != nil {
		fx.t.Fatal(err)
	}
	return string(b)
}

// outside snapshots everything outside the workspace: each path under base
// except ws, with its content, link target or "dir".
func (fx *fsFixture) outside() map[string]string {
	fx.t.Helper()
	snap, err := snapshotTree(fx.base, fx.ws)
	if err != nil {
		fx.t.Fatal(err)
	}
	return snap
}

func snapshotTree(dir, skip string) (map[string]string, error) {
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return fs.SkipDir
		}
		var v string
		switch {
		case d.IsDir():
			v = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v = "-> " + t
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v = string(b)
		}
		snap[p] = v
		return nil
	})
	return snap, err
}

func fsMustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFSPathsStayInWorkspace feeds every tool hostile paths. Each case
// checks the error kind and, for all cases, that nothing outside the
// workspace changed and that no host path outside it, nor the secret,
// reached the model.
func TestFSPathsStayInWorkspace(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		setup   func(fx *fsFixture)
		run     func(fx *fsFixture) (string, error)
		wantErr error // nil: must succeed
		// hostInput: the path the model sent is itself a host path, which
		// the error may echo back.
		hostInput bool
		check     func(t *testing.T, fx *fsFixture, got string)
	}{
		{
			name:    "read ..",
			run:     fsRead(".."),
			wantErr: ErrEscapes,
		},
		{
			name:    "read ../x",
			run:     fsRead("../x"),
			wantErr: ErrEscapes,
		},
		{
			name:    "read /etc/passwd",
			run:     fsRead("/etc/passwd"),
			wantErr: ErrEscapes,
		},
		{
			name:    "read a/../../x",
			setup:   func(fx *fsFixture) { fx.file("a/keep", "k") },
			run:     fsRead("a/../../x"),
			wantErr: ErrEscapes,
		},
		{
			name:      "read absolute path outside, next to the workspace",
			run:       func(fx *fsFixture) (string, error) { return fx.w.ReadFile(ctx, ReadArgs{Path: fx.out + "/secret"}) },
			wantErr:   ErrEscapes,
			hostInput: true,
		},
		{
			name:  "read absolute path inside the workspace",
			setup: func(fx *fsFixture) { fx.file("in.txt", "inside\n") },
			run:   func(fx *fsFixture) (string, error) { return fx.w.ReadFile(ctx, ReadArgs{Path: fx.ws + "/in.txt"}) },
			check: fsWantContains("inside"),
		},
		{
			name:    "read through relative symlink dir pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out", "outdir") },
			run:     fsRead("outdir/secret"),
			wantErr: ErrEscapes,
		},
		{
			name:    "read through absolute symlink dir pointing out",
			setup:   func(fx *fsFixture) { fx.link(fx.out, "outdir") },
			run:     fsRead("outdir/secret"),
			wantErr: ErrEscapes,
		},
		{
			name:    "read symlink dir pointing out, nested in a real dir",
			setup:   func(fx *fsFixture) { fx.link("../../out", "sub/outdir") },
			run:     fsRead("sub/outdir/secret"),
			wantErr: ErrEscapes,
		},
		{
			name:    "read relative symlink file pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out/secret", "s") },
			run:     fsRead("s"),
			wantErr: ErrEscapes,
		},
		{
			name:    "read absolute symlink file pointing out",
			setup:   func(fx *fsFixture) { fx.link(fx.out+"/secret", "s") },
			run:     fsRead("s"),
			wantErr: ErrEscapes,
		},
		{
			name:    "read chain of symlinks ending outside",
			setup:   func(fx *fsFixture) { fx.link("b", "a"); fx.link("sub/../../out/secret", "b"); fx.file("sub/k", "") },
			run:     fsRead("a"),
			wantErr: ErrEscapes,
		},
		{
			name:  "read symlink pointing inside",
			setup: func(fx *fsFixture) { fx.file("real/t.txt", "inside target\n"); fx.link("real/t.txt", "ln") },
			run:   fsRead("ln"),
			check: fsWantContains("inside target"),
		},
		{
			name:  "read through symlink dir pointing inside",
			setup: func(fx *fsFixture) { fx.file("real/t.txt", "via dir\n"); fx.link("real", "ld") },
			run:   fsRead("ld/t.txt"),
			check: fsWantContains("via dir"),
		},
		{
			name:  "read a/../b stays inside",
			setup: func(fx *fsFixture) { fx.file("b", "bee\n") },
			run:   fsRead("a/../b"),
			check: fsWantContains("bee"),
		},
		{
			name:    "write ../x",
			run:     fsWrite("../x", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name: "write absolute path outside",
			run: func(fx *fsFixture) (string, error) {
				return fx.w.WriteFile(ctx, WriteArgs{Path: fx.out + "/new", Content: "pwned"})
			},
			wantErr:   ErrEscapes,
			hostInput: true,
		},
		{
			name:    "write a/../../x",
			run:     fsWrite("a/../../x", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name:    "write through dangling relative symlink pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out/new", "dangle") },
			run:     fsWrite("dangle", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name:    "write through dangling absolute symlink pointing out",
			setup:   func(fx *fsFixture) { fx.link(fx.out+"/new", "dangle") },
			run:     fsWrite("dangle", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name:    "write through symlink file pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out/secret", "s") },
			run:     fsWrite("s", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name:    "write into symlink dir pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out", "outdir") },
			run:     fsWrite("outdir/new", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name:    "write nested dirs under symlink dir pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out", "outdir") },
			run:     fsWrite("outdir/deep/er/new", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name: "write creating nested dirs",
			run:  fsWrite("a/b/c/new.txt", "nested\n"),
			check: func(t *testing.T, fx *fsFixture, got string) {
				if c := fx.read("a/b/c/new.txt"); c != "nested\n" {
					t.Errorf("a/b/c/new.txt = %q, want %q", c, "nested\n")
				}
			},
		},
		{
			name:  "write through symlink pointing inside updates the target",
			setup: func(fx *fsFixture) { fx.file("real/t.txt", "old\n"); fx.link("real/t.txt", "ln") },
			run:   fsWrite("ln", "new\n"),
			check: func(t *testing.T, fx *fsFixture, got string) {
				if c := fx.read("real/t.txt"); c != "new\n" {
					t.Errorf("real/t.txt = %q, want %q", c, "new\n")
				}
				if fi, err := os.Lstat(filepath.Join(fx.ws, "ln")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
					t.Errorf("ln is no longer a symlink (err %v)", err)
				}
			},
		},
		{
			name:  "write through dangling symlink pointing inside creates the target",
			setup: func(fx *fsFixture) { fx.link("made/here.txt", "ln") },
			run:   fsWrite("ln", "made\n"),
			check: func(t *testing.T, fx *fsFixture, got string) {
				if c := fx.read("made/here.txt"); c != "made\n" {
					t.Errorf("made/here.txt = %q, want %q", c, "made\n")
				}
			},
		},
		{
			name: "write through symlink whose .. follows the link, as the kernel does",
			setup: func(fx *fsFixture) {
				fx.file("p/q/keep", "")
				fx.file("p/t.txt", "old\n")
				fx.link("p/q", "lq")
				fx.link("../t.txt", "lq/ln") // p/q/ln -> p/t.txt
			},
			run: fsWrite("lq/ln", "new\n"),
			check: func(t *testing.T, fx *fsFixture, got string) {
				if c := fx.read("p/t.txt"); c != "new\n" {
					t.Errorf("p/t.txt = %q, want %q", c, "new\n")
				}
				if _, err := os.Lstat(filepath.Join(fx.ws, "t.txt")); err == nil {
					t.Error("wrote t.txt at the top: .. was resolved lexically")
				}
			},
		},
		{
			name:    "edit through symlink file pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out/secret", "s") },
			run:     fsEdit("s", "hello", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name:    "edit through symlink dir pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out", "outdir") },
			run:     fsEdit("outdir/secret", "hello", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name:  "edit through symlink pointing inside edits the target",
			setup: func(fx *fsFixture) { fx.file("real/t.txt", "old\n"); fx.link("real/t.txt", "ln") },
			run:   fsEdit("ln", "old", "new"),
			check: func(t *testing.T, fx *fsFixture, got string) {
				if c := fx.read("real/t.txt"); c != "new\n" {
					t.Errorf("real/t.txt = %q, want %q", c, "new\n")
				}
			},
		},
		{
			name:    "edit ../x",
			run:     fsEdit("../x", "x", "pwned"),
			wantErr: ErrEscapes,
		},
		{
			name:    "ls ../*",
			run:     fsList("../*"),
			wantErr: ErrEscapes,
		},
		{
			name:      "ls absolute pattern outside",
			run:       func(fx *fsFixture) (string, error) { return fx.w.ListFiles(ctx, ListArgs{Pattern: fx.out + "/*"}) },
			wantErr:   ErrEscapes,
			hostInput: true,
		},
		{
			name:    "ls inside symlink dir pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out", "outdir") },
			run:     fsList("outdir/*"),
			wantErr: ErrEscapes,
		},
		{
			name: "ls ** lists symlinks without following them",
			setup: func(fx *fsFixture) {
				fx.link("../out", "outdir")
				fx.link(fx.out+"/secret", "abs")
				fx.file("real/t.txt", "")
				fx.link("real", "ld")
			},
			run: fsList("**"),
			check: func(t *testing.T, fx *fsFixture, got string) {
				want := "abs -> (outside the workspace; not followed)\n" +
					"ld -> real\n" +
					"outdir -> (outside the workspace; not followed)\n" +
					"real/\n" +
					"real/t.txt\n"
				if got != want {
					t.Errorf("ls ** =\n%s\nwant\n%s", got, want)
				}
			},
		},
		{
			name:    "grep in symlink dir pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out", "outdir") },
			run:     fsGrep("TOPSECRET", "outdir", ""),
			wantErr: ErrEscapes,
		},
		{
			name:    "grep symlink file pointing out",
			setup:   func(fx *fsFixture) { fx.link("../out/secret", "s") },
			run:     fsGrep("TOPSECRET", "s", ""),
			wantErr: ErrEscapes,
		},
		{
			name:    "grep ..",
			run:     fsGrep("TOPSECRET", "..", ""),
			wantErr: ErrEscapes,
		},
		{
			name:    "grep glob ../*",
			run:     fsGrep("TOPSECRET", ".", "../*"),
			wantErr: ErrEscapes,
		},
		{
			name: "grep the workspace does not follow symlinks out",
			setup: func(fx *fsFixture) {
				fx.link("../out", "outdir")
				fx.link("../out/secret", "s")
				fx.link(fx.out, "absdir")
				fx.file("in.txt", "hello public\n")
			},
			run: fsGrep("hello", "", ""),
			check: func(t *testing.T, fx *fsFixture, got string) {
				if want := "in.txt:1:hello public\n"; got != want {
					t.Errorf("grep = %q, want %q", got, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFSFixture(t)
			if tt.setup != nil {
				tt.setup(fx)
			}
			before := fx.outside()
			got, err := tt.run(fx)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v (result %q), want %v", err, got, tt.wantErr)
			}
			shown := got
			if err != nil {
				shown = err.Error()
				if got != "" {
					t.Errorf("result %q with error %v; want no result", got, err)
				}
			}
			if strings.Contains(shown, fx.secret) {
				t.Errorf("the secret reached the model: %q", shown)
			}
			if strings.Contains(shown, fx.base) && !strings.Contains(shown, fx.ws) && !tt.hostInput {
				t.Errorf("a host path outside the workspace reached the model: %q", shown)
			}
			if after := fx.outside(); !maps.Equal(before, after) {
				t.Errorf("outside the workspace changed:\nbefore %v\nafter  %v", before, after)
			}
			if tt.check != nil {
				tt.check(t, fx, got)
			}
		})
	}
}

func TestFSEscapeMessage(t *testing.T) {
	fx := newFSFixture(t)
	fx.link("../out/secret", "s")
	_, err := fx.w.ReadFile(context.Background(), ReadArgs{Path: "s"})
	if got, want := err.Error(), "path escapes the workspace: s"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	_, err = fx.w.ReadFile(context.Background(), ReadArgs{Path: "../x"})
	if got, want := err.Error(), "path escapes the workspace: ../x"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	_, err = fx.w.ReadFile(context.Background(), ReadArgs{Path: "nope/x"})
	if got, want := err.Error(), "read nope/x: no such file or directory"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false, want true", err)
	}
}

func TestFSClosedWorkspace(t *testing.T) {
	w, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadFile(context.Background(), ReadArgs{Path: "x"}); err == nil {
		t.Error("ReadFile after Close succeeded, want error")
	}
}

func TestOpenWorkspace(t *testing.T) {
	if _, err := OpenWorkspace(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("OpenWorkspace of a missing dir succeeded, want error")
	}
	dir := t.TempDir()
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", w.Dir(), dir)
	}
}

func fsRead(p string) func(*fsFixture) (string, error) {
	return func(fx *fsFixture) (string, error) {
		return fx.w.ReadFile(context.Background(), ReadArgs{Path: p})
	}
}

func fsWrite(p, content string) func(*fsFixture) (string, error) {
	return func(fx *fsFixture) (string, error) {
		return fx.w.WriteFile(context.Background(), WriteArgs{Path: p, Content: content})
	}
}

func fsEdit(p, old, new string) func(*fsFixture) (string, error) {
	return func(fx *fsFixture) (string, error) {
		return fx.w.EditFile(context.Background(), EditArgs{Path: p, Old: old, New: new})
	}
}

func fsList(pattern string) func(*fsFixture) (string, error) {
	return func(fx *fsFixture) (string, error) {
		return fx.w.ListFiles(context.Background(), ListArgs{Pattern: pattern})
	}
}

func fsGrep(pattern, p, glob string) func(*fsFixture) (string, error) {
	return func(fx *fsFixture) (string, error) {
		return fx.w.Grep(context.Background(), GrepArgs{Pattern: pattern, Path: p, Glob: glob})
	}
}

func fsWantContains(sub string) func(*testing.T, *fsFixture, string) {
	return func(t *testing.T, _ *fsFixture, got string) {
		t.Helper()
		if !strings.Contains(got, sub) {
			t.Errorf("result %q does not contain %q", got, sub)
		}
	}
}
