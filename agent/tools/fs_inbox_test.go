package tools

import (
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
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
	a, err := w.SaveInbox("../../x.txt", 0, write("one"))
	if err != nil || !strings.HasPrefix(a, "inbox/") || !strings.HasSuffix(a, "x.txt") {
		t.Fatalf("first = %q, %v", a, err)
	}
	b, err := w.SaveInbox("x.txt", 0, write("two"))
	if err != nil || a == b {
		t.Fatalf("second = %q, %v (first %q)", b, err, a)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, a)); string(got) != "one" {
		t.Errorf("%s = %q", a, got)
	}
	_, err = w.SaveInbox("bad.bin", 0, func(wr io.Writer) error { io.WriteString(wr, "partial"); return errors.New("cut") })
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
		rel, err := w.SaveInbox("photo.jpg", 0, func(wr io.Writer) error { _, err := io.WriteString(wr, "data"); return err })
		w.Close()
		if err == nil {
			t.Errorf("symlink %q: saved as %s", target, rel)
		}
		if entries, _ := os.ReadDir(out); len(entries) != 0 {
			t.Errorf("symlink %q: %d files landed outside the workspace", target, len(entries))
		}
	}
}

// TestSaveInboxNamesOnlyCompleteFiles: while a download runs, and after a
// crash cut it short, no file in the inbox carries a name the agent or the
// owner could take for the complete file: only a part file, which
// CleanInbox removes at the next start.
func TestSaveInboxNamesOnlyCompleteFiles(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var during []string
	rel, err := w.SaveInbox("report.pdf", 8, func(wr io.Writer) error {
		if _, err := io.WriteString(wr, "half"); err != nil {
			return err
		}
		entries, _ := os.ReadDir(filepath.Join(dir, "inbox"))
		for _, e := range entries {
			during = append(during, e.Name())
		}
		_, err := io.WriteString(wr, "done")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || !strings.HasPrefix(during[0], partPrefix) {
		t.Errorf("mid-download the inbox held %q, want only a part file", during)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, rel)); string(got) != "halfdone" {
		t.Errorf("%s = %q, want the whole file", rel, got)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "inbox")); len(entries) != 1 {
		t.Errorf("the inbox holds %d files after the download, want 1 (no part file left)", len(entries))
	}

	// What a crash mid-download leaves: a part file. Only part files go.
	for _, name := range []string{partPrefix + "0123456789abcdef", "part-kept.txt", ".partial-kept"} {
		if err := os.WriteFile(filepath.Join(dir, "inbox", name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "inbox", partPrefix+"dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := w.CleanInbox(); err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(filepath.Join(dir, "inbox"))
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{partPrefix + "dir", ".partial-kept", path.Base(rel), "part-kept.txt"}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("after CleanInbox the inbox holds %q, want %q", left, want)
	}
}

// TestSaveInboxRoom: the chat cannot fill the inbox past its cap, nor the
// disk past its reserve. A file whose announced size does not fit is
// refused before any byte is fetched; one that outgrows the room (its size
// unknown or understated) is cut off and leaves nothing behind.
func TestSaveInboxRoom(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.LimitInbox(10)
	write := func(s string, called *bool) func(io.Writer) error {
		return func(wr io.Writer) error {
			if called != nil {
				*called = true
			}
			_, err := io.WriteString(wr, s)
			return err
		}
	}
	if _, err := w.SaveInbox("a.txt", 6, write("123456", nil)); err != nil {
		t.Fatal(err)
	}
	var fetched bool
	_, err = w.SaveInbox("b.txt", 5, write("12345", &fetched))
	if !errors.Is(err, ErrInboxFull) || fetched || !strings.Contains(err.Error(), "delete files in inbox/") {
		t.Errorf("announced 5 bytes into 4 left: %v (fetched %t), want ErrInboxFull before the download", err, fetched)
	}
	_, err = w.SaveInbox("c.txt", 0, write("12345", nil))
	if !errors.Is(err, ErrInboxFull) || !strings.Contains(err.Error(), "agent.inbox_max_mb") {
		t.Errorf("5 unannounced bytes into 4 left: %v, want ErrInboxFull", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "inbox")); len(entries) != 1 {
		t.Errorf("the inbox holds %d files, want only the first", len(entries))
	}
	if _, err := w.SaveInbox("d.txt", 4, write("1234", nil)); err != nil {
		t.Errorf("4 bytes into 4 left: %v", err)
	}

	w.LimitInbox(0)
	w.lim.diskReserve = 1 << 62 // more than any disk has free
	_, err = w.SaveInbox("e.txt", 1, write("1", nil))
	if !errors.Is(err, ErrInboxFull) || !strings.Contains(err.Error(), "free on the workspace's disk") {
		t.Errorf("a file past the disk's reserve: %v, want ErrInboxFull naming the disk", err)
	}
}
