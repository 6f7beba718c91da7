package tgmd

import (
	"bytes"
	"fmt"
	"github.com/latchd/latch/gateways/internal/markdown"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// upstream is what gfm replaces: goldmark's own extensions. Test binaries
// may import them; the daemon must not (TestNoGoldmarkExtensionDependency).
var upstream = goldmark.New(goldmark.WithExtensions(extension.Strikethrough, extension.Table))

// Where we differ from upstream on purpose: each is a place where goldmark's
// extensions stray from GFM. knownDifference recognises them.
const (
	// ~~a~ : goldmark strikes "~a" (pairing a run of two with a run of
	// one); GFM pairs runs of the same length only.
	diffTildeLengths = "goldmark pairs tilde runs of different lengths"
	// | a |\n|---|---| : goldmark pads the header row and makes a table;
	// GFM wants the header to have as many cells as the delimiter row.
	diffShortHeader = "goldmark accepts a header row with fewer cells than the delimiter row"
	// a | b\n|---|\nc | d\n|---|---| : goldmark gives up on the paragraph
	// at the first delimiter row; GFM tries each line again.
	diffLaterTable = "goldmark looks at the first delimiter row only"
	// | a | b \| : goldmark takes the escaped pipe at the end for the
	// closing one and shows "b \"; GFM keeps it in the cell.
	diffTrailingEscapedPipe = `goldmark ends the row at a trailing \|`
	// | a || : goldmark drops the empty cell before the closing pipe.
	diffEmptyLastCell = "goldmark drops an empty last cell"
	// > a\n--\nb : goldmark may take a bare run of dashes in a lazy or
	// indented continuation line for a delimiter row; GFM reads no table
	// there.
	diffBareDashes = "goldmark takes a bare run of dashes for a delimiter row"
	// a\n| b |\n|---|\n| c |\n--- : goldmark makes "a" a setext heading
	// and puts it after the table; we leave "a" a paragraph above the
	// table, and "---" a thematic break, as when nothing is above.
	diffHeadingAfterTable = "goldmark puts lines above a table after it as a heading"
)

// tildeSpy wraps goldmark's strikethrough parser to notice when it pairs
// tilde runs of different lengths, to tell diffTildeLengths from a bug.
type tildeSpy struct{ parser.InlineParser }

var tildeSpyKey = parser.NewContextKey()

func (s tildeSpy) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	n := s.InlineParser.Parse(parent, block, pc)
	if d, ok := n.(*parser.Delimiter); ok {
		d.Processor = tildeSpyProcessor{d.Processor, pc}
	}
	return n
}

type tildeSpyProcessor struct {
	parser.DelimiterProcessor
	pc parser.Context
}

func (p tildeSpyProcessor) CanOpenCloser(opener, closer *parser.Delimiter) bool {
	ok := p.DelimiterProcessor.CanOpenCloser(opener, closer)
	if ok && opener.Length != closer.Length && opener.CalcComsumption(closer) > 0 {
		p.pc.Set(tildeSpyKey, true)
	}
	return ok
}

var spied = goldmark.New(
	goldmark.WithExtensions(extension.Table),
	goldmark.WithParserOptions(parser.WithInlineParsers(util.Prioritized(tildeSpy{extension.NewStrikethroughParser()}, 500))),
)

// parse parses src as Render does.
func parse(md goldmark.Markdown, src string, opts ...parser.ParseOption) (ast.Node, []byte) {
	source := []byte(strings.ToValidUTF8(src, "\uFFFD"))
	return md.Parser().Parse(text.NewReader(source), opts...), source
}

