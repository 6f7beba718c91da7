// Package markdown is the platform-neutral half of showing the Markdown a
// language model writes in a chat: parsing it (goldmark, with GitHub's
// tables and strikethrough built here, not goldmark/extension), laying out
// a table as aligned plain-text lines, and cutting rendered HTML into
// messages by the platform's own length measure without breaking its
// markup, and the pieces of the walk every renderer makes alike (Blocks,
// Items, Lines, Leaf). A platform's renderer (gateways/telegram/tgmd for
// Telegram's HTML, gateways/slack for mrkdwn) walks the tree Parse gives
// and writes only what the platform shows.
package markdown

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// New is a goldmark parser with GFM's tables and strikethrough (see GFM).
func New() goldmark.Markdown { return goldmark.New(goldmark.WithExtensions(GFM{})) }

// Parse parses src with md, invalid UTF-8 replaced, and returns the
// document with the source its segments point into.
func Parse(md goldmark.Markdown, src string) (doc ast.Node, source []byte) {
	source = []byte(strings.ToValidUTF8(src, "\uFFFD"))
	return md.Parser().Parse(text.NewReader(source)), source
}

// TableRows is a table's cells, each as cell makes it (a renderer gives
// the cell's plain text), and the alignment of each column.
func TableRows(n *extast.Table, cell func(ast.Node) string) (rows [][]string, aligns []extast.Alignment) {
	for row := n.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, cell(c))
			if tc, ok := c.(*extast.TableCell); ok && len(rows) == 0 {
				aligns = append(aligns, tc.Alignment)
			}
		}
		rows = append(rows, cells)
	}
	return rows, aligns
}

// TableLines lays a table out as lines of plain text, for a monospace
// block: cells padded to their column's width ("a | b"), right-aligned
// columns padded on the left, and a "--+--" rule under the header row.
func TableLines(rows [][]string, aligns []extast.Alignment) []string {
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var out []string
	for ri, row := range rows {
		cells := make([]string, len(widths))
		for i := range widths {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i < len(aligns) && aligns[i] == extast.AlignRight {
				cells[i] = pad + c
			} else {
				cells[i] = c + pad
			}
		}
		out = append(out, strings.TrimRight(strings.Join(cells, " | "), " "))
		if ri == 0 && len(rows) > 1 {
			dashes := make([]string, len(widths))
			for i, w := range widths {
				dashes[i] = strings.Repeat("-", max(w, 1))
			}
			out = append(out, strings.Join(dashes, "-+-"))
		}
	}
	return out
}

// Blocks walks n's block children, calling block on each and newline
// between two, once per line break in sep ("\n\n": a blank line between
// paragraphs, "\n": list items and quoted lines), so each renderer writes
// its own line break (with its own indentation or quote prefix).
func Blocks(n ast.Node, sep string, newline func(), block func(ast.Node)) {
	breaks := strings.Count(sep, "\n")
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c != n.FirstChild() {
			for range breaks {
				newline()
			}
		}
		block(c)
	}
}

// Items walks a list's items, calling item with the item's marker ("• ",
// or "N. " counting from the list's start) and newline between two.
func Items(n *ast.List, newline func(), item func(marker string, item ast.Node)) {
	num := n.Start
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c != n.FirstChild() {
			newline()
		}
		marker := "• "
		if n.IsOrdered() {
			marker = strconv.Itoa(num) + ". "
			num++
		}
		item(marker, c)
	}
}

// Lines is a block's source lines (a code or HTML block) as they stand,
// without the last line break.
func Lines(n ast.Node, src []byte) []byte {
	var b []byte
	segs := n.Lines()
	for i := range segs.Len() {
		seg := segs.At(i)
		b = append(b, seg.Value(src)...)
	}
	return bytes.TrimRight(b, "\n")
}

// Leaf is the text of a text leaf (ast.Text or ast.String): its bytes,
// whether they are raw (code, or an HTML-free literal: no escapes to
// resolve), and whether a line break follows. ok is false for any other
// node. Each renderer writes what Leaf gives in its own escaping.
func Leaf(n ast.Node, src []byte) (v []byte, raw, lineBreak, ok bool) {
	switch n := n.(type) {
	case *ast.Text:
		return n.Segment.Value(src), n.IsRaw(), n.SoftLineBreak() || n.HardLineBreak(), true
	case *ast.String:
		return n.Value, n.IsRaw() || n.IsCode(), false, true
	}
	return nil, false, false, false
}
