package tools

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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
	kept := []string{"part-kept.txt", ".partial-kept", partPrefix + "notes", partPrefix + "0123456789ABCDEF", partPrefix + "0123456789abcde", partPrefix + "0123456789abcdef0"}
	for _, name := range append([]string{partPrefix + "0123456789abcdef"}, kept...) {
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
	want := append([]string{partPrefix + "dir", path.Base(rel)}, kept...)
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
	const block = minFileBytes // files count by whole blocks
	w.LimitInbox(3 * block)
	var fetched bool
	write := func(n int) func(io.Writer) error {
		return func(wr io.Writer) error {
			fetched = true
			_, err := wr.Write(make([]byte, n))
			return err
		}
	}
	if _, err := w.SaveInbox("a.txt", 2*block, write(2*block)); err != nil {
		t.Fatal(err)
	}
	fetched = false
	_, err = w.SaveInbox("b.txt", block+1, write(block+1))
	if !errors.Is(err, ErrInboxFull) || fetched || !strings.Contains(err.Error(), "delete files in inbox/") {
		t.Errorf("announced a block and a byte into a block left: %v (fetched %t), want ErrInboxFull before the download", err, fetched)
	}
	_, err = w.SaveInbox("c.txt", 0, write(block+1))
	if !errors.Is(err, ErrInboxFull) || !strings.Contains(err.Error(), "agent.inbox_max_mb") {
		t.Errorf("a block and a byte unannounced into a block left: %v, want ErrInboxFull", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "inbox")); len(entries) != 1 {
		t.Errorf("the inbox holds %d files, want only the first", len(entries))
	}
	if _, err := w.SaveInbox("d.txt", block, write(block)); err != nil {
		t.Errorf("a block into a block left: %v", err)
	}

	w.LimitInbox(0)
	w.lim.diskReserve = 1 << 62 // more than any disk has free
	_, err = w.SaveInbox("e.txt", 1, write(1))
	if !errors.Is(err, ErrInboxFull) || !strings.Contains(err.Error(), "free on the workspace's disk") {
		t.Errorf("a file past the disk's reserve: %v, want ErrInboxFull naming the disk", err)
	}
}

// TestInboxCountsAllocatedSize: the cap counts what the inbox's files take
// on disk, at least a block each: thousands of empty files are not free,
// and a sparse file counts for its blocks, not its apparent size.
func TestInboxCountsAllocatedSize(t *testing.T) {
	tests := []struct {
		name  string
		inbox func(dir string) error
		fits  bool
	}{
		{"16 empty files fill 16 blocks", func(dir string) error {
			for i := range 16 {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("empty-%d", i)), nil, 0o600); err != nil {
					return err
				}
			}
			return nil
		}, false},
		{"a sparse GiB takes a block", func(dir string) error {
			f, err := os.Create(filepath.Join(dir, "sparse"))
			if err != nil {
				return err
			}
			return errors.Join(f.Truncate(1<<30), f.Close())
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, InboxDir), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tt.inbox(filepath.Join(dir, InboxDir)); err != nil {
				t.Fatal(err)
			}
			w, err := OpenWorkspace(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			w.LimitInbox(16 * minFileBytes)
			_, err = w.SaveInbox("x.txt", 1, func(wr io.Writer) error { _, err := io.WriteString(wr, "x"); return err })
			if fits := err == nil; fits != tt.fits {
				t.Errorf("a 1-byte file into a 16-block cap: err = %v, want fits %t", err, tt.fits)
			}
		})
	}
}

