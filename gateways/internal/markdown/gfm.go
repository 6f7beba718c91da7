package markdown

// GitHub Flavored Markdown tables and strikethrough
// (https://github.github.com/gfm/, "Tables (extension)" and "Strikethrough
// (extension)"), built on goldmark's parser API and extast's node types.
// goldmark's own extension package would do, but importing it compiles
// linkify's URL regexps at every start (about 0.5 MB of memory), and we have
// no use for linkify.
//
// Where goldmark's extensions stray from GFM we follow GFM; the cases are
// listed in gfm_test.go. Nothing here does work before a parser is built.

import (
	"bytes"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// GFM is a goldmark.Extender adding tables and strikethrough to the parser.
// Rendering is left to each platform's renderer, so no HTML renderers are
// registered.
type GFM struct{}

// Extend adds GFM's parsers to m.
func (GFM) Extend(m goldmark.Markdown) {
	// A key per parser: it carries the cells whose code spans hold an
	// escaped pipe from the table transformer to pipeUnescaper.
	key := parser.NewContextKey()
	m.Parser().AddOptions(
		// goldmark's priorities for its extensions: a paragraph becomes a
		// table only after link reference definitions are taken out of it.
		parser.WithInlineParsers(util.Prioritized(strikethroughParser{}, 500)),
		parser.WithParagraphTransformers(util.Prioritized(tableTransformer{key}, 200)),
		parser.WithASTTransformers(util.Prioritized(pipeUnescaper{key}, 0)),
	)
}

// strikethroughParser reads ~text~ and ~~text~~. Runs of tildes become
// delimiters; goldmark pairs them up at the end of the block and
// tildeDelimiters decides which pairs strike.
type strikethroughParser struct{}

func (strikethroughParser) Trigger() []byte { return []byte{'~'} }

func (strikethroughParser) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	before := block.PrecendingCharacter()
	if before == '~' {
		// The rest of a run refused below stays text.
		return nil
	}
	line, seg := block.PeekLine()
	d := parser.ScanDelimiter(line, before, 1, tildeDelimiters{})
	if d == nil || d.OriginalLength > 2 {
		// Three or more tildes never strike.
		return nil
	}
	d.Segment = seg.WithStop(seg.Start + d.OriginalLength)
	block.Advance(d.OriginalLength)
	pc.PushDelimiter(d)
	return d
}

func (strikethroughParser) CloseBlock(parent ast.Node, pc parser.Context) {}

type tildeDelimiters struct{}

func (tildeDelimiters) IsDelimiter(b byte) bool { return b == '~' }

// CanOpenCloser pairs runs of the same length only: ~~a~ strikes nothing.
func (tildeDelimiters) CanOpenCloser(opener, closer *parser.Delimiter) bool {
	return opener.Char == closer.Char && opener.OriginalLength == closer.OriginalLength
}

func (tildeDelimiters) OnMatch(consumes int) ast.Node { return extast.NewStrikethrough() }

// tableTransformer turns a paragraph into a table from the first line that
// is a delimiter row under a header row of as many cells; lines above the
// header stay a paragraph.
type tableTransformer struct{ escapedPipes parser.ContextKey }

func (t tableTransformer) Transform(p *ast.Paragraph, reader text.Reader, pc parser.Context) {
	src := reader.Source()
	lines := p.Lines()
	for i := 1; i < lines.Len(); i++ {
		line := lines.At(i)
		aligns := DelimiterRow(line.Value(src))
		if aligns == nil {
			continue
		}
		header := rowCells(src, lines.At(i-1))
		if len(header) != len(aligns) {
			// Not a table here, but a later delimiter row may start one.
			continue
		}
		table := extast.NewTable()
		table.Alignments = aligns
		table.SetPos(lines.At(i - 1).Start)
		table.AppendChild(table, extast.NewTableHeader(t.row(src, header, aligns, lines.At(i-1), pc)))
		for j := i + 1; j < lines.Len(); j++ {
			table.AppendChild(table, t.row(src, rowCells(src, lines.At(j)), aligns, lines.At(j), pc))
		}
		parent := p.Parent()
		parent.InsertAfter(parent, p, table)
		if i > 1 {
			parent.InsertBefore(parent, p, paragraphAbove(p, i-1, src))
		}
		// p goes even when lines above the header stay: goldmark takes a
		// paragraph out of the tree for transformed, so a setext underline
		// right below the table is not made a heading of those lines,
		// which would land after the table.
		parent.RemoveChild(parent, p)
		return
	}
}

// paragraphAbove is a new paragraph of p's first n lines, trimmed as
// closing p would have trimmed them (the last one's line break would be
// parsed as one).
func paragraphAbove(p *ast.Paragraph, n int, src []byte) *ast.Paragraph {
	above := ast.NewParagraph()
	above.SetPos(p.Pos())
	above.SetBlankPreviousLines(p.HasBlankPreviousLines())
	for i := range n {
		line := p.Lines().At(i)
		line = line.TrimLeftSpace(src)
		if i == n-1 {
			line = line.TrimRightSpace(src)
		}
		above.Lines().Append(line)
	}
	return above
}

