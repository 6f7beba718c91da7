package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestWriteFile(t *testing.T) {
	ctx := context.Background()
	fx := newFSFixture(t)

	got, err := fx.w.WriteFile(ctx, WriteArgs{Path: "a/b/new.txt", Content: "one\ntwo\n"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "created a/b/new.txt (2 lines, 8 bytes)"; got != want {
		t.Errorf("result = %q, want %q", got, want)
	}
	if mode := fsMode(t, fx, "a/b/new.txt"); mode != 0o644 {
		t.Errorf("new file mode = %v, want 0644", mode)
	}

	fx.file("script.sh", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(fx.ws, "script.sh"), 0o750|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	got, err = fx.w.WriteFile(ctx, WriteArgs{Path: "script.sh", Content: "#!/bin/sh\necho hi\n"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "updated script.sh (2 lines, 18 bytes)"; got != want {
		t.Errorf("result = %q, want %q", got, want)
	}
	if mode := fsMode(t, fx, "script.sh"); mode != 0o750 {
		t.Errorf("rewritten file mode = %v, want 0750 (permissions kept, setuid dropped)", mode)
	}
	if c := fx.read("script.sh"); c != "#!/bin/sh\necho hi\n" {
		t.Errorf("content = %q", c)
	}

	if _, err := fx.w.WriteFile(ctx, WriteArgs{Path: "a", Content: "x"}); err == nil || err.Error() != "write a: is a directory" {
		t.Errorf("write over a directory: err = %v", err)
	}
	if _, err := fx.w.WriteFile(ctx, WriteArgs{Path: "script.sh/x", Content: "x"}); err == nil {
		t.Error("write below a file succeeded, want error")
	}
	if _, err := fx.w.WriteFile(ctx, WriteArgs{Path: "", Content: "x"}); err == nil {
		t.Error("write to an empty path succeeded, want error")
	}
	fsNoTempFiles(t, fx)
}

func TestWriteFileRefusesSymlinkLoop(t *testing.T) {
	fx := newFSFixture(t)
	fx.link("b", "a")
	fx.link("a", "b")
	_, err := fx.w.WriteFile(context.Background(), WriteArgs{Path: "a", Content: "x"})
	if err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("err = %v, want a symlink loop error", err)
	}
}

func TestWriteFileConcurrent(t *testing.T) {
	fx := newFSFixture(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				p := fmt.Sprintf("d%d/f", i%2) // two goroutines per file, four MkdirAll races
				if _, err := fx.w.WriteFile(context.Background(), WriteArgs{Path: p, Content: fmt.Sprint(i, j)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	fsNoTempFiles(t, fx)
}

func TestEditFile(t *testing.T) {
	const src = "package main\n\nfunc a() {}\n\nfunc b() {}\n"
	tests := []struct {
		name    string
		args    EditArgs
		want    string // result
		wantSrc string // file afterwards; "" = unchanged
		wantErr string
	}{
		{
			name:    "one match",
			args:    EditArgs{Old: "func b() {}", New: "func b() {\n\treturn\n}"},
			want:    "edited f: replaced 1 line at line 5 with 3 lines",
			wantSrc: "package main\n\nfunc a() {}\n\nfunc b() {\n\treturn\n}\n",
		},
		{
			name:    "multi-line old",
			args:    EditArgs{Old: "func a() {}\n\nfunc b() {}\n", New: "func c() {}\n"},
			want:    "edited f: replaced 3 lines at line 3 with 1 line",
			wantSrc: "package main\n\nfunc c() {}\n",
		},
		{
			name:    "removal",
			args:    EditArgs{Old: "\nfunc b() {}\n"},
			want:    "edited f: removed 2 lines at line 4",
			wantSrc: "package main\n\nfunc a() {}\n",
		},
		{
			name:    "zero matches",
			args:    EditArgs{Old: "func z() {}", New: "x"},
			wantErr: "edit f: old text not found (0 matches)",
		},
		{
			name:    "two matches",
			args:    EditArgs{Old: "() {}", New: "() { return }"},
			wantErr: "edit f: old text matches 2 times",
		},
		{
			name:    "overlapping matches count",
			args:    EditArgs{Old: "\n\n", New: "\n"},
			wantErr: "edit f: old text matches 2 times",
		},
		{
			name:    "empty old",
			args:    EditArgs{New: "x"},
			wantErr: "edit f: old is empty",
		},
		{
			name:    "old equals new",
			args:    EditArgs{Old: "main", New: "main"},
			wantErr: "edit f: old and new are the same",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFSFixture(t)
			fx.file("f", src)
			if err := os.Chmod(filepath.Join(fx.ws, "f"), 0o600); err != nil {
				t.Fatal(err)
			}
			tt.args.Path = "f"
			got, err := fx.w.EditFile(context.Background(), tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want prefix %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("result = %q, want %q", got, tt.want)
			}
			wantSrc := tt.wantSrc
			if wantSrc == "" {
				wantSrc = src
			}
			if c := fx.read("f"); c != wantSrc {
				t.Errorf("file =\n%q\nwant\n%q", c, wantSrc)
			}
			if mode := fsMode(t, fx, "f"); mode != 0o600 {
				t.Errorf("mode = %v, want 0600 kept", mode)
			}
			fsNoTempFiles(t, fx)
		})
	}
}

func TestEditFileRefuses(t *testing.T) {
	ctx := context.Background()
	fx := newFSFixture(t)
	fx.file("bin", "a\x00b")
	fx.file("big", strings.Repeat("x", 101))
	fx.file("dir/x", "")
	fx.w.lim.editFile = 100
	tests := []struct {
		path    string
		wantErr string
	}{
		{"bin", "edit bin: file looks binary (it contains NUL bytes); not edited"},
		{"big", "edit big: file is 101 bytes, over the 100 bytes edit limit"},
		{"dir", "edit dir: is a directory"},
		{"missing", "edit missing: no such file or directory"},
	}
	for _, tt := range tests {
		_, err := fx.w.EditFile(ctx, EditArgs{Path: tt.path, Old: "a", New: "b"})
		if err == nil || err.Error() != tt.wantErr {
			t.Errorf("edit %s: err = %v, want %q", tt.path, err, tt.wantErr)
		}
	}
	if _, err := fx.w.EditFile(ctx, EditArgs{Path: "missing", Old: "a", New: "b"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("edit missing: errors.Is(%v, fs.ErrNotExist) = false", err)
	}
}

func TestIndexOnce(t *testing.T) {
	tests := []struct {
		s, sub   string
		first, n int
	}{
		{"abc", "x", -1, 0},
		{"abc", "b", 1, 1},
		{"abab", "ab", 0, 2},
		{"aaa", "aa", 0, 2},
		{"aaaa", "a", 0, 4},
		{strings.Repeat("a", maxEditCount-1), "a", 0, maxEditCount - 1},
		{strings.Repeat("a", maxEditCount), "a", 0, maxEditCount},
		{strings.Repeat("a", 10*maxEditCount), "a", 0, maxEditCount}, // counting stops
		{"x" + strings.Repeat("a", 1<<20), strings.Repeat("a", 4<<10), 1, maxEditCount},
	}
	for _, tt := range tests {
		first, n := indexOnce(tt.s, tt.sub)
		if first != tt.first || n != tt.n {
			t.Errorf("indexOnce(%.40q, %.40q) = %d, %d; want %d, %d", tt.s, tt.sub, first, n, tt.first, tt.n)
		}
	}
}

func fsMode(t *testing.T, fx *fsFixture, rel string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(fx.ws, rel))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// fsNoTempFiles fails if a write left a temporary file behind.
func fsNoTempFiles(t *testing.T, fx *fsFixture) {
	t.Helper()
	err := filepath.WalkDir(fx.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriteFileNewFileHonoursUmask: a new file's mode is set by fchmod,
// which ignores the umask, so the write must apply it itself: under umask
// 077 a file the owner dictated (a .env, a key) is not world-readable. Not
// parallel: the umask is the process's.
func TestWriteFileNewFileHonoursUmask(t *testing.T) {
	fx := newFSFixture(t)
	for _, c := range []struct {
		umask int
		want  fs.FileMode
	}{{0o077, 0o600}, {0o022, 0o644}, {0o027, 0o640}} {
		old := syscall.Umask(c.umask)
		name := fmt.Sprintf("new-%03o.env", c.umask)
		_, err := fx.w.WriteFile(context.Background(), WriteArgs{Path: name, Content: "KEY=1\n"})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(fx.ws, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.want {
			t.Errorf("umask %03o: new file is %v, want %v", c.umask, got, c.want)
		}
	}
}

// TestEditFileManyOverlappingMatches: an Old text that overlaps itself all
// through a large file is reported as matching 100+ times. Counting every
// overlapping match took time proportional to the file size times the
// length of Old (the audit's 4 MiB file and 32 KiB Old took 5 s), without
// a look at ctx.
func TestEditFileManyOverlappingMatches(t *testing.T) {
	fx := newFSFixture(t)
	src := strings.Repeat("a", 1<<20-1) + "\n"
	fx.file("a.txt", src)
	_, err := fx.w.EditFile(context.Background(), EditArgs{Path: "a.txt", Old: strings.Repeat("a", 8<<10), New: "b"})
	want := "edit a.txt: old text matches 100+ times; include more of the surrounding text so it matches exactly once"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if fx.read("a.txt") != src {
		t.Error("the file changed")
	}
}
