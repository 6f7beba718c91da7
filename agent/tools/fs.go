package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrEscapes is wrapped by every error a file tool returns because a path
// would leave the workspace: "..", an absolute path elsewhere, or a symlink
// (in any component, including the last) whose target lies outside it.
var ErrEscapes = errors.New("path escapes the workspace")

// Workspace is the directory tree the file tools may touch. Every filesystem
// access goes through an [os.Root] opened on that directory, so the kernel,
// not a string check, decides what a path names: a component that is a
// symlink is followed one openat at a time from a directory descriptor and
// refused if it would leave the root, and a symlink swapped in between two
// calls is resolved afresh by the next call (DESIGN.md, invariant 6).
//
// Consequences the owner should know:
//   - Symlinks that stay inside the workspace work as usual. Absolute
//     symlinks are never followed, even when they point into the workspace,
//     because os.Root refuses them.
//   - ListFiles and Grep list symlinks but never descend into them.
//   - os.Root does not stop hard links, bind mounts or device nodes that
//     someone already put inside the workspace; those are the owner's doing.
//
// A Workspace is safe for concurrent use.
type Workspace struct {
	root  *os.Root
	dir   string
	lim   fsLimits
	inbox inboxState // downloads into inbox/ (fs_inbox.go)
}

// fsLimits bounds the work and output of one tool call. They are fields
// rather than constants so tests can shrink them.
type fsLimits struct {
	readOutput  int // bytes of text ReadFile returns
	readLine    int // bytes of one line ReadFile shows
	readScan    int64
	editFile    int64 // largest file EditFile rewrites
	listEntries int   // lines ListFiles returns
	walkEntries int   // directory entries one walk may visit
	walkDepth   int   // directories below the start one walk may descend
	grepMatches int
	grepLine    int           // bytes of a matching line Grep shows
	grepFile    int64         // larger files are skipped by Grep
	grepTime    time.Duration // Grep stops searching after this long
	diskReserve int64         // free bytes a download into the inbox must leave
}

func defaultFSLimits() fsLimits {
	return fsLimits{
		readOutput:  50 << 10,
		readLine:    2000,
		readScan:    16 << 20,
		editFile:    4 << 20,
		listEntries: 500,
		walkEntries: 100_000,
		walkDepth:   64,
		grepMatches: 200,
		grepLine:    512,
		grepFile:    1 << 20,
		grepTime:    20 * time.Second,
		diskReserve: DiskReserve,
	}
}

// sniffLen is how much of a file decides whether it is text.
const sniffLen = 8 << 10

// OpenWorkspace opens dir as the root of the file tools.
func OpenWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return &Workspace{root: root, dir: abs, lim: defaultFSLimits()}, nil
}

// Close releases the workspace's directory descriptor. Tool calls after Close
// fail.
func (w *Workspace) Close() error {
	return w.root.Close()
}

// Dir returns the absolute host path of the workspace. It is for the owner
// and the logs; the tools never put it in what they show the model.
func (w *Workspace) Dir() string {
	return w.dir
}

// rel turns a path from the model into a clean workspace-relative path, or
// refuses it. An absolute path is accepted only when it names something under
// Dir, as models like to echo back absolute paths they were shown. The check
// is lexical and only for a clear error message: os.Root enforces the
// boundary again on every access, symlinks included.
func (w *Workspace) rel(p string) (string, error) {
	if p == "" {
		return "", errors.New("path is empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path contains a NUL byte: %q", p)
	}
	c := filepath.Clean(p)
	if filepath.IsAbs(c) {
		r, err := filepath.Rel(w.dir, c)
		if err != nil || escapesLexically(r) {
			return "", fmt.Errorf("%w: %s (paths are relative to the workspace)", ErrEscapes, p)
		}
		return r, nil
	}
	if escapesLexically(c) {
		return "", fmt.Errorf("%w: %s", ErrEscapes, p)
	}
	return c, nil
}

func escapesLexically(clean string) bool {
	return clean == ".." || strings.HasPrefix(clean, "../")
}

// fsError rewrites an error from an os.Root call for the model: the
// operation and the workspace-relative name it asked for, then the bare
// cause. It drops the *PathError and *LinkError wrappers so that no path the
// os package put there reaches the model, and keeps the cause wrapped so
// errors.Is(err, fs.ErrNotExist) still works.
func fsError(op, name string, err error) error {
	cause := err
	for {
		switch e := cause.(type) {
		case *fs.PathError:
			cause = e.Err
			continue
		case *os.LinkError:
			cause = e.Err
			continue
		}
		break
	}
	// os.Root reports escapes with an unexported error; its text is the only
	// handle on it.
	if cause.Error() == "path escapes from parent" || errors.Is(cause, ErrEscapes) {
		return fmt.Errorf("%w: %s", ErrEscapes, name)
	}
	return fmt.Errorf("%s %s: %w", op, name, cause)
}

// textProblem says why head (the start of a file) is not text the model
// should see, or returns "" if it is. A NUL byte or invalid UTF-8 in the
// first sniffLen bytes marks a file as binary; a rune cut by the end of head
// is not held against it.
func textProblem(head []byte, wholeFile bool) string {
	if len(head) > sniffLen {
		head = head[:sniffLen]
		wholeFile = false
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return "looks binary (it contains NUL bytes)"
	}
	if !wholeFile {
		// Drop a trailing partial rune: at most utf8.UTFMax-1 bytes.
		for i := 0; i < utf8.UTFMax-1 && len(head) > 0; i++ {
			if utf8.Valid(head) {
				break
			}
			head = head[:len(head)-1]
		}
	}
	if !utf8.Valid(head) {
		return "is not UTF-8 text"
	}
	return ""
}

// countLines counts lines the way an editor shows them: a final line without
// a newline still counts, an empty string has none.
func countLines(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// plural formats n with a noun, adding "s" when n is not 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sizeString formats a byte count for a note to the model.
func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return plural(int(n), "byte")
}

// cutUTF8 returns at most n bytes of s without splitting a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
