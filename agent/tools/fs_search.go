package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ListArgs are the arguments of the ls tool.
type ListArgs struct {
	// Pattern is a glob relative to the workspace: "*" and "?" and
	// "[...]" match within one path element, "**" matches any number of
	// elements ("**/*.go"). A pattern without wildcards that names a
	// directory lists that directory. "" lists the top level.
	Pattern string `json:"pattern,omitempty"`
}

// GrepArgs are the arguments of the grep tool.
type GrepArgs struct {
	Pattern string `json:"pattern"`        // RE2 syntax, matched against each line
	Path    string `json:"path,omitempty"` // file or directory to search; "" means the workspace
	// Glob limits a directory search to matching files: "*.go" matches the
	// file name, a glob with a "/" ("cmd/**/*.go") the workspace-relative path.
	Glob string `json:"glob,omitempty"`
}

// ListFiles lists the workspace entries that match a glob, one
// workspace-relative path a line, sorted depth first; directories end in "/"
// and symlinks show where they point ("link -> target", or that they point
// outside the workspace). At most 500 entries are listed and 100,000 visited;
// a note says when the listing was cut. Symlinks are listed but never
// descended into, and .git directories met on the way down are skipped
// (a pattern that starts in one, ".git/*", still lists it).
func (w *Workspace) ListFiles(ctx context.Context, a ListArgs) (string, error) {
	pattern := a.Pattern
	if pattern == "" {
		pattern = "*"
	}
	segs, err := w.globSegs(pattern)
	if err != nil {
		return "", fmt.Errorf("ls: %w", err)
	}
	k := 0 // segs[:k] is the literal directory the walk starts in
	for k < len(segs) && !hasGlobMeta(segs[k]) {
		k++
	}
	if k == len(segs) {
		// No wildcards: pattern names one entry, or a directory to list.
		name := strings.Join(segs, "/")
		if name == "" {
			name = "."
		}
		fi, err := w.root.Lstat(name)
		if err != nil {
			return "", fsError("ls", name, err)
		}
		if !fi.IsDir() {
			return w.describe(name, fs.FileInfoToDirEntry(fi)) + "\n", nil
		}
		segs = append(segs, "*")
	}
	start := "."
	if k > 0 {
		start = strings.Join(segs[:k], "/")
	}
	rest := segs[k:]
	depth := len(rest)
	if slices.Contains(rest, "**") {
		depth = w.lim.walkDepth
	}
	var (
		lines []string
		cut   bool
	)
	st, err := w.walk(ctx, start, depth, func(rel string, d fs.DirEntry) error {
		relSegs := strings.Split(rel, "/")[k:]
		if matchGlobSegs(rest, relSegs) {
			if len(lines) == w.lim.listEntries {
				cut = true
				return fs.SkipAll
			}
			lines = append(lines, w.describe(rel, d))
		}
		if d.IsDir() && !globMayMatchBelow(rest, relSegs) {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return "", fsError("ls", start, err)
	}
	var out strings.Builder
	for _, l := range lines {
		out.WriteString(l + "\n")
	}
	if len(lines) == 0 {
		fmt.Fprintf(&out, "[nothing matches %s]\n", pattern)
	}
	if cut {
		fmt.Fprintf(&out, "[listing cut at %d entries; use a narrower pattern]\n", w.lim.listEntries)
	}
	st.notes(&out)
	return out.String(), nil
}

// describe formats one ListFiles line.
func (w *Workspace) describe(rel string, d fs.DirEntry) string {
	switch {
	case d.IsDir():
		return rel + "/"
	case d.Type()&fs.ModeSymlink != 0:
		link, err := w.root.Readlink(rel)
		switch {
		case err != nil:
			return rel + " -> (unreadable symlink)"
		case filepath.IsAbs(link) || escapesLexically(path.Join(path.Dir(rel), link)):
			// Do not show host paths; the tools will not follow it anyway.
			return rel + " -> (outside the workspace; not followed)"
		}
		return rel + " -> " + link
	}
	return rel
}

// Grep searches files for lines matching an RE2 pattern and returns them as
// "path:line:text" with workspace-relative paths. A directory is searched
// depth first in name order, skipping .git, symlinks, binary files (a NUL
// byte in the first 8 KiB) and files over 1 MiB; a file named by Path is
// searched even if it is a symlink within the workspace. At most 200 matches
// are returned and 512 bytes of each line; notes say what was cut or
// skipped. A pattern whose compiled program is larger than maxGrepProg is
// refused. Grep stops, with ctx's error, when ctx is done, also in the
// middle of a file or of a long line. After 20 s of searching it stops too
// and returns what it found with a note: a pattern under the size limit
// can still cost seconds a MiB of long lines, and the model waits.
func (w *Workspace) Grep(ctx context.Context, a GrepArgs) (string, error) {
	re, err := compileGrep(a.Pattern)
	if err != nil {
		return "", err
	}
	parent := ctx
	ctx = &grepClock{Context: ctx, end: time.Now().Add(w.lim.grepTime)}
	p := a.Path
	if p == "" {
		p = "."
	}
	name, err := w.rel(p)
	if err != nil {
		return "", err
	}
	g := &grepper{w: w, re: re}
	if prefix, _ := re.LiteralPrefix(); prefix != "" {
		g.prefix = []byte(prefix)
	}
	if a.Glob != "" {
		if g.glob, err = w.globSegs(a.Glob); err != nil {
			return "", fmt.Errorf("grep: glob: %w", err)
		}
		g.globPath = strings.Contains(a.Glob, "/")
	}
	fi, err := w.root.Stat(name)
	if err != nil {
		return "", fsError("grep", name, err)
	}
	var st walkStats
	if fi.IsDir() {
		st, err = w.walk(ctx, name, w.lim.walkDepth, func(rel string, d fs.DirEntry) error {
			if !d.Type().IsRegular() || !g.wants(rel) {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			return g.file(ctx, rel)
		})
		if g.outOfTime(parent, ctx, err) {
			err = nil
		}
		if err != nil {
			return "", fsError("grep", name, err)
		}
	} else {
		g.single = true
		if err := g.file(ctx, name); err != nil && !errors.Is(err, fs.SkipAll) && !g.outOfTime(parent, ctx, err) {
			return "", err
		}
	}
	return g.result(st), nil
}

// errGrepTime is the error of a Grep whose own time ran out.
var errGrepTime = errors.New("grep: out of time")

// grepClock is the context Grep searches under: done when the caller's is,
// or with errGrepTime once end has passed. The search only ever asks Err,
// which is also all a test's context may answer.
type grepClock struct {
	context.Context
	end time.Time
}

func (c *grepClock) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.end) {
		return errGrepTime
	}
	return nil
}

// outOfTime reports whether err ended the search because Grep's own time
// ran out (not the caller's), and notes it for the result.
func (g *grepper) outOfTime(parent, ctx context.Context, err error) bool {
	if !errors.Is(err, errGrepTime) || parent.Err() != nil {
		return false
	}
	g.timedOut = true
	return true
}

// maxGrepProg is the largest compiled program, in instructions, a grep
// pattern may have. Go's regexp runs in time proportional to the length of
// the text times the program size, and a legal pattern can be huge:
// (?s).{1000}.{1000}… costs a thousand steps a byte per repeat. 5000
// leaves room for what people write, an alternation of some 400 words
// (about one instruction a character) or a{1,1000}, while bounding the
// cost of a 1 MiB file to what cancellation can interrupt in time.
const maxGrepProg = 5000

// compileGrep compiles a grep pattern, refusing one too costly to run.
func compileGrep(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, errors.New("grep: pattern is empty")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("grep: %w", err)
	}
	// The same steps regexp.Compile takes, to see the program it built.
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("grep: %w", err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, fmt.Errorf("grep: %w", err)
	}
	if n := len(prog.Inst); n > maxGrepProg {
		return nil, fmt.Errorf("grep: pattern is too complex (%d regexp instructions, the limit is %d); use smaller repeat counts such as {1,100} instead of {1000}, or fewer alternatives", n, maxGrepProg)
	}
	return re, nil
}