// TestSaveInboxConcurrentDownloadsShareTheRoom: two downloads running at
// once together stay within the cap, whether their sizes were announced
// (the second is refused before it is fetched) or not (the one that
// overflows the room is cut off).
func TestSaveInboxConcurrentDownloadsShareTheRoom(t *testing.T) {
	const block = minFileBytes
	for _, announced := range []bool{true, false} {
		t.Run(fmt.Sprintf("announced=%t", announced), func(t *testing.T) {
			dir := t.TempDir()
			w, err := OpenWorkspace(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			w.LimitInbox(4 * block)
			size := int64(0)
			if announced {
				size = 3 * block
			}
			fill := func(wr io.Writer) error { _, err := wr.Write(make([]byte, 3*block)); return err }

			started, proceed, firstDone := make(chan struct{}), make(chan struct{}), make(chan error)
			go func() {
				_, err := w.SaveInbox("first.bin", size, func(wr io.Writer) error {
					close(started)
					<-proceed
					return fill(wr)
				})
				firstDone <- err
			}()
			select { // the first download has its room and waits for its bytes
			case <-started:
			case err := <-firstDone:
				t.Fatalf("first download: %v", err)
			}
			_, secondErr := w.SaveInbox("second.bin", size, fill)
			close(proceed)
			firstErr := <-firstDone

			if (firstErr == nil) == (secondErr == nil) {
				t.Errorf("3 blocks each into 4: first %v, second %v; want exactly one refused", firstErr, secondErr)
			}
			for _, err := range []error{firstErr, secondErr} {
				if err != nil && !errors.Is(err, ErrInboxFull) {
					t.Errorf("refused with %v, want ErrInboxFull", err)
				}
			}
			entries, _ := os.ReadDir(filepath.Join(dir, InboxDir))
			if len(entries) != 1 {
				t.Errorf("the inbox holds %d files, want the one that fit", len(entries))
			}
		})
	}
}

// TestSaveInboxNegativeSizeLendsNoRoom: a download announced with a
// negative size claims nothing, and gives no room to one running beside it.
func TestSaveInboxNegativeSizeLendsNoRoom(t *testing.T) {
	w, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.LimitInbox(4 * minFileBytes)
	started, proceed, firstDone := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		_, err := w.SaveInbox("first.bin", -1<<40, func(io.Writer) error {
			close(started)
			<-proceed
			return nil
		})
		firstDone <- err
	}()
	select {
	case <-started:
	case err := <-firstDone:
		t.Fatalf("first download: %v", err)
	}
	_, err = w.SaveInbox("second.bin", 0, func(wr io.Writer) error { _, err := wr.Write(make([]byte, 5*minFileBytes)); return err })
	close(proceed)
	<-firstDone
	if !errors.Is(err, ErrInboxFull) {
		t.Errorf("5 blocks into 4 beside a download announced at -1 TiB: %v, want ErrInboxFull", err)
	}
}

// TestSaveInboxErrorsHideHostPath: an error writing or syncing the part
// file names it by its workspace path; the host path the os package puts
// in its errors reaches neither the chat nor the model.
func TestSaveInboxErrorsHideHostPath(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("needs /dev/full to make a write fail:", err)
	}
	defer full.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	tests := []struct {
		name  string
		under *os.File // put in place of the part file's descriptor
		write bool
		want  error
	}{
		{"write fails", full, true, syscall.ENOSPC},
		{"sync fails", pw, false, syscall.EINVAL}, // a pipe cannot be synced
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := OpenWorkspace(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			_, err = w.SaveInbox("x.txt", 0, func(wr io.Writer) error {
				// Swap the descriptor, keeping the os.File and its host path.
				if err := unix.Dup3(int(tt.under.Fd()), int(wr.(*partWriter).f.Fd()), unix.O_CLOEXEC); err != nil {
					return err
				}
				if tt.write {
					_, err := io.WriteString(wr, "data")
					return fmt.Errorf("download: %w", err)
				}
				return nil
			})
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), InboxDir+"/"+partPrefix) {
				t.Fatalf("err = %v, want %v naming the part file", err, tt.want)
			}
			if strings.Contains(err.Error(), w.Dir()) {
				t.Errorf("err = %q, names the host path %s", err, w.Dir())
			}
		})
	}
}

// TestSaveInboxSyncsTheName: the inbox directory is synced after the file
// got its name, before the chat is told it is saved; if that sync fails
// the save fails and leaves no file behind.
func TestSaveInboxSyncsTheName(t *testing.T) {
	for _, fail := range []bool{false, true} {
		dir := t.TempDir()
		w, err := OpenWorkspace(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var synced []string // what the inbox held at each sync
		w.inbox.syncDir = func(f *os.File) error {
			names, err := f.Readdirnames(-1)
			synced = append(synced, strings.Join(names, ","))
			if fail {
				return errors.New("sync failed")
			}
			return errors.Join(err, f.Sync())
		}
		_, err = w.SaveInbox("x.txt", 0, func(wr io.Writer) error { _, err := io.WriteString(wr, "x"); return err })
		if len(synced) != 1 || !strings.Contains(synced[0], "-x.txt") {
			t.Errorf("fail=%t: the inbox syncs saw %q, want one, with the file's name", fail, synced)
		}
		entries, _ := os.ReadDir(filepath.Join(dir, InboxDir))
		if fail && (err == nil || len(entries) != 0) {
			t.Errorf("a failed sync: err = %v, %d files left, want an error and none", err, len(entries))
		}
		if !fail && (err != nil || len(entries) != 1) {
			t.Errorf("err = %v, %d files, want the file saved", err, len(entries))
		}
	}
}

// TestCleanInboxLeavesOthersFiles: CleanInbox removes only names that
// createPart makes, and nothing at all when inbox/ is a symlink, here to
// the owner's src/ whose files merely look like part files.
func TestCleanInboxLeavesOthersFiles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o700); err != nil {
		t.Fatal(err)
	}
	names := []string{partPrefix + "notes", partPrefix + "0123456789abcdef"}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(src, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("src", filepath.Join(dir, InboxDir)); err != nil {
		t.Fatal(err)
	}
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.CleanInbox(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(src, name)); err != nil {
			t.Errorf("src/%s after CleanInbox through a symlinked inbox: %v", name, err)
		}
	}
}
