package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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

// TestFIFOsNeverBlock plants a FIFO with no writer where each reading tool
// may be pointed: a plain open(2) of it blocks until a writer comes, which
// no context cancels, so each must refuse it at once instead.
func TestFIFOsNeverBlock(t *testing.T) {
	fx := newFSFixture(t)
	fifo := filepath.Join(fx.ws, "AGENTS.md")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"ReadAll", func() error { _, _, err := fx.w.ReadAll("AGENTS.md", 1<<20); return err }},
		{"ReadFile", func() error { _, err := fx.w.ReadFile(ctx, ReadArgs{Path: "AGENTS.md"}); return err }},
		{"EditFile", func() error {
			_, err := fx.w.EditFile(ctx, EditArgs{Path: "AGENTS.md", Old: "a", New: "b"})
			return err
		}},
		{"Grep on the FIFO", func() error { _, err := fx.w.Grep(ctx, GrepArgs{Pattern: "x", Path: "AGENTS.md"}); return err }},
		{"Grep on its directory", func() error { _, err := fx.w.Grep(ctx, GrepArgs{Pattern: "x"}); return err }},
	} {
		done := make(chan error, 1)
		go func() { done <- c.call() }()
		select {
		case err := <-done:
			if c.name != "Grep on its directory" && err == nil {
				t.Errorf("%s of a FIFO succeeded", c.name)
			}
		case <-time.After(10 * time.Second):
			// Give the blocked open a writer so the goroutine ends.
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
			<-done
			t.Errorf("%s blocked on a FIFO", c.name)
		}
	}
}
