package config

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadSecret(t *testing.T) {
	key := strings.Repeat("k", 32)
	tests := []struct {
		name    string
		setup   func(t *testing.T, path string)
		wantErr []string // $HOME is replaced
		insec   bool
	}{
		{name: "private", setup: file(key, 0o600)},
		{name: "read-only", setup: file(key, 0o400)},
		{name: "missing", setup: func(*testing.T, string) {},
			wantErr: []string{"secret $HOME/secret", "run latch init"}},
		{name: "short", setup: file(key[1:], 0o600),
			wantErr: []string{"secret $HOME/secret holds 31 bytes, want 32"}},
		{name: "long", setup: file(key+"\n", 0o600),
			wantErr: []string{"holds 33 bytes, want 32"}},
		{name: "empty", setup: file("", 0o600), wantErr: []string{"holds 0 bytes"}},
		{name: "huge", setup: file(strings.Repeat(key, 100), 0o600), wantErr: []string{"larger than"}},
		{name: "group readable", setup: file(key, 0o640), insec: true,
			wantErr: []string{"secret $HOME/secret is open to other users (mode 0640); fix it with: chmod 600 $HOME/secret"}},
		{name: "world readable", setup: file(key, 0o604), insec: true, wantErr: []string{"mode 0604"}},
		{name: "group executable", setup: file(key, 0o610), insec: true, wantErr: []string{"mode 0610"}},
		{name: "another user's", insec: true, setup: func(t *testing.T, p string) {
			file(key, 0o600)(t, p)
			chownOther(t, p)
		}, wantErr: []string{"$HOME/secret is owned by uid 4242"}},
		{name: "directory", setup: func(t *testing.T, p string) { mkdir(0o700)(t, p) },
			wantErr: []string{"$HOME/secret is not a regular file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := newHome(t)
			tt.setup(t, filepath.Join(home, "secret"))
			got, err := LoadSecret(home)
			var want []string
			for _, w := range tt.wantErr {
				want = append(want, replaceHome(w, home))
			}
			checkErr(t, err, want)
			if gotInsec := errors.Is(err, ErrInsecure); gotInsec != tt.insec {
				t.Errorf("errors.Is(%v, ErrInsecure) = %t, want %t", err, gotInsec, tt.insec)
			}
			if err == nil && !bytes.Equal(got, []byte(key)) {
				t.Errorf("LoadSecret = %q, want %q", got, key)
			}
			if err != nil && strings.Contains(err.Error(), "kkkkkkkk") {
				t.Errorf("error %q contains the key", err)
			}
		})
	}
}

func TestLoadSecretMissingIsNotExist(t *testing.T) {
	_, err := LoadSecret(newHome(t))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want an fs.ErrNotExist", err)
	}
}

// file returns a setup that writes content with exactly mode.
func file(content string, mode os.FileMode) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		t.Helper()
		writeFile(t, path, content, mode)
	}
}

func replaceHome(s, home string) string { return strings.ReplaceAll(s, "$HOME", home) }
