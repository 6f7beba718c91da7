package tools

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// WriteArgs are the arguments of the write tool.
type WriteArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// EditArgs are the arguments of the edit tool.
type EditArgs struct {
	Path string `json:"path"`
	Old  string `json:"old"` // exact text to replace; must occur exactly once
	New  string `json:"new"`
}

// maxLinkHops bounds how many symlinks a write follows in its last path
// component, as the kernel's 40 does for open.
const maxLinkHops = 40

// tempPrefix starts the name of the temporary file a write renames into
// place; it is a dot file so listings of the directory mostly skip past it.
const tempPrefix = ".latch-tmp-"

// WriteFile replaces the file at Path with Content, creating it and any
// missing parent directories (0755) inside the workspace.
//
// The write is atomic: the content goes to a temporary file in the same
// directory, which is then renamed over the target, so a reader sees the old
// file or the new one, never half of either. A file that existed keeps its
// permission bits (setuid, setgid and sticky are dropped); a new one gets
// 0644 less the process's umask, as an editor's new file would. When Path
// is a symlink that stays inside the workspace the write goes to the file
// it points to, as an editor's would; a symlink leading out of the
// workspace, even a dangling one, is refused.
func (w *Workspace) WriteFile(ctx context.Context, a WriteArgs) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	name, err := w.rel(a.Path)
	if err != nil {
		return "", err
	}
	target, fi, err := w.resolveLast("write", name)
	if err != nil {
		return "", err
	}
	mode := 0o644 &^ umask()
	if fi != nil {
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("write %s: %s", name, notRegular(fi))
		}
		mode = fi.Mode().Perm()
	} else if dir := parentOf(target); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return "", fsError("write", name, err)
		}
	}
	if err := w.replaceFile(target, a.Content, mode); err != nil {
		return "", fsError("write", name, err)
	}
	verb := "created"
	if fi != nil {
		verb = "updated"
	}
	return fmt.Sprintf("%s %s (%s, %s)", verb, name,
		plural(countLines(a.Content), "line"), sizeString(int64(len(a.Content)))), nil
}

// EditFile replaces the one occurrence of Old in the file at Path with New.
// Old must match the file byte for byte exactly once; with no match or with
// several the file is left alone and the error says how many there were,
// counted up to maxEditCount ("100+ times"). The file is rewritten
// atomically, and symlinks are handled, as by WriteFile. Files over 4 MiB
// and binary files are refused.
func (w *Workspace) EditFile(ctx context.Context, a EditArgs) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	name, err := w.rel(a.Path)
	if err != nil {
		return "", err
	}
	if a.Old == "" {
		return "", fmt.Errorf("edit %s: old is empty; give the exact text to replace (use write to create a file)", name)
	}
	if a.Old == a.New {
		return "", fmt.Errorf("edit %s: old and new are the same; nothing to change", name)
	}
	target, fi, err := w.resolveLast("edit", name)
	if err != nil {
		return "", err
	}
	if fi == nil {
		return "", fsError("edit", name, syscall.ENOENT)
	}
	content, mode, err := w.readForEdit(target, name)
	if err != nil {
		return "", err
	}
	at, n := indexOnce(content, a.Old)
	switch {
	case n == 0:
		return "", fmt.Errorf("edit %s: old text not found (0 matches); it must match the file exactly, whitespace and indentation included, without line numbers", name)
	case n >= maxEditCount:
		return "", fmt.Errorf("edit %s: old text matches %d+ times; include more of the surrounding text so it matches exactly once", name, n)
	case n > 1:
		return "", fmt.Errorf("edit %s: old text matches %d times; include more of the surrounding text so it matches exactly once", name, n)
	}
	updated := content[:at] + a.New + content[at+len(a.Old):]
	if err := w.replaceFile(target, updated, mode); err != nil {
		return "", fsError("edit", name, err)
	}
	line := strings.Count(content[:at], "\n") + 1
	oldLines := countLines(a.Old)
	if a.New == "" {
		return fmt.Sprintf("edited %s: removed %s at line %d", name, plural(oldLines, "line"), line), nil
	}
	return fmt.Sprintf("edited %s: replaced %s at line %d with %s", name,
		plural(oldLines, "line"), line, plural(countLines(a.New), "line")), nil
}

