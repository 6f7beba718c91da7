package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fsTree fills a workspace with a small project.
func fsTree(fx *fsFixture) {
	fx.file("main.go", "package main\n\nfunc main() { run() }\n")
	fx.file("README.md", "# demo\nrun it\n")
	fx.file(".env", "X=1\n")
	fx.file("cmd/tool/tool.go", "package tool\n\nfunc run() {}\n")
	fx.file("cmd/tool/tool_test.go", "package tool\n")
	fx.file("src/a.txt", "alpha\n")
	fx.file("src/b/c.txt", "gamma run\n")
	fx.file(".git/config", "run = secret-ish\n")
	fx.file(".git/objects/x.go", "package x\n")
	fx.link("src", "srclink")
}

func TestListFiles(t *testing.T) {
	tests := []struct {
		pattern string
		want    string
	}{
		{"", ".env\nREADME.md\ncmd/\nmain.go\nsrc/\nsrclink -> src\n"},
		{"*", ".env\nREADME.md\ncmd/\nmain.go\nsrc/\nsrclink -> src\n"},
		{".", ".env\nREADME.md\ncmd/\nmain.go\nsrc/\nsrclink -> src\n"},
		{"**/*.go", "cmd/tool/tool.go\ncmd/tool/tool_test.go\nmain.go\n"},
		{"cmd/**", "cmd/tool/\ncmd/tool/tool.go\ncmd/tool/tool_test.go\n"},
		{"**/**/*_test.go", "cmd/tool/tool_test.go\n"},
		{"src/*", "src/a.txt\nsrc/b/\n"},
		{"src", "src/a.txt\nsrc/b/\n"},
		{"./src/", "src/a.txt\nsrc/b/\n"},
		{"*/*/*.txt", "src/b/c.txt\n"},
		{"src/b/c.txt", "src/b/c.txt\n"},
		{"srclink", "srclink -> src\n"},
		{"srclink/*", "srclink/a.txt\nsrclink/b/\n"},
		{"**/c.*", "src/b/c.txt\n"},
		{"*.rs", "[nothing matches *.rs]\n"},
		{"**/config", ""},                          // .git is skipped on the way down...
		{".git/*", ".git/config\n.git/objects/\n"}, // ...but can be listed when asked for
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			fx := newFSFixture(t)
			fsTree(fx)
			got, err := fx.w.ListFiles(context.Background(), ListArgs{Pattern: tt.pattern})
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == "" {
				want = "[nothing matches " + tt.pattern + "]\n"
			}
			if got != want {
				t.Errorf("ls %q =\n%s\nwant\n%s", tt.pattern, got, want)
			}
		})
	}
}

func TestListFilesErrors(t *testing.T) {
	fx := newFSFixture(t)
	fsTree(fx)
	tests := []struct {
		pattern string
		wantErr string
	}{
		{"missing", "ls missing: no such file or directory"},
		{"missing/*", "ls missing: no such file or directory"},
		{"main.go/*", "ls main.go: not a directory"},
		{"[", `ls: bad pattern "[": syntax error in pattern`},
	}
	for _, tt := range tests {
		_, err := fx.w.ListFiles(context.Background(), ListArgs{Pattern: tt.pattern})
		if err == nil || err.Error() != tt.wantErr {
			t.Errorf("ls %q: err = %v, want %q", tt.pattern, err, tt.wantErr)
		}
	}
}

