package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckHome(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, home string) // home does not exist yet
		wantErr []string                        // $HOME is replaced
		insec   bool                            // want an ErrInsecure
	}{
		{name: "private", setup: mkdir(0o700)},
		{name: "read-only", setup: mkdir(0o500)},
		{name: "group readable", setup: mkdir(0o750), insec: true,
			wantErr: []string{"latch home $HOME is open to other users (mode 0750); fix it with: chmod 700 $HOME"}},
		{name: "world readable", setup: mkdir(0o705), insec: true, wantErr: []string{"mode 0705", "chmod 700 $HOME"}},
		{name: "world searchable", setup: mkdir(0o701), insec: true, wantErr: []string{"mode 0701"}},
		{name: "group writable", setup: mkdir(0o720), insec: true, wantErr: []string{"mode 0720"}},
		{name: "missing", setup: func(*testing.T, string) {}, wantErr: []string{"latch home $HOME", "run latch init"}},
		{name: "file", setup: func(t *testing.T, h string) { writeFile(t, h, "", 0o600) },
			wantErr: []string{"latch home $HOME is not a directory"}},
		{name: "another user's", insec: true, setup: func(t *testing.T, h string) {
			mkdir(0o700)(t, h)
			chownOther(t, h)
		}, wantErr: []string{"$HOME is owned by uid 4242"}},
		{name: "symlink to a private dir", setup: func(t *testing.T, h string) {
			target := filepath.Join(t.TempDir(), "real")
			mkdir(0o700)(t, target)
			if err := os.Symlink(target, h); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink to an open dir", insec: true, setup: func(t *testing.T, h string) {
			target := filepath.Join(t.TempDir(), "real")
			mkdir(0o755)(t, target)
			if err := os.Symlink(target, h); err != nil {
				t.Fatal(err)
			}
		}, wantErr: []string{"mode 0755"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "latch")
			tt.setup(t, home)
			err := CheckHome(home)
			var want []string
			for _, w := range tt.wantErr {
				want = append(want, replaceHome(w, home))
			}
			checkErr(t, err, want)
			if got := errors.Is(err, ErrInsecure); got != tt.insec {
				t.Errorf("errors.Is(%v, ErrInsecure) = %t, want %t", err, got, tt.insec)
			}
		})
	}
}

func TestCheckHomeMissingIsNotExist(t *testing.T) {
	err := CheckHome(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want an fs.ErrNotExist", err)
	}
}

// mkdir returns a setup that creates the directory with exactly mode.
func mkdir(mode os.FileMode) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
	}
}
