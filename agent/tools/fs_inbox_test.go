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
		"résumé.docx":                     "r_sum_.docx",
		strings.Repeat("a", 200) + ".txt": strings.Repeat("a", 76) + ".txt",
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
