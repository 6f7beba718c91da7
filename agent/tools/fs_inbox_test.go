package tools

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSanitizeName(t *testing.T) {
	tests := map[string]string{
		"report.pdf":                      "report.pdf",
		"../../etc/passwd":                "passwd",
		"..\\..\\win.ini":                 "win.ini",
		".bashrc":                         "bashrc",
		"":                                "file",
		"..":                              "file",
		"my photo (1).JPG":                "my_photo__1_.JPG",
		"résumé.docx":                     "résumé.docx",
		strings.Repeat("a", 200) + ".txt": strings.Repeat("a", 76) + ".txt",
		// Names in other scripts keep their name and extension.
		"отчёт.pdf":                      "отчёт.pdf",
		"写真.jpg":                         "写真.jpg",
		"été 2024.xlsx":                  "été_2024.xlsx",
		"★★.pdf":                         "file.pdf",
		"..pdf":                          "file.pdf",
		".hidden.tar":                    "hidden.tar",
		"a.\u202etxt.exe":                "a._txt.exe",
		"invalid\xff.txt":                "invalid_.txt",
		"x." + strings.Repeat("e", 20):   "x." + strings.Repeat("e", 20), // too long for an extension
		strings.Repeat("я", 60) + ".txt": strings.Repeat("я", 38) + ".txt",
	}
	for in, want := range tests {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSaveInbox(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write := func(s string) func(io.Writer) error {
		return func(wr io.Writer) error { _, err := io.WriteString(wr, s); return err }
	}
	a, err := w.SaveInbox("../../x.txt", write("one"))
	if err != nil || !strings.HasPrefix(a, "inbox/") || !strings.HasSuffix(a, "x.txt") {
		t.Fatalf("first = %q, %v", a, err)
	}
	b, err := w.SaveInbox("x.txt", write("two"))
	if err != nil || a == b {
		t.Fatalf("second = %q, %v (first %q)", b, err, a)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, a)); string(got) != "one" {
		t.Errorf("%s = %q", a, got)
	}
	_, err = w.SaveInbox("bad.bin", func(wr io.Writer) error { io.WriteString(wr, "partial"); return errors.New("cut") })
	if err == nil {
		t.Fatal("failed fill reported success")
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "inbox"))
	if len(entries) != 2 {
		t.Errorf("inbox holds %d files; the partial one must be removed", len(entries))
	}
}

// TestSaveInboxRefusesSymlinkedInbox: the inbox is reached through the
// workspace root, so an inbox/ that is a symlink out of the workspace
// (relative or absolute) is refused and nothing lands outside.
func TestSaveInboxRefusesSymlinkedInbox(t *testing.T) {
	for _, absolute := range []bool{false, true} {
		base := t.TempDir()
		ws, out := filepath.Join(base, "ws"), filepath.Join(base, "out")
		os.MkdirAll(ws, 0o700)
		os.MkdirAll(out, 0o700)
		target := "../out"
		if absolute {
			target = out
		}
		if err := os.Symlink(target, filepath.Join(ws, InboxDir)); err != nil {
			t.Fatal(err)
		}
		w, err := OpenWorkspace(ws)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := w.SaveInbox("photo.jpg", func(wr io.Writer) error { _, err := io.WriteString(wr, "data"); return err })
		w.Close()
		if err == nil {
			t.Errorf("symlink %q: saved as %s", target, rel)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("symlink %q: %d files landed outside the workspace", target, len(entries))
		}
	}
}
