package tools

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestReadAllStaysInside(t *testing.T) {
	dir := t.TempDir()
	ws, out := filepath.Join(dir, "ws"), filepath.Join(dir, "out")
	os.MkdirAll(ws, 0o700)
	os.MkdirAll(out, 0o700)
	os.WriteFile(filepath.Join(ws, "report.txt"), []byte("hello"), 0o600)
	os.WriteFile(filepath.Join(out, "secret"), []byte("s3cret"), 0o600)
	os.Symlink(filepath.Join(out, "secret"), filepath.Join(ws, "link"))
	w, err := OpenWorkspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	name, data, err := w.ReadAll("report.txt", 100)
	if err != nil || name != "report.txt" || string(data) != "hello" {
		t.Errorf("ReadAll = %q %q %v", name, data, err)
	}
	for _, p := range []string{"../out/secret", filepath.Join(out, "secret"), "link"} {
		if _, data, err := w.ReadAll(p, 100); !errors.Is(err, ErrEscapes) || data != nil {
			t.Errorf("ReadAll(%q) = %q, %v; want ErrEscapes", p, data, err)
		}
	}
	if _, _, err := w.ReadAll("report.txt", 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if _, _, err := w.ReadAll(".", 100); err == nil {
		t.Error("ReadAll of a directory succeeded")
	}
}
