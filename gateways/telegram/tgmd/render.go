// Package tgmd turns the Markdown a language model writes into the small
// HTML dialect Telegram's Bot API accepts (parse_mode HTML), and cuts that
// HTML into messages within Telegram's length limit without breaking its
// markup. It owns no network code: the Telegram adapter sends what it makes.
//
// Nothing of the model's text reaches Telegram as markup unless this package
// wrote the tag: raw HTML in the Markdown is escaped and shown as text, and
// links keep their target only for the schemes in allowedSchemes.
package tgmd

import (
	"bufio"
	"bytes"
	"github.com/latchd/latch/gateways/internal/markdown"
	"html"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	htmlrender "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

const (
	// maxHref bounds a link target. A longer one is shown as text: a tag
	// that long would eat the message budget and could not be reopened in
	// the next chunk.
	maxHref = 1024
	// maxLang bounds the language name of a code block.
	maxLang = 32
	// indentUnit indents each level of a nested list.
	indentUnit = "   "
	// rule stands in for a thematic break (---).
	rule = "──────────"
)

// allowedSchemes are the link schemes that become <a href>. Everything else
// (javascript:, data:, file:, relative paths) is rendered as text.
var allowedSchemes = []string{"http://", "https://", "tg://", "mailto:"}

var gfmParser = markdown.New()

// Render converts Markdown to Telegram HTML: b, i, s, code, pre (with
// <code class="language-x">), a href and blockquote, everything else
// escaped. Lists become "• " or "1. " lines, headings bold lines and tables
// preformatted text. The result is not cut to any length; see Chunk.
func Render(src string) string { return render(gfmParser, src) }

// render is Render with md's parser; tests pass goldmark's own extensions.
func render(md goldmark.Markdown, src string) string {
	doc, source := markdown.Parse(md, src)
	r := &renderer{src: source, open: map[string]int{}}
	r.blockChildren(doc, "\n\n")
	return strings.TrimRightFunc(r.b.String(), isSpace)
}

func isSpace(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '\r' }

// renderer writes one document. open counts the tags currently open, so a
// tag is never nested in itself and Telegram's nesting rules (no entity
// inside pre or code; no link, code or pre inside a blockquote or a link)
// can be followed.
type renderer struct {
	src    []byte
	b      bytes.Buffer
	open   map[string]int
	indent string // written after every line break inside a list item
}

func (r *renderer) in(tag string) bool { return r.open[tag] > 0 }

// openTag writes tag (e.g. `<a href="…">`) unless name is open already, and
// reports whether it did; pass the result to closeTag.
func (r *renderer) openTag(name, tag string) bool {
	if r.in(name) {
		return false
	}
	r.open[name]++
	r.b.WriteString(tag)
	return true
}

func (r *renderer) closeTag(name string, opened bool) {
	if opened {
		r.open[name]--
		r.b.WriteString("</" + name + ">")
	}
}

// newline starts a new line at the current list indentation.
func (r *renderer) newline() {
	r.b.WriteByte('\n')
	if !r.in("pre") {
		r.b.WriteString(r.indent)
	}
}

// dropIndent removes the indentation just written after a line break, for
// blocks (pre) that must start at the line's beginning.
func (r *renderer) dropIndent() {
	if r.indent != "" && bytes.HasSuffix(r.b.Bytes(), []byte("\n"+r.indent)) {
		r.b.Truncate(r.b.Len() - len(r.indent))
	}
}

// escaped writes Markdown text: backslash escapes and entity references
// resolved, then <, >, & and " escaped.
func (r *renderer) escaped(v []byte) { r.write(v, false) }

// raw writes text as it stands (code), with <, >, & and " escaped.
func (r *renderer) raw(v []byte) { r.write(v, true) }

func (r *renderer) write(v []byte, raw bool) {
	w := bufio.NewWriter(&r.b)
	if raw {
		htmlrender.DefaultWriter.RawWrite(w, v)
	} else {
		htmlrender.DefaultWriter.Write(w, v)
	}
	_ = w.Flush()
}

// str writes a Go string, escaped.
func (r *renderer) str(s string) { r.raw([]byte(s)) }

// blockChildren renders n's block children separated by sep.
func (r *renderer) blockChildren(n ast.Node, sep string) { markdown.Blocks(n, sep, r.newline, r.block) }

func (r *renderer) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n)
	case *ast.Heading:
		opened := r.openTag("b", "<b>")
		r.inlines(n)
		r.closeTag("b", opened)
	case *ast.ThematicBreak:
		r.b.WriteString(rule)
	case *ast.FencedCodeBlock:
		r.code(n, string(n.Language(r.src)))
	case *ast.CodeBlock:
		r.code(n, "")
	case *ast.Blockquote:
		opened := r.openTag("blockquote", "<blockquote>")
		r.blockChildren(n, "\n\n")
		r.closeTag("blockquote", opened)
	case *ast.List:
		r.list(n)
	case *ast.HTMLBlock:
		r.lines(n)
		if n.HasClosure() {
			r.newline()
			r.raw(n.ClosureLine.Value(r.src))
		}
	case *extast.Table:
		r.table(n)
	default:
		r.blockChildren(n, "\n\n")
	}
}

// lines writes a block's source lines as they stand (code), escaped,
// without their final line break.
func (r *renderer) lines(n ast.Node) {
	for i, line := range bytes.Split(markdown.Lines(n, r.src), []byte("\n")) {
		if i > 0 {
			r.newline()
		}
		r.raw(line)
	}
}