// outline prints the parts of a tree that Render looks at, one node a
// line. Unlike ast.Node.Dump it leaves out positions, and the alignment of
// body cells, which Render takes from the header. Adjacent texts print as
// one: where goldmark splits them depends on how it went about pairing
// delimiters, which may differ when the result does not.
func outline(n ast.Node, src []byte) string {
	var lines []string
	var merged text.Segment // of the Text that lines ends with, if any
	_ = ast.Walk(n, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		indent := ""
		for p := n.Parent(); p != nil; p = p.Parent() {
			indent += "  "
		}
		line := indent + n.Kind().String()
		switch n := n.(type) {
		case *ast.Text:
			prev, ok := n.PreviousSibling().(*ast.Text)
			seg := n.Segment
			if ok && !prev.SoftLineBreak() && !prev.HardLineBreak() && prev.IsRaw() == n.IsRaw() && merged.Stop == seg.Start {
				seg.Start = merged.Start
				lines = lines[:len(lines)-1]
			}
			merged = seg
			line += fmt.Sprintf(" %q soft=%v hard=%v raw=%v", seg.Value(src), n.SoftLineBreak(), n.HardLineBreak(), n.IsRaw())
		case *ast.String:
			line += fmt.Sprintf(" %q raw=%v code=%v", n.Value, n.IsRaw(), n.IsCode())
		case *ast.Emphasis:
			line += fmt.Sprintf(" level=%d", n.Level)
		case *ast.Heading:
			line += fmt.Sprintf(" level=%d", n.Level)
		case *ast.Link:
			line += fmt.Sprintf(" %q", n.Destination)
		case *ast.Image:
			line += fmt.Sprintf(" %q", n.Destination)
		case *ast.AutoLink:
			line += fmt.Sprintf(" %q", n.URL(src))
		case *ast.List:
			line += fmt.Sprintf(" ordered=%v start=%d", n.IsOrdered(), n.Start)
		case *extast.Table:
			line += fmt.Sprintf(" %v", n.Alignments)
		case *extast.TableCell:
			if _, ok := n.Parent().(*extast.TableHeader); ok {
				line += fmt.Sprintf(" %v", n.Alignment)
			}
		case *ast.RawHTML:
			for i := range n.Segments.Len() {
				seg := n.Segments.At(i)
				line += fmt.Sprintf(" %q", seg.Value(src))
			}
		}
		if n.Type() == ast.TypeBlock && n.FirstChild() == nil && n.Kind() != extast.KindTableCell {
			for i := range n.Lines().Len() {
				seg := n.Lines().At(i)
				line += fmt.Sprintf(" %q", seg.Value(src))
			}
		}
		lines = append(lines, line)
		return ast.WalkContinue, nil
	})
	return strings.Join(lines, "\n") + "\n"
}

// knownDifference names the listed difference that explains why our tree
// for src (ours) differs from goldmark's (up), or returns "".
func knownDifference(src string, ours, up ast.Node, upSrc []byte) string {
	pc := parser.NewContext()
	parse(spied, src, parser.WithContext(pc))
	if pc.Get(tildeSpyKey) != nil {
		return diffTildeLengths
	}
	ourTables, upTables := tables(ours), tables(up)
	if ourTables+upTables == 0 {
		return ""
	}
	var reason string
	_ = ast.Walk(up, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		switch n := n.(type) {
		case *extast.TableHeader:
			for c := n.FirstChild(); c != nil && entering; c = c.NextSibling() {
				if c.Lines().Len() == 0 {
					reason = diffShortHeader
				}
			}
		case *ast.Paragraph, *ast.TextBlock, *ast.Heading:
			// goldmark stopped at a delimiter row in this paragraph (a
			// TextBlock is one in a tight list, and a setext underline
			// makes one a Heading).
			table, ok := n.PreviousSibling().(*extast.Table)
			if ok && entering && n.Kind() == ast.KindHeading && n.Lines().Len() > 0 && n.Lines().At(0).Start < table.FirstChild().Pos() {
				reason = diffHeadingAfterTable
			}
			for i := 1; i < n.Lines().Len() && entering && ourTables > upTables; i++ {
				seg := n.Lines().At(i)
				if v := seg.Value(upSrc); markdown.DelimiterRow(v) != nil || isBareDashes(string(v)) {
					reason = diffLaterTable
				}
			}
		}
		return ast.WalkContinue, nil
	})
	if reason != "" {
		return reason
	}
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimRight(line, " \t\r\v\f")
		switch {
		case strings.HasSuffix(line, `\|`):
			return diffTrailingEscapedPipe
		case strings.HasSuffix(line, "||"):
			return diffEmptyLastCell
		}
		if upTables > 0 && isBareDashes(strings.TrimLeft(line, " \t>")) {
			return diffBareDashes
		}
	}
	return ""
}

// isBareDashes reports whether line is a run of dashes and nothing else
// but white space, which goldmark may take for a delimiter row.
func isBareDashes(line string) bool {
	line = strings.TrimSpace(line)
	return line != "" && strings.Trim(line, "-") == ""
}