// readForEdit reads the file EditFile changes, with its permission bits.
func (w *Workspace) readForEdit(target, name string) (string, fs.FileMode, error) {
	f, err := w.root.OpenFile(target, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", 0, fsError("edit", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, fsError("edit", name, err)
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("edit %s: %s", name, notRegular(fi))
	}
	if fi.Size() > w.lim.editFile {
		return "", 0, fmt.Errorf("edit %s: file is %s, over the %s edit limit", name,
			sizeString(fi.Size()), sizeString(w.lim.editFile))
	}
	data, err := io.ReadAll(io.LimitReader(f, w.lim.editFile+1))
	if err != nil {
		return "", 0, fsError("edit", name, err)
	}
	if int64(len(data)) > w.lim.editFile {
		return "", 0, fmt.Errorf("edit %s: file grew past the %s edit limit", name, sizeString(w.lim.editFile))
	}
	if p := textProblem(data, true); p != "" {
		return "", 0, fmt.Errorf("edit %s: file %s; not edited", name, p)
	}
	return string(data), fi.Mode().Perm(), nil
}

// maxEditCount is where indexOnce stops counting. Counting every
// overlapping occurrence costs up to len(s) times len(sub) byte comparisons
// (seconds for 4 MiB of "a" against 32 KiB of "a"); a few searches are
// enough to tell the model its Old text is ambiguous.
const maxEditCount = 100

// indexOnce returns where sub first occurs in s and how many times it occurs,
// overlapping occurrences included ("aa" occurs twice in "aaa", and replacing
// either would be a guess), counting no further than maxEditCount.
func indexOnce(s, sub string) (first, n int) {
	first = strings.Index(s, sub)
	if first < 0 {
		return -1, 0
	}
	n = 1
	for i := first; n < maxEditCount; n++ {
		j := strings.Index(s[i+1:], sub)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return first, n
}

// resolveLast follows symlinks in the last component of name, so that a
// write replaces the file a symlink points to rather than the link. It
// returns the name to replace, in a form os.Root resolves correctly (link
// targets are appended unchanged, so ".." after a symlinked directory means
// what the kernel would make of it), and that file's Lstat, or nil if it does
// not exist yet.
//
// Every step is an os.Root call, so a link pointing out of the workspace is
// refused by os.Root, and a link swapped in after this returns is at worst
// replaced by the rename (rename never follows its target): neither can move
// the write outside.
func (w *Workspace) resolveLast(op, name string) (string, fs.FileInfo, error) {
	target := name
	for hops := 0; ; hops++ {
		fi, err := w.root.Lstat(target)
		if errors.Is(err, fs.ErrNotExist) {
			return target, nil, nil
		}
		if err != nil {
			return "", nil, fsError(op, name, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return target, fi, nil
		}
		if hops == maxLinkHops {
			return "", nil, fsError(op, name, syscall.ELOOP)
		}
		link, err := w.root.Readlink(target)
		if err != nil {
			return "", nil, fsError(op, name, err)
		}
		if filepath.IsAbs(link) {
			return "", nil, fmt.Errorf("%w: %s (it is a symlink to an absolute path)", ErrEscapes, name)
		}
		target = target[:strings.LastIndexByte(target, '/')+1] + link
	}
}

// parentOf is the directory part of a name from resolveLast, uncleaned for
// the same reason.
func parentOf(name string) string {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return "."
	}
	return name[:i]
}

// replaceFile atomically replaces target with content: a new file in the same
// directory, fsynced, then renamed over target. On failure the temporary file
// is removed, as far as the directory can still be reached.
func (w *Workspace) replaceFile(target, content string, mode fs.FileMode) error {
	dir := target[:strings.LastIndexByte(target, '/')+1]
	var (
		tmp string
		f   *os.File
		err error
	)
	for range 5 {
		tmp = dir + tempPrefix + rand.Text()[:16]
		// O_EXCL: os.Root never follows a symlink when creating exclusively.
		f, err = w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	err = writeAndClose(f, content, mode)
	if err == nil {
		err = w.root.Rename(tmp, target)
	}
	if err != nil {
		_ = w.root.Remove(tmp) // best effort: the error that matters is err
		return err
	}
	return nil
}

// writeAndClose fills f and gives it its final mode through the descriptor
// (fchmod), never by name: os.Root.Chmod follows a symlink swapped in.
func writeAndClose(f *os.File, content string, mode fs.FileMode) error {
	_, err := io.WriteString(f, content)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func notRegular(fi fs.FileInfo) string {
	if fi.IsDir() {
		return "is a directory"
	}
	return "not a regular file"
}