// grepper holds the state of one Grep call.
type grepper struct {
	w  *Workspace
	re *regexp.Regexp
	// prefix, when not nil, begins every match: a file without it has no
	// matching line and is not searched line by line.
	prefix   []byte
	glob     []string
	globPath bool // match glob against the whole path, not the file name
	single   bool // Path named one file: report why it was not searched

	matches    []string
	cut        bool
	timedOut   bool
	binary     int
	large      int
	unreadable int
}

func (g *grepper) wants(rel string) bool {
	switch {
	case g.glob == nil:
		return true
	case g.globPath:
		return matchGlobSegs(g.glob, strings.Split(rel, "/"))
	}
	return matchGlobSegs(g.glob, []string{path.Base(rel)})
}

// file searches one file, a line at a time: the pattern is matched
// against each line on its own, so ^ and $ mean the line's start and end.
// It returns fs.SkipAll once the match cap is reached, ctx's error when ctx
// is done and, when the file was named by Path, an error saying why it
// could not be searched; in a walk such files are counted instead.
func (g *grepper) file(ctx context.Context, rel string) error {
	data, err := g.read(rel)
	if err != nil {
		if g.single {
			return err
		}
		return nil
	}
	if g.prefix != nil && !bytes.Contains(data, g.prefix) {
		return nil
	}
	lineNo := 0
	for line := range bytes.Lines(data) {
		lineNo++
		if err := ctx.Err(); err != nil {
			return err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		ok, err := matchLine(ctx, g.re, line)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if len(g.matches) == g.w.lim.grepMatches {
			g.cut = true
			return fs.SkipAll
		}
		text := strings.ToValidUTF8(string(line), "\uFFFD")
		if short := cutUTF8(text, g.w.lim.grepLine); len(short) < len(text) {
			text = short + " …"
		}
		g.matches = append(g.matches, fmt.Sprintf("%s:%d:%s", rel, lineNo, text))
	}
	return nil
}

// grepShortLine is the longest line matched in one uninterruptible call:
// at maxGrepProg instructions it costs a few tens of milliseconds at most.
// A longer line is fed to the matcher through a reader that watches ctx.
const grepShortLine = 1 << 10

// matchLine reports whether re matches line, or returns ctx's error if ctx
// is done before it can tell.
func matchLine(ctx context.Context, re *regexp.Regexp, line []byte) (bool, error) {
	if len(line) <= grepShortLine {
		return re.Match(line), nil
	}
	r := &ctxRuneReader{ctx: ctx, r: bytes.NewReader(line)}
	ok := re.MatchReader(r)
	if r.err != nil {
		return false, r.err
	}
	return ok, nil
}

// ctxRuneReader reads runes from r until ctx is done, then reports the end
// of the input, which ends a match in progress; err says why it ended. A
// bytes.Reader decodes runes as regexp does a []byte, invalid UTF-8
// included, so a match reads the same either way.
type ctxRuneReader struct {
	ctx context.Context
	r   *bytes.Reader
	n   int
	err error
}

func (c *ctxRuneReader) ReadRune() (rune, int, error) {
	if c.err != nil {
		return 0, 0, io.EOF
	}
	if c.n++; c.n%grepShortLine == 0 {
		if c.err = c.ctx.Err(); c.err != nil {
			return 0, 0, io.EOF
		}
	}
	return c.r.ReadRune()
}

// read loads a file Grep may search, counting the ones it may not.
func (g *grepper) read(rel string) ([]byte, error) {
	f, err := g.w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		g.unreadable++
		return nil, fsError("grep", rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		g.unreadable++
		return nil, fsError("grep", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("grep %s: not a regular file", rel)
	}
	limit := g.w.lim.grepFile
	if fi.Size() > limit {
		g.large++
		return nil, fmt.Errorf("grep %s: file is %s, over the %s grep limit", rel, sizeString(fi.Size()), sizeString(limit))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		g.unreadable++
		return nil, fsError("grep", rel, err)
	}
	if int64(len(data)) > limit {
		g.large++
		return nil, fmt.Errorf("grep %s: file grew past the %s grep limit", rel, sizeString(limit))
	}
	if bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 {
		g.binary++
		return nil, fmt.Errorf("grep %s: looks binary (it contains NUL bytes); not searched", rel)
	}
	return data, nil
}

func (g *grepper) result(st walkStats) string {
	var out strings.Builder
	for _, m := range g.matches {
		out.WriteString(m + "\n")
	}
	if len(g.matches) == 0 {
		out.WriteString("[no matches]\n")
	}
	if g.cut {
		fmt.Fprintf(&out, "[stopped at %d matches; narrow the pattern, path or glob]\n", g.w.lim.grepMatches)
	}
	if g.timedOut {
		fmt.Fprintf(&out, "[stopped after %s of searching, so files or lines may be missing; narrow the path or glob, or simplify the pattern]\n", g.w.lim.grepTime)
	}
	if g.binary > 0 || g.large > 0 {
		fmt.Fprintf(&out, "[skipped %s and %s over %s]\n", plural(g.binary, "binary file"),
			plural(g.large, "file"), sizeString(g.w.lim.grepFile))
	}
	if g.unreadable > 0 {
		fmt.Fprintf(&out, "[%s could not be read]\n", plural(g.unreadable, "file"))
	}
	st.notes(&out)
	return out.String()
}