func tables(n ast.Node) int {
	count := 0
	_ = ast.Walk(n, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if _, ok := n.(*extast.Table); ok && entering {
			count++
		}
		return ast.WalkContinue, nil
	})
	return count
}

type gfmCase struct {
	name, md string
	// diff is "" where we match goldmark's extensions; otherwise the
	// known difference, and want is our output.
	diff, want string
}

var gfmCases = []gfmCase{
	// Tables.
	{name: "alignments", md: "| l | c | r | n |\n|:--|:-:|--:|---|\n| 1 | 2 | 3 | 4 |\n| long | long | long | long |"},
	{name: "escaped pipe", md: "| a | b |\n|---|---|\n| x \\| y | z |"},
	{name: "escaped pipe in code span", md: "| a | b |\n|---|---|\n| `x \\| y` | z |"},
	{name: "escaped pipes in one code span", md: "| a |\n|---|\n| `\\|p\\|q\\\\|r\\|` |"},
	{name: "escaped pipe in code span in header", md: "| `a\\|b` | c |\n| --- | --- |"},
	{name: "escaped pipe before code span", md: "| a \\| `b` `c\\|d` |\n|---|"},
	{name: "gfm example 200", md: "| f\\|oo  |\n| ------ |\n| b `\\|` az |\n| b **\\|** im |"},
	{name: "missing cells", md: "| a | b | c |\n|---|---|---|\n| 1 |\n| 1 | 2 |\n|\n"},
	{name: "extra cells", md: "| a | b |\n|---|---|\n| 1 | 2 | 3 | 4 |"},
	{name: "no outer pipes", md: "a | b\n--- | ---\n1 | 2"},
	{name: "gfm example 199", md: "| abc | defghi |\n:-: | -----------:\nbar | baz"},
	{name: "paragraph before", md: "intro line\nsecond *line*\n| a | b |\n|---|---|\n| 1 | 2 |"},
	{name: "paragraph before, hard break", md: "intro  \n| a |\n|---|"},
	{name: "paragraph before, backslash break", md: "intro\\\n| a |\n|---|"},
	{name: "delimiter count mismatch", md: "| abc | def |\n| --- |\n| bar |"},
	{name: "delimiter first", md: "|---|---|\n| a | b |"},
	{name: "single column", md: "| a |\n|---|\n| 1 |"},
	{name: "single column, no pipes", md: "a\n:-\nb"},
	{name: "empty cells", md: "| a | | c |\n|---|---|---|\n| | 2 | |\n||||"},
	{name: "empty header", md: "| |\n|-|\n| x |"},
	{name: "inline markup", md: "| **b** | *i* | `c` | [l](https://e.com) | ~~s~~ |\n|---|---|---|---|---|\n| <b>x</b> | &amp; | y | z | ~w~ |"},
	{name: "header only", md: "| a | b |\n|---|---|"},
	{name: "blank line ends table", md: "| a |\n|---|\n| 1 |\n\nafter"},
	{name: "heading ends table", md: "| a |\n|---|\n| 1 |\n# h"},
	{name: "in blockquote", md: "> | a | b |\n> |---|---|\n> | 1 | 2 |"},
	{name: "in list", md: "- | a | b |\n  |---|---|\n  | 1 | 2 |\n- next"},
	{name: "escaped leading pipe", md: "\\| a | b\n--|--"},
	{name: "tabs", md: "|\ta\t|\tb\t|\n|\t:-\t|\t-:\t|\n|\t1\t|\t2\t|"},
	{name: "crlf", md: "intro\r\n| a | b |\r\n|---|---|\r\n| 1 | 2 |\r\n"},
	{name: "spaced delimiter", md: "a | b\n :---: | ---: \nc | d"},
	{name: "bad delimiter", md: "a | b\n-:- | ---\nc | d"},
	{name: "delimiter with empty cell", md: "a | b\n--- | | ---\nc | d"},
	{name: "link reference above", md: "[r]: https://e.com\n| [a][r] |\n|---|"},
	{name: "not a table", md: "a | b\nc | d"},
	{name: "setext heading", md: "a | b\n---"},
	{name: "table then setext", md: "a | b\n-|-\nc\n---"},
	{name: "indented delimiter", md: "a | b\n    --|--\nc | d"},

	// Strikethrough.
	{name: "two and one", md: "~~Hi~~ Hello, ~there~ world!"},
	{name: "new paragraph", md: "This ~~has a\n\nnew paragraph~~."},
	{name: "three", md: "This will ~~~not~~~ strike."},
	{name: "three and two", md: "~~~a~~ and ~~b~~~"},
	{name: "four", md: "~~~~a~~~~"},
	{name: "unmatched", md: "unmatched ~~tilde and ~one"},
	{name: "inside words", md: "a~~b~~c and a~b~c"},
	{name: "spaces", md: "~~ a ~~ and ~ b ~"},
	{name: "code", md: "`~~code~~` and ~~`code`~~"},
	{name: "link", md: "[~~link~~](https://e.com/~x~) and https://e.com/~user~"},
	{name: "nested emphasis", md: "~~**bold** in~~, **~~in~~ bold**, *~a~*, ~~a *b~~ c*, ***~~x~~***"},
	{name: "nested strike", md: "~~a ~b~ c~~ and ~a ~~b~~ c~"},
	{name: "escaped", md: "\\~~a~~ and ~~a\\~~"},
	{name: "punctuation", md: "~~(a)~~, (~~a~~), ~~a~~.~~b~~"},
	{name: "across lines", md: "~~a\nb~~"},
	{name: "in table", md: "| ~~a~~ | ~b~ |\n|---|---|\n| ~~~c~~~ | d |"},

	// Known differences.
	{name: "two closed by one", md: "~~a~", diff: diffTildeLengths, want: "~~a~"},
	{name: "one closed by two", md: "~a~~", diff: diffTildeLengths, want: "~a~~"},
	{name: "closer skips shorter opener", md: "~~a ~b~~", diff: diffTildeLengths, want: "<s>a ~b</s>"},
	{name: "unequal tildes in table", md: "| ~~d~ |\n|---|", diff: diffTildeLengths, want: "<pre>~~d~</pre>"},
	{name: "short header", md: "| a |\n|---|---|\n| 1 | 2 |", diff: diffShortHeader, want: "| a |\n|---|---|\n| 1 | 2 |"},
	{name: "empty header row", md: "|\n|---|", diff: diffShortHeader, want: "|\n|---|"},
	{name: "delimiter as header", md: "a\n-|-\n-|-\nx", diff: diffShortHeader, want: "a\n\n<pre>- | -\n--+--\nx |</pre>"},
	{name: "later table", md: "| a | b |\n|---|\n| c | d |\n|---|---|\n| 1 | 2 |", diff: diffLaterTable,
		want: "| a | b |\n|---|\n\n<pre>c | d\n--+--\n1 | 2</pre>"},
	{name: "later table in tight list", md: "- a | b\n  |---|\n  c | d\n  |---|---|", diff: diffLaterTable,
		want: "• a | b\n   |---|\n<pre>c | d</pre>"},
	{name: "later table after bare dashes", md: "> a | b\n--\nc\n:-", diff: diffLaterTable, want: "<blockquote>a | b\n--\n\nc</blockquote>"},
	{name: "later table above setext", md: "~|-\n-|\n--|\n--", diff: diffLaterTable, want: "~|-\n\n<pre>-</pre>\n\n--"},
	{name: "trailing escaped pipe", md: "| a | b |\n|---|---|\n| 1 | 2 \\|", diff: diffTrailingEscapedPipe,
		want: "<pre>a | b\n--+----\n1 | 2 |</pre>"},
	{name: "empty last cell", md: "| a ||\n|---|", diff: diffEmptyLastCell, want: "| a ||\n|---|"},
	{name: "bare dashes, lazy", md: "> a\n--\nb", diff: diffBareDashes, want: "<blockquote>a\n--\nb</blockquote>"},
	{name: "bare dashes, list", md: "- a\n--\nb", diff: diffBareDashes, want: "• a\n   --\n   b"},
	{name: "bare dashes, setext", md: "a\n    --\nb\n---", diff: diffBareDashes, want: "<b>a\n--\nb</b>"},
	{name: "setext below table", md: "intro\n| a | b |\n|---|---|\n| 1 | 2 |\n---", diff: diffHeadingAfterTable,
		want: "intro\n\n<pre>a | b\n--+--\n1 | 2</pre>\n\n──────────"},
	{name: "setext below table in quote", md: "> a\n> b | c\n> -|-\n> ===", diff: diffHeadingAfterTable,
		want: "<blockquote>a\n\nb | c\n\n===</blockquote>"},
	{name: "setext, hard break", md: "intro  \n| a |\n|---|\nb\n---", diff: diffHeadingAfterTable,
		want: "intro\n\n<pre>a\n-\nb</pre>\n\n──────────"},
	{name: "setext, backslash", md: "intro\\\n| a |\n|---|\nb\n---", diff: diffHeadingAfterTable,
		want: "intro\\\n\n<pre>a\n-\nb</pre>\n\n──────────"},
	{name: "setext, crlf", md: "intro\r\n| a |\r\n|---|\r\nb\r\n---", diff: diffHeadingAfterTable,
		want: "intro\n\n<pre>a\n-\nb</pre>\n\n──────────"},
	{name: "setext, indented", md: "a\n    | b |\n    |---|\nc\n===", diff: diffHeadingAfterTable, want: "a\n\n<pre>b\n-\nc</pre>\n\n==="},
}