// row makes a table row of exactly len(aligns) cells: missing ones are
// empty, extra ones dropped.
func (t tableTransformer) row(src []byte, cells []text.Segment, aligns []extast.Alignment, line text.Segment, pc parser.Context) *extast.TableRow {
	row := extast.NewTableRow(aligns)
	row.SetPos(line.Start)
	for i, align := range aligns {
		cell := extast.NewTableCell()
		cell.Alignment = align
		if i < len(cells) {
			cell.SetPos(cells[i].Start)
			cell.Lines().Append(cells[i])
			v := cells[i].Value(src)
			if bytes.IndexByte(v, '`') >= 0 && bytes.Contains(v, []byte(`\|`)) {
				escaped, _ := pc.Get(t.escapedPipes).([]*extast.TableCell)
				pc.Set(t.escapedPipes, append(escaped, cell))
			}
		}
		row.AppendChild(row, cell)
	}
	return row
}

// rowCells splits a table row at its pipes into cell contents, trimmed. A
// pipe after a backslash is text, and a leading and a trailing pipe only
// bound the row: "| a | b |" and "a | b" both have two cells, "|" none.
func rowCells(src []byte, line text.Segment) []text.Segment {
	line = line.TrimLeftSpace(src)
	line = line.TrimRightSpace(src)
	start, stop := line.Start, line.Stop
	if start < stop && src[start] == '|' {
		start++
	}
	var cells []text.Segment
	from := start
	for i := start; i < stop; i++ {
		// src[i-1] is within the row: a pipe at line.Start was skipped.
		if src[i] == '|' && src[i-1] != '\\' {
			cells = append(cells, cellSegment(src, from, i))
			from = i + 1
		}
	}
	if from < stop {
		cells = append(cells, cellSegment(src, from, stop))
	}
	return cells
}

func cellSegment(src []byte, start, stop int) text.Segment {
	seg := text.NewSegment(start, stop)
	seg = seg.TrimLeftSpace(src)
	return seg.TrimRightSpace(src)
}

// DelimiterRow returns the column alignments a table's delimiter row sets
// (| :-- | :-: | --: | --- |), or nil if line is not one.
func DelimiterRow(line []byte) []extast.Alignment {
	if w, _ := util.IndentWidth(line, 0); w > 3 {
		// Indented code, were it not continuing a paragraph.
		return nil
	}
	line = trimDelimiterSpace(line)
	if bytes.IndexByte(line, '|') < 0 && bytes.IndexByte(line, ':') < 0 {
		// A bare run of dashes under a paragraph line is a setext
		// underline; goldmark leaves one in a paragraph only when it is a
		// lazy or indented continuation line, which GFM does not read as
		// a table.
		return nil
	}
	if len(line) > 0 && line[0] == '|' {
		line = line[1:]
	}
	if len(line) > 0 && line[len(line)-1] == '|' {
		line = line[:len(line)-1]
	}
	if len(line) == 0 {
		return nil
	}
	var aligns []extast.Alignment
	for {
		cell, rest, more := bytes.Cut(line, []byte{'|'})
		align, ok := delimiterCell(trimDelimiterSpace(cell))
		if !ok {
			return nil
		}
		aligns = append(aligns, align)
		if !more {
			return aligns
		}
		line = rest
	}
}

// delimiterCell reads one cell of a delimiter row: dashes with an optional
// colon at either end.
func delimiterCell(c []byte) (extast.Alignment, bool) {
	left := len(c) > 0 && c[0] == ':'
	if left {
		c = c[1:]
	}
	right := len(c) > 0 && c[len(c)-1] == ':'
	if right {
		c = c[:len(c)-1]
	}
	if len(c) == 0 {
		return 0, false
	}
	for _, b := range c {
		if b != '-' {
			return 0, false
		}
	}
	switch {
	case left && right:
		return extast.AlignCenter, true
	case left:
		return extast.AlignLeft, true
	case right:
		return extast.AlignRight, true
	}
	return extast.AlignNone, true
}

// trimDelimiterSpace trims the white space a delimiter row may hold around
// its cells and at its end. It leaves \v, as goldmark does there.
func trimDelimiterSpace(b []byte) []byte {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
	for len(b) > 0 && space(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && space(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// pipeUnescaper removes the backslash of \| in code spans of table cells.
// Elsewhere in a cell the inline parser resolves \| itself, but code spans
// keep backslashes, and GFM shows a pipe there. Other places that keep
// backslashes (autolinks, raw HTML) keep \| as written, as in goldmark.
type pipeUnescaper struct{ escapedPipes parser.ContextKey }

func (u pipeUnescaper) Transform(doc *ast.Document, reader text.Reader, pc parser.Context) {
	cells, _ := pc.Get(u.escapedPipes).([]*extast.TableCell)
	if cells == nil {
		return
	}
	pc.Set(u.escapedPipes, nil)
	src := reader.Source()
	for _, cell := range cells {
		_ = ast.Walk(cell, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if entering && n.Kind() == ast.KindCodeSpan {
				unescapePipes(n, src)
				return ast.WalkSkipChildren, nil
			}
			return ast.WalkContinue, nil
		})
	}
}

// unescapePipes splits the text of a code span around each \| and drops
// the backslash. The source is shared, so it cannot be edited instead.
func unescapePipes(span ast.Node, src []byte) {
	for c := span.FirstChild(); c != nil; c = c.NextSibling() {
		t, ok := c.(*ast.Text)
		if !ok {
			continue
		}
		for {
			i := bytes.Index(src[t.Segment.Start:t.Segment.Stop], []byte(`\|`))
			if i < 0 {
				break
			}
			at := t.Segment.Start + i
			span.InsertBefore(span, t, ast.NewRawTextSegment(t.Segment.WithStop(at)))
			t.Segment = t.Segment.WithStart(at + 1)
		}
	}
}
