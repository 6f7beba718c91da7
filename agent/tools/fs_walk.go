package tools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// walkStats tells how complete a walk was.
type walkStats struct {
	visited    int  // directory entries read
	exhausted  bool // stopped at the visit limit
	unreadable int  // directories that could not be opened or read
	limit      int
}

func (st walkStats) notes(out *strings.Builder) {
	if st.exhausted {
		fmt.Fprintf(out, "[stopped after visiting %d entries; results are incomplete, narrow the search]\n", st.limit)
	}
	if st.unreadable > 0 {
		fmt.Fprintf(out, "[%s could not be read]\n", plural(st.unreadable, "directory"))
	}
}

// walkFunc is called for each entry below a walk's start: depth first, in
// name order within a directory, with a workspace-relative path. Returning
// fs.SkipDir for a directory keeps the walk out of it; fs.SkipAll ends the
// walk without error.
type walkFunc func(rel string, d fs.DirEntry) error

// walk visits the tree under start, at most maxDepth levels deep. Every
// directory is opened through os.Root by its workspace-relative name, and
// only entries that ReadDir reports as directories are descended into: a
// symlink is handed to fn but not followed. If a directory is swapped for a
// symlink between ReadDir and the open, os.Root resolves the link and
// refuses it if it leads outside; inside, the walk may see a directory
// twice, which the depth and visit limits bound.
func (w *Workspace) walk(ctx context.Context, start string, maxDepth int, fn walkFunc) (walkStats, error) {
	st := walkStats{limit: w.lim.walkEntries}
	entries, err := w.readDir(start, &st)
	if err != nil {
		return st, err
	}
	err = w.walkEntries(ctx, start, entries, 1, min(maxDepth, w.lim.walkDepth), &st, fn)
	if errors.Is(err, fs.SkipAll) {
		err = nil
	}
	return st, err
}

func (w *Workspace) walkEntries(ctx context.Context, dir string, entries []fs.DirEntry, level, maxDepth int, st *walkStats, fn walkFunc) error {
	for _, d := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.Name() == ".git" {
			continue
		}
		rel := joinRel(dir, d.Name())
		err := fn(rel, d)
		if errors.Is(err, fs.SkipDir) {
			continue
		}
		if err != nil {
			return err
		}
		if !d.IsDir() || level >= maxDepth {
			continue
		}
		sub, err := w.readDir(rel, st)
		if err != nil {
			st.unreadable++
			continue
		}
		if err := w.walkEntries(ctx, rel, sub, level+1, maxDepth, st, fn); err != nil {
			return err
		}
	}
	return nil
}

// readDir returns a directory's entries sorted by name, no more than the
// walk's visit budget allows. The directory is closed before the walk goes
// deeper, so a deep tree does not hold a descriptor per level.
func (w *Workspace) readDir(dir string, st *walkStats) ([]fs.DirEntry, error) {
	f, err := w.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []fs.DirEntry
	for {
		room := st.limit - st.visited
		if room <= 0 {
			st.exhausted = true
			break
		}
		batch, err := f.ReadDir(min(room, 1024))
		st.visited += len(batch)
		all = append(all, batch...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(all, func(a, b fs.DirEntry) int { return cmp.Compare(a.Name(), b.Name()) })
	return all, nil
}

func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// globSegs cleans a glob from the model into workspace-relative path
// elements, refusing ones that leave the workspace or do not parse.
// Consecutive "**" elements are merged.
func (w *Workspace) globSegs(pattern string) ([]string, error) {
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, fmt.Errorf("pattern contains a NUL byte: %q", pattern)
	}
	c := path.Clean(filepath.ToSlash(pattern))
	if path.IsAbs(c) {
		r, err := filepath.Rel(w.dir, c)
		if err != nil || escapesLexically(r) {
			return nil, fmt.Errorf("%w: %s (patterns are relative to the workspace)", ErrEscapes, pattern)
		}
		c = r
	}
	if escapesLexically(c) {
		return nil, fmt.Errorf("%w: %s", ErrEscapes, pattern)
	}
	if c == "." {
		return nil, nil
	}
	var segs []string
	for s := range strings.SplitSeq(c, "/") {
		if s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**" {
			continue
		}
		if _, err := path.Match(s, ""); err != nil {
			return nil, fmt.Errorf("bad pattern %q: %w", pattern, err)
		}
		segs = append(segs, s)
	}
	return segs, nil
}

func hasGlobMeta(seg string) bool {
	return strings.ContainsAny(seg, `*?[\`)
}

// matchGlobSegs reports whether the path elements name match the glob
// elements pat, where "**" matches any number of elements. It is dynamic
// programming over (pattern, name) suffixes, so a pattern with many "**"
// costs len(pat)*len(name) matches, not an exponential number.
func matchGlobSegs(pat, name []string) bool {
	next := make([]bool, len(name)+1) // next[j]: pat[i+1:] matches name[j:]
	next[len(name)] = true
	for i := len(pat) - 1; i >= 0; i-- {
		cur := make([]bool, len(name)+1)
		for j := len(name); j >= 0; j-- {
			switch {
			case pat[i] == "**":
				cur[j] = next[j] || (j < len(name) && cur[j+1])
			case j < len(name):
				ok, _ := path.Match(pat[i], name[j])
				cur[j] = ok && next[j+1]
			}
		}
		next = cur
	}
	return next[0]
}

// globMayMatchBelow reports whether some path under the directory dir could
// match pat, so that a walk can skip directories that cannot.
func globMayMatchBelow(pat, dir []string) bool {
	for i, s := range dir {
		if i >= len(pat) {
			return false
		}
		if pat[i] == "**" {
			return true
		}
		if ok, _ := path.Match(pat[i], s); !ok {
			return false
		}
	}
	return len(pat) > len(dir)
}
