package markdown

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// TestChunkHTMLByTheCallersMeasure: the limit is in the caller's measure
// (here code points, not Telegram's UTF-16 units), markup counted, and
// the chunks' visible text joins back to the input's.
func TestChunkHTMLByTheCallersMeasure(t *testing.T) {
	src := strings.Repeat("<b>bold 😀 words</b> and plain ones, ", 40)
	const limit = 100
	chunks := ChunkHTML(src, limit, utf8.RuneCountInString)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks of %d runes: not cut", len(chunks), utf8.RuneCountInString(src))
	}
	var joined strings.Builder
	for i, c := range chunks {
		if n := utf8.RuneCountInString(c); n > limit {
			t.Errorf("chunk %d is %d runes, limit %d", i, n, limit)
		}
		if strings.Count(c, "<b>") != strings.Count(c, "</b>") {
			t.Errorf("chunk %d is not well-formed: %q", i, c)
		}
		joined.WriteString(VisibleHTML(c))
	}
	if joined.String() != VisibleHTML(src) {
		t.Errorf("visible text differs:\n got %q\nwant %q", joined.String(), VisibleHTML(src))
	}
}

func TestTableLines(t *testing.T) {
	doc, src := Parse(New(), "| name | n |\n|:--|--:|\n| a | 1 |\n| bcd | 22 |\n")
	tbl, ok := doc.FirstChild().(*extast.Table)
	if !ok {
		t.Fatalf("parsed %T, want a table", doc.FirstChild())
	}
	got := TableLines(TableRows(tbl, func(n ast.Node) string { return string(n.Text(src)) }))
	want := []string{"name |  n", "-----+---", "a    |  1", "bcd  | 22"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("TableLines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