// TestGFMMatchesUpstream parses gfmCases with our extensions and with
// goldmark's, and wants the same tree but for the listed differences.
func TestGFMMatchesUpstream(t *testing.T) {
	for _, tc := range gfmCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Render(tc.md)
			if _, _, err := telegramtest.ParseHTML(got); err != nil {
				t.Errorf("Telegram would reject %q: %v", got, err)
			}
			ours, src := parse(gfmParser, tc.md)
			up, upSrc := parse(upstream, tc.md)
			o, u := outline(ours, src), outline(up, upSrc)
			if tc.diff == "" {
				if o != u {
					t.Errorf("tree differs from goldmark's for %q:\n--- ours\n%s--- goldmark\n%s", tc.md, o, u)
				}
				if r := render(upstream, tc.md); got != r {
					t.Errorf("Render(%q) = %q, with goldmark's extensions %q", tc.md, got, r)
				}
				return
			}
			if o == u {
				t.Errorf("%q: listed as %q, but the trees are the same", tc.md, tc.diff)
			}
			if reason := knownDifference(tc.md, ours, up, upSrc); reason != tc.diff {
				t.Errorf("knownDifference(%q) = %q, want %q", tc.md, reason, tc.diff)
			}
			if got != tc.want {
				t.Errorf("Render(%q) = %q, want %q", tc.md, got, tc.want)
			}
		})
	}
}

