package slack

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/util"

	"github.com/latchd/latch/gateways/internal/markdown"
)

// escaper applies Slack's three escapes
// (https://api.slack.com/reference/surfaces/formatting#escaping): with
// every <, > and & escaped, text can hold no control sequence — no
// <!channel>, <!here>, <@U…> mention and no <url|label> link whose label
// hides where it goes.
var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func escape(s string) string { return escaper.Replace(s) }

// md is built at the first use: a daemon without [slack] pays nothing.
var md = sync.OnceValue(markdown.New)

// toMrkdwn renders the model's (or the Hub's) Markdown as Slack mrkdwn:
// bold, italics, strikethrough, code, quotes and lists as Slack shows
// them, headings bold, tables as aligned preformatted text, and a link as
// its label followed by its address, so that none is disguised. Every
// piece of text is escaped.
func toMrkdwn(src string) string {
	doc, source := markdown.Parse(md(), src)
	r := &mrkdwn{src: source}
	r.blocks(doc, "\n\n")
	return strings.TrimRight(r.b.String(), "\n ")
}

type mrkdwn struct {
	b      strings.Builder
	src    []byte
	prefix string // written after each line break: list indentation, "> "
}

func (r *mrkdwn) newline() { r.b.WriteString("\n" + r.prefix) }

// text writes Markdown text with its backslash escapes and entity
// references resolved, escaped for Slack.
func (r *mrkdwn) text(v []byte) {
	v = util.UnescapePunctuations(v)
	v = util.ResolveNumericReferences(v)
	v = util.ResolveEntityNames(v)
	r.b.WriteString(escape(string(v)))
}

func (r *mrkdwn) raw(v []byte) { r.b.WriteString(escape(string(v))) }

func (r *mrkdwn) blocks(n ast.Node, sep string) { markdown.Blocks(n, sep, r.newline, r.block) }

func (r *mrkdwn) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n)
	case *ast.Heading:
		r.wrap("*", n)
	case *ast.ThematicBreak:
		r.b.WriteString("──────────")
	case *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
		r.pre(string(markdown.Lines(n, r.src)))
	case *ast.Blockquote:
		outer := r.prefix
		r.prefix += "> "
		r.b.WriteString("> ")
		r.blocks(n, "\n")
		r.prefix = outer
	case *ast.List:
		markdown.Items(n, r.newline, func(marker string, item ast.Node) {
			r.b.WriteString(marker)
			outer := r.prefix
			r.prefix += "    "
			r.blocks(item, "\n")
			r.prefix = outer
		})
	case *extast.Table:
		r.pre(strings.Join(markdown.TableLines(markdown.TableRows(n, func(c ast.Node) string {
			return string(c.Text(r.src)) //nolint:staticcheck // plain cell text is what a table shows
		})), "\n"))
	default:
		r.blocks(n, "\n\n")
	}
}

// pre writes a preformatted block.
func (r *mrkdwn) pre(s string) {
	r.b.WriteString("```")
	r.newline()
	for i, l := range strings.Split(s, "\n") {
		if i > 0 {
			r.newline()
		}
		r.raw([]byte(l))
	}
	r.newline()
	r.b.WriteString("```")
}

func (r *mrkdwn) wrap(mark string, n ast.Node) {
	r.b.WriteString(mark)
	r.inlines(n)
	r.b.WriteString(mark)
}

func (r *mrkdwn) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
	}
}

func (r *mrkdwn) inline(n ast.Node) {
	if v, raw, brk, ok := markdown.Leaf(n, r.src); ok {
		if raw {
			r.raw(v)
		} else {
			r.text(v)
		}
		if brk {
			r.newline()
		}
		return
	}
	switch n := n.(type) {
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Segment.Value(r.src))
			} else if s, ok := c.(*ast.String); ok {
				b.Write(s.Value)
			}
		}
		if code := b.String(); strings.Contains(code, "`") {
			r.raw([]byte(code))
		} else {
			r.b.WriteString("`" + escape(code) + "`")
		}
	case *ast.Emphasis:
		mark := "_"
		if n.Level >= 2 {
			mark = "*"
		}
		r.wrap(mark, n)
	case *extast.Strikethrough:
		r.wrap("~", n)
	case *ast.Link:
		r.link(n, n.Destination)
	case *ast.Image:
		r.link(n, n.Destination)
	case *ast.AutoLink:
		r.raw(n.URL(r.src))
	case *ast.RawHTML:
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			r.raw(seg.Value(r.src))
		}
	default:
		r.inlines(n)
	}
}

// link shows a link's label, then its address in brackets unless the
// label is the address: Slack links a bare address itself.
func (r *mrkdwn) link(n ast.Node, dest []byte) {
	start := r.b.Len()
	r.inlines(n)
	label := r.b.String()[start:]
	if d := escape(string(dest)); d != "" && d != label {
		r.b.WriteString(" (" + d + ")")
	}
}

// chunk cuts mrkdwn into messages of at most limit characters: at a
// paragraph, else a line, else a space, else anywhere but inside an
// escape; a code block cut in two is closed and opened again.
func chunk(s string, limit int) []string {
	const fence = "```"
	var out []string
	open := false
	for {
		prefix := ""
		if open {
			prefix = fence + "\n"
		}
		if utf8.RuneCountInString(prefix+s) <= limit {
			out = append(out, prefix+s)
			return out
		}
		cut := cutPoint(s, limit-utf8.RuneCountInString(prefix)-len("\n"+fence))
		piece := s[:cut]
		inside := open != (strings.Count(piece, fence)%2 == 1)
		text := prefix + strings.TrimRight(piece, "\n ")
		if inside {
			text += "\n" + fence
		}
		out = append(out, text)
		open = inside
		s = strings.TrimLeft(s[cut:], "\n ")
		if s == "" {
			return out
		}
	}
}

// cutPoint is the byte offset to cut s at so the piece before it has at
// most room characters.
func cutPoint(s string, room int) int {
	end, n := 0, 0
	for end < len(s) && n < room {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
		n++
	}
	head := s[:end]
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(head, sep); i > len(head)/2 {
			return i + len(sep)
		}
	}
	// Not inside an escape (&amp; &lt; &gt;).
	if i := strings.LastIndexByte(head, '&'); i >= 0 && i > len(head)-5 && !strings.Contains(head[i:], ";") && i > 0 {
		return i
	}
	return end
}

// controlSeq matches one of Slack's control sequences in a message text
// (compiled at the first use).
var controlSeq = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<([^<>]*)>`) })

// fromMrkdwn is the text of a message as its writer typed it: links as
// their address (with the label, if any, before it), mentions as Slack
// names them, and the escapes undone.
func fromMrkdwn(s string) string {
	s = controlSeq().ReplaceAllStringFunc(s, func(seq string) string {
		inner := seq[1 : len(seq)-1]
		target, label, hasLabel := strings.Cut(inner, "|")
		switch {
		case strings.HasPrefix(target, "@"), strings.HasPrefix(target, "#"):
			if hasLabel {
				return target[:1] + label
			}
			return seq
		case strings.HasPrefix(target, "!"):
			if hasLabel {
				return label
			}
			return "@" + target[1:]
		case hasLabel && label != target && label != strings.TrimPrefix(strings.TrimPrefix(target, "mailto:"), "http://") &&
			label != strings.TrimPrefix(target, "https://"):
			return label + " (" + target + ")"
		}
		return strings.TrimPrefix(target, "mailto:")
	})
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}