func TestListFilesBounds(t *testing.T) {
	ctx := context.Background()
	t.Run("listing cap", func(t *testing.T) {
		fx := newFSFixture(t)
		for i := range 30 {
			fx.file(fmt.Sprintf("f%02d", i), "")
		}
		fx.w.lim.listEntries = 25
		got, err := fx.w.ListFiles(ctx, ListArgs{})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(lines) != 26 || lines[24] != "f24" || lines[25] != "[listing cut at 25 entries; use a narrower pattern]" {
			t.Errorf("got %d lines ending %q, want 25 entries and a note", len(lines), lines[len(lines)-2:])
		}
	})
	t.Run("visit cap", func(t *testing.T) {
		fx := newFSFixture(t)
		for i := range 10 {
			fx.file(fmt.Sprintf("d%d/f", i), "")
		}
		fx.w.lim.walkEntries = 12
		got, err := fx.w.ListFiles(ctx, ListArgs{Pattern: "**/f"})
		if err != nil {
			t.Fatal(err)
		}
		want := "d0/f\nd1/f\n[stopped after visiting 12 entries; results are incomplete, narrow the search]\n"
		if got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("depth cap", func(t *testing.T) {
		fx := newFSFixture(t)
		fx.file("a/b/c/d/e/f", "")
		fx.w.lim.walkDepth = 3
		got, err := fx.w.ListFiles(ctx, ListArgs{Pattern: "**"})
		if err != nil {
			t.Fatal(err)
		}
		if want := "a/\na/b/\na/b/c/\n"; got != want {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		fx := newFSFixture(t)
		fsTree(fx)
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := fx.w.ListFiles(ctx, ListArgs{Pattern: "**"}); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

func TestMatchGlobSegs(t *testing.T) {
	tests := []struct {
		pat, name string
		want      bool
	}{
		{"*.go", "a.go", true},
		{"*.go", "d/a.go", false},
		{"**/*.go", "a.go", true},
		{"**/*.go", "d/e/a.go", true},
		{"**", "d/e/a.go", true},
		{"d/**/a.go", "d/a.go", true},
		{"d/**/a.go", "d/x/y/a.go", true},
		{"d/**/a.go", "e/x/a.go", false},
		{"**/x/**/y", "a/x/b/c/y", true},
		{"**/x/**/y", "a/x/b/c/z", false},
		{"src/?.txt", "src/a.txt", true},
		{"src/[ab].txt", "src/c.txt", false},
	}
	for _, tt := range tests {
		got := matchGlobSegs(strings.Split(tt.pat, "/"), strings.Split(tt.name, "/"))
		if got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pat, tt.name, got, tt.want)
		}
	}
	// Many "**" must not take exponential time.
	pat := strings.Split(strings.Repeat("**/a/", 20)+"b", "/")
	name := strings.Split(strings.Repeat("a/", 60)+"c", "/")
	if matchGlobSegs(pat, name) {
		t.Error("pathological pattern matched, want no match")
	}
}

func TestGrep(t *testing.T) {
	tests := []struct {
		name string
		args GrepArgs
		want string
	}{
		{
			name: "whole workspace skips .git and symlinks",
			args: GrepArgs{Pattern: `\brun\b`},
			want: "README.md:2:run it\ncmd/tool/tool.go:3:func run() {}\nmain.go:3:func main() { run() }\nsrc/b/c.txt:1:gamma run\n",
		},
		{
			name: "directory",
			args: GrepArgs{Pattern: "run", Path: "src"},
			want: "src/b/c.txt:1:gamma run\n",
		},
		{
			name: "file",
			args: GrepArgs{Pattern: "^package", Path: "main.go"},
			want: "main.go:1:package main\n",
		},
		{
			name: "symlink named explicitly is searched",
			args: GrepArgs{Pattern: "alpha", Path: "srclink"},
			want: "srclink/a.txt:1:alpha\n",
		},
		{
			name: "glob on file names",
			args: GrepArgs{Pattern: "package", Glob: "*_test.go"},
			want: "cmd/tool/tool_test.go:1:package tool\n",
		},
		{
			name: "glob on paths",
			args: GrepArgs{Pattern: "run", Glob: "src/**"},
			want: "src/b/c.txt:1:gamma run\n",
		},
		{
			name: "no matches",
			args: GrepArgs{Pattern: "nothing-like-this"},
			want: "[no matches]\n",
		},
		// The pattern is matched against each line on its own, so ^ and $
		// (and \A, \z) are a line's start and end, on every line.
		{
			name: "^ anchors at each line",
			args: GrepArgs{Pattern: "^func"},
			want: "cmd/tool/tool.go:3:func run() {}\nmain.go:3:func main() { run() }\n",
		},
		{
			name: "$ anchors at each line",
			args: GrepArgs{Pattern: `run it$|\Agamma`},
			want: "README.md:2:run it\nsrc/b/c.txt:1:gamma run\n",
		},
		{
			name: "a match does not span lines",
			args: GrepArgs{Pattern: `(?s)demo.run`},
			want: "[no matches]\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFSFixture(t)
			fsTree(fx)
			got, err := fx.w.Grep(context.Background(), tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("grep =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestGrepBounds(t *testing.T) {
	ctx := context.Background()
	fx := newFSFixture(t)
	fx.w.lim.grepFile = 100
	fx.w.lim.grepMatches = 3
	fx.w.lim.grepLine = 8
	fx.file("a.txt", "hit 1\nmiss\nhit 2 is a long line\n")
	fx.file("b.bin", "hit\x00")
	fx.file("c.big", strings.Repeat("hit\n", 30))
	fx.file("d.txt", "hit 3\nhit 4\nhit 5\n")

	got, err := fx.w.Grep(ctx, GrepArgs{Pattern: "hit"})
	if err != nil {
		t.Fatal(err)
	}
	want := "a.txt:1:hit 1\n" +
		"a.txt:3:hit 2 is …\n" +
		"d.txt:1:hit 3\n" +
		"[stopped at 3 matches; narrow the pattern, path or glob]\n" +
		"[skipped 1 binary file and 1 file over 100 bytes]\n"
	if got != want {
		t.Errorf("grep =\n%s\nwant\n%s", got, want)
	}

	_, err = fx.w.Grep(ctx, GrepArgs{Pattern: "hit", Path: "b.bin"})
	if want := "grep b.bin: looks binary (it contains NUL bytes); not searched"; err == nil || err.Error() != want {
		t.Errorf("grep binary file: err = %v, want %q", err, want)
	}
	_, err = fx.w.Grep(ctx, GrepArgs{Pattern: "hit", Path: "c.big"})
	if want := "grep c.big: file is 120 bytes, over the 100 bytes grep limit"; err == nil || err.Error() != want {
		t.Errorf("grep large file: err = %v, want %q", err, want)
	}
}

func TestGrepErrors(t *testing.T) {
	fx := newFSFixture(t)
	fsTree(fx)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fx.w.Grep(ctx, GrepArgs{Pattern: "run"}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v, want context.Canceled", err)
	}
	tests := []struct {
		args    GrepArgs
		wantErr string
	}{
		{GrepArgs{}, "grep: pattern is empty"},
		{GrepArgs{Pattern: "("}, "grep: error parsing regexp: missing closing ): `(`"},
		{GrepArgs{Pattern: "x", Path: "missing"}, "grep missing: no such file or directory"},
		{GrepArgs{Pattern: "x", Glob: "["}, `grep: glob: bad pattern "[": syntax error in pattern`},
	}
	for _, tt := range tests {
		_, err := fx.w.Grep(context.Background(), tt.args)
		if err == nil || err.Error() != tt.wantErr {
			t.Errorf("grep %+v: err = %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}

func TestGrepPatternCost(t *testing.T) {
	words := make([]string, 400)
	for i := range words {
		// Distinct words without shared prefixes cost about one
		// instruction a character.
		words[i] = fmt.Sprintf("%c%c%cword%03d", 'a'+i%26, 'a'+i/26%26, 'a'+i%7, i)
	}
	allowed := []string{
		`\brun\b`,
		`(?i)\b(todo|fixme|xxx|hack)\b:?`,
		`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
		`^.{1000,}$`,
		`a{1,1000}`,
		`\w{1,255}`,
		`\b(` + strings.Join(words, "|") + `)\b`,
		`(?i)\b(` + strings.Join(words, "|") + `)\b`,
	}
	fx := newFSFixture(t)
	fsTree(fx)
	for _, p := range allowed {
		if _, err := fx.w.Grep(context.Background(), GrepArgs{Pattern: p}); err != nil {
			t.Errorf("grep %.60q: %v, want it allowed", p, err)
		}
	}
	refused := []string{
		// The audit's: quadratic in the line length, hours on 1 MiB.
		"(?s)" + strings.Repeat(".{1000}", 20) + "$",
		strings.Repeat(".{1000}", 6),
		strings.Repeat("(a{1,1000})", 3),
	}
	for _, p := range refused {
		_, err := fx.w.Grep(context.Background(), GrepArgs{Pattern: p})
		if want := "grep: pattern is too complex ("; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("grep %.60q: err = %v, want prefix %q", p, err, want)
		}
	}
}

// TestGrepCanceledInsideAFile: a cancel that arrives while one file is
// searched stops the search with ctx's error, between lines and inside a
// long line; before, matching a file ran to its end whatever ctx said.
func TestGrepCanceledInsideAFile(t *testing.T) {
	fx := newFSFixture(t)
	fx.file("lines.txt", strings.Repeat("ordinary text line of a log file\n", 20000))
	fx.file("one-line.txt", strings.Repeat("ordinary text without an end ", 20000))
	for _, tt := range []struct{ path, pattern string }{
		{"lines.txt", "text"},
		{"lines.txt", `[xyz]\d`}, // no literal prefix to skip the file by
		{"one-line.txt", `[xyz]\d`},
		{".", `[xyz]\d`},
	} {
		// Fewer looks at ctx than there are lines or KiB in the file.
		ctx := newCancelAfterChecks(8)
		got, err := fx.w.Grep(ctx, GrepArgs{Pattern: tt.pattern, Path: tt.path})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("grep %q in %s: err = %v (result %.60q), want context.Canceled", tt.pattern, tt.path, err, got)
		}
	}
}

// TestMatchLineLongLines: a long line goes through the ctx-watching reader;
// it must match exactly as the line itself would.
func TestMatchLineLongLines(t *testing.T) {
	pad := strings.Repeat("p", 3*grepShortLine)
	lines := []string{
		"start" + pad + "end",
		pad + " word " + pad,
		pad + "caf\xe9" + pad, // invalid UTF-8
		pad + "€" + pad,
		pad,
	}
	patterns := []string{`^start`, `^p`, `end$`, `p$`, `\bword\b`, `\Bword`, `\x{FFFD}`, `€`, `^p+$`, `start.*end`, `\Aend`, `word\z`}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		for i, line := range lines {
			got, err := matchLine(context.Background(), re, []byte(line))
			if err != nil {
				t.Fatal(err)
			}
			if want := re.Match([]byte(line)); got != want {
				t.Errorf("matchLine(%q, line %d) = %v, want %v", p, i, got, want)
			}
		}
	}
}

// TestCtxRuneReaderStops: once ctx is done the reader ends the input within
// grepShortLine runes, which is what stops a match in a long line early.
func TestCtxRuneReaderStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const size = 100 * grepShortLine
	r := &ctxRuneReader{ctx: ctx, r: bytes.NewReader(bytes.Repeat([]byte("é"), size))}
	n := 0
	for {
		if _, _, err := r.ReadRune(); err != nil {
			break
		}
		n++
	}
	if n > grepShortLine || !errors.Is(r.err, context.Canceled) {
		t.Errorf("read %d of %d runes after the cancel, err %v; want at most %d and context.Canceled", n, size, r.err, grepShortLine)
	}
}

// TestGrepStopsWhenOutOfTime: a search that runs past Grep's own time
// returns what it found with a note saying it stopped, not an error;
// the caller's cancel is still an error. Before, a pattern just under the
// size limit could search a MiB of long lines for 40 s.
func TestGrepStopsWhenOutOfTime(t *testing.T) {
	fx := newFSFixture(t)
	fx.file("one-line.txt", strings.Repeat("ordinary text without an end ", 20000))
	fx.file("lines.txt", strings.Repeat("ordinary text line of a log file\n", 2000))
	fx.w.lim.grepTime = time.Nanosecond // gone before the first look
	for _, path := range []string{".", "one-line.txt", "lines.txt"} {
		got, err := fx.w.Grep(context.Background(), GrepArgs{Pattern: `[xyz]\d`, Path: path})
		if err != nil || !strings.Contains(got, "[stopped after 1ns of searching") {
			t.Errorf("grep in %s: %q, %v; want the note and no error", path, got, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fx.w.Grep(ctx, GrepArgs{Pattern: `[xyz]\d`}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled by the caller: err = %v, want context.Canceled", err)
	}
}