// code renders a code block. Telegram allows no pre inside a blockquote, so
// there the code becomes plain lines.
func (r *renderer) code(n ast.Node, lang string) {
	if r.in("blockquote") || r.in("pre") {
		r.lines(n)
		return
	}
	r.dropIndent()
	tag := "<pre>"
	if lang = cleanLang(lang); lang != "" {
		tag = `<pre><code class="language-` + lang + `">`
	}
	r.openTag("pre", tag)
	r.lines(n)
	if lang != "" {
		r.b.WriteString("</code>")
	}
	r.closeTag("pre", true)
}

// cleanLang keeps a code block's language only if it is a plausible name,
// so nothing odd lands in the class attribute.
func cleanLang(lang string) string {
	if lang == "" || len(lang) > maxLang {
		return ""
	}
	for _, c := range []byte(lang) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("+-_.#", c) >= 0) {
			return ""
		}
	}
	return lang
}

// list renders items as "• " or "N. " lines; nested content is indented.
func (r *renderer) list(n *ast.List) {
	markdown.Items(n, r.newline, func(marker string, item ast.Node) {
		r.b.WriteString(marker)
		outer := r.indent
		r.indent += indentUnit
		r.blockChildren(item, "\n")
		r.indent = outer
	})
}

// table renders a GFM table as aligned preformatted text.
func (r *renderer) table(n *extast.Table) {
	lines := markdown.TableLines(markdown.TableRows(n, func(cell ast.Node) string { return plainInline(cell, r.src) }))
	if r.in("blockquote") || r.in("pre") {
		for i, l := range lines {
			if i > 0 {
				r.newline()
			}
			r.str(l)
		}
		return
	}
	r.dropIndent()
	r.openTag("pre", "<pre>")
	r.str(strings.Join(lines, "\n"))
	r.closeTag("pre", true)
}

// inlines renders n's inline children.
func (r *renderer) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
	}
}

func (r *renderer) inline(n ast.Node) {
	if v, raw, brk, ok := markdown.Leaf(n, r.src); ok {
		r.write(v, raw)
		if brk {
			// A chat shows line breaks as the model wrote them.
			r.newline()
		}
		return
	}
	switch n := n.(type) {
	case *ast.CodeSpan:
		r.codeSpan(n)
	case *ast.Emphasis:
		name := "i"
		if n.Level >= 2 {
			name = "b"
		}
		opened := r.openTag(name, "<"+name+">")
		r.inlines(n)
		r.closeTag(name, opened)
	case *extast.Strikethrough:
		opened := r.openTag("s", "<s>")
		r.inlines(n)
		r.closeTag("s", opened)
	case *ast.Link:
		r.link(n, n.Destination)
	case *ast.Image:
		r.link(n, n.Destination)
	case *ast.AutoLink:
		dest := n.URL(r.src)
		if n.AutoLinkType == ast.AutoLinkEmail && !bytes.HasPrefix(bytes.ToLower(dest), []byte("mailto:")) {
			dest = append([]byte("mailto:"), dest...)
		}
		r.linkTo(dest, func() { r.escaped(n.Label(r.src)) }, string(n.Label(r.src)))
	case *ast.RawHTML:
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			r.raw(seg.Value(r.src))
		}
	default:
		r.inlines(n)
	}
}

// codeSpan renders `code`. Inside a link or a blockquote Telegram allows no
// code entity, so it becomes plain text there.
func (r *renderer) codeSpan(n *ast.CodeSpan) {
	opened := false
	if !r.in("a") && !r.in("blockquote") {
		opened = r.openTag("code", "<code>")
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		t, ok := c.(*ast.Text)
		if !ok {
			continue
		}
		v := t.Segment.Value(r.src)
		if v2, ok := bytes.CutSuffix(v, []byte("\n")); ok {
			v = append(append([]byte{}, v2...), ' ')
		}
		r.raw(v)
	}
	r.closeTag("code", opened)
}

// link renders a Markdown link or image with its children as the label.
func (r *renderer) link(n ast.Node, dest []byte) {
	label := plainInline(n, r.src)
	if label == "" {
		label = string(dest)
	}
	r.linkTo(dest, func() {
		if n.FirstChild() == nil {
			r.str(string(dest))
			return
		}
		r.inlines(n)
	}, label)
}

// linkTo writes label as a link to dest when dest may be one, and as
// "label (dest)" text otherwise.
func (r *renderer) linkTo(dest []byte, label func(), plainLabel string) {
	href := string(util.EscapeHTML(util.URLEscape(dest, true)))
	if allowedLink(string(dest)) && len(href) <= maxHref && !r.in("a") && !r.in("blockquote") {
		r.openTag("a", `<a href="`+href+`">`)
		label()
		r.closeTag("a", true)
		return
	}
	label()
	if plainLabel != string(dest) && len(dest) > 0 {
		r.str(" (" + string(dest) + ")")
	}
}

func allowedLink(dest string) bool {
	lower := strings.ToLower(strings.TrimSpace(dest))
	for _, s := range allowedSchemes {
		if strings.HasPrefix(lower, s) && len(lower) > len(s) {
			return true
		}
	}
	return false
}

// plainInline is the text of n's inline content without any markup.
func plainInline(n ast.Node, src []byte) string {
	sub := &renderer{src: src, open: map[string]int{}}
	// Pretend everything is open: nothing gets a tag.
	for _, t := range []string{"b", "i", "s", "code", "a", "blockquote", "pre"} {
		sub.open[t] = 1
	}
	sub.inlines(n)
	return strings.ReplaceAll(html.UnescapeString(sub.b.String()), "\n", " ")
}

// Escape escapes text for Telegram HTML: <, >, & and ".
func Escape(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;", "&", "&amp;", `"`, "&quot;").Replace(s)
}