// FuzzGFMMatchesUpstream compares our trees with goldmark's on any input,
// and wants output Telegram accepts.
func FuzzGFMMatchesUpstream(f *testing.F) {
	for _, tc := range gfmCases {
		f.Add(tc.md)
	}
	for _, name := range []string{"table", "inline"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name+".md")); err == nil {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, md string) {
		if len(md) > 1<<14 {
			return
		}
		got := Render(md)
		if _, _, err := telegramtest.ParseHTML(got); err != nil {
			t.Fatalf("Telegram would reject %q: %v", got, err)
		}
		ours, src := parse(gfmParser, md)
		up, upSrc := parse(upstream, md)
		o, u := outline(ours, src), outline(up, upSrc)
		if o == u {
			if r := render(upstream, md); got != r {
				t.Errorf("Render(%q) = %q, with goldmark's extensions %q", md, got, r)
			}
		} else if knownDifference(md, ours, up, upSrc) == "" {
			t.Errorf("tree differs from goldmark's for %q:\n--- ours\n%s--- goldmark\n%s", md, o, u)
		}
	})
}

// TestNoGoldmarkExtensionDependency keeps goldmark/extension (and the
// regexps its init compiles) out of the daemon. Test files may import it.
func TestNoGoldmarkExtensionDependency(t *testing.T) {
	// go test puts its own GOROOT/bin first in the test's PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go tool to list the package's dependencies: %v", err)
	}
	const pkg = "github.com/latchd/latch/gateways/telegram/tgmd"
	out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != pkg {
		t.Fatalf("go list -deps %s gave no dependency list:\n%s", pkg, out)
	}
	for _, dep := range deps {
		if dep == "github.com/yuin/goldmark/extension" {
			t.Errorf("%s depends on %s; use gfm.go's extensions", pkg, dep)
		}
	}
	if !bytes.Contains(out, []byte("github.com/yuin/goldmark/extension/ast\n")) {
		t.Errorf("%s no longer depends on goldmark/extension/ast; is the list complete?", pkg)
	}
}
