package telegramtest

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// utf16Len is the length of s in UTF-16 code units, Telegram's measure.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// htmlParser turns Telegram-HTML into plain text and entities. It follows
// the Bot API's rules (supported tags, balanced nesting, the four named
// entities plus numeric ones) and is stricter in one place: a bare '&' that
// does not start an entity is rejected where Telegram lets it through, so a
// missing escape shows up in tests.
type htmlParser struct {
	src   string
	out   strings.Builder
	units int
	stack []openTag
	ents  []Entity
}

type openTag struct {
	name  string
	ent   Entity
	start int
}

// ParseHTML parses Telegram HTML the way the fake does for parse_mode HTML
// and returns the text the user sees (before Telegram trims it) and its
// entities, or the error Telegram would describe as "can't parse entities".
// Tests of renderers use it to check their output.
func ParseHTML(src string) (plain string, entities []Entity, err error) {
	return parseHTML(src)
}

func parseHTML(src string) (string, []Entity, error) {
	p := &htmlParser{src: src}
	for i := 0; i < len(src); {
		var err error
		switch src[i] {
		case '<':
			i, err = p.tag(i)
		case '&':
			var r rune
			r, i, err = p.entity(i)
			p.write(r)
		default:
			r, size := utf8.DecodeRuneInString(src[i:])
			p.write(r)
			i += size
		}
		if err != nil {
			return "", nil, err
		}
	}
	if n := len(p.stack); n > 0 {
		return "", nil, fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", p.stack[n-1].name)
	}
	return p.out.String(), p.ents, nil
}

func (p *htmlParser) write(r rune) {
	p.out.WriteRune(r)
	p.units += utf16.RuneLen(r)
}

func isNameChar(c byte) bool {
	return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func (p *htmlParser) skipSpace(j int) int {
	for j < len(p.src) && strings.IndexByte(" \t\r\n", p.src[j]) >= 0 {
		j++
	}
	return j
}

// tag parses the start or end tag at src[i] == '<' and returns the offset
// after it.
func (p *htmlParser) tag(i int) (int, error) {
	j := i + 1
	closing := j < len(p.src) && p.src[j] == '/'
	if closing {
		j++
	}
	start := j
	for j < len(p.src) && isNameChar(p.src[j]) {
		j++
	}
	name := strings.ToLower(p.src[start:j])
	if closing {
		return p.endTag(i, j, name)
	}
	if name == "" {
		return 0, fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", p.src[i:start], i)
	}
	attrs, j, err := p.attributes(i, j)
	if err != nil {
		return 0, err
	}
	ent, ok := entityFor(name, attrs)
	if !ok {
		return 0, fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", name, i)
	}
	if n := len(p.stack); name == "code" && n > 0 && p.stack[n-1].name == "pre" {
		p.stack[n-1].ent.Language = ent.Language
		ent = Entity{}
	}
	p.stack = append(p.stack, openTag{name: name, ent: ent, start: p.units})
	return j, nil
}

func (p *htmlParser) endTag(i, j int, name string) (int, error) {
	j = p.skipSpace(j)
	if j >= len(p.src) || p.src[j] != '>' {
		return 0, fmt.Errorf("Can't find end of end tag at byte offset %d", i)
	}
	n := len(p.stack)
	if n == 0 {
		return 0, fmt.Errorf("Unexpected end tag at byte offset %d", i)
	}
	top := p.stack[n-1]
	if top.name != name {
		return 0, fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top.name, name)
	}
	p.stack = p.stack[:n-1]
	if length := p.units - top.start; length > 0 && top.ent.Type != "" {
		e := top.ent
		e.Offset, e.Length = top.start, length
		p.ents = append(p.ents, e)
	}
	return j + 1, nil
}

// attributes parses name="value" pairs up to the closing '>' of the tag
// starting at i.
func (p *htmlParser) attributes(i, j int) (map[string]string, int, error) {
	attrs := map[string]string{}
	unclosed := fmt.Errorf("Unclosed start tag at byte offset %d", i)
	for {
		j = p.skipSpace(j)
		switch {
		case j >= len(p.src):
			return nil, 0, unclosed
		case p.src[j] == '>':
			return attrs, j + 1, nil
		case strings.HasPrefix(p.src[j:], "/>"):
			return attrs, j + 2, nil
		}
		start := j
		for j < len(p.src) && isNameChar(p.src[j]) {
			j++
		}
		if start == j {
			return nil, 0, fmt.Errorf("Empty attribute name in the tag \"%s\" at byte offset %d", p.src[i+1:start], start)
		}
		name := strings.ToLower(p.src[start:j])
		j = p.skipSpace(j)
		if j >= len(p.src) || p.src[j] != '=' {
			attrs[name] = ""
			continue
		}
		j = p.skipSpace(j + 1)
		if j >= len(p.src) {
			return nil, 0, unclosed
		}
		var value string
		if q := p.src[j]; q == '"' || q == '\'' {
			end := strings.IndexByte(p.src[j+1:], q)
			if end < 0 {
				return nil, 0, unclosed
			}
			value, j = p.src[j+1:j+1+end], j+end+2
		} else {
			start := j
			for j < len(p.src) && p.src[j] != '>' && !unicode.IsSpace(rune(p.src[j])) {
				j++
			}
			value = p.src[start:j]
		}
		attrs[name] = decodeEntities(value)
	}
}

// entityFor maps a supported tag to its entity.
func entityFor(name string, attrs map[string]string) (Entity, bool) {
	switch name {
	case "b", "strong":
		return Entity{Type: "bold"}, true
	case "i", "em":
		return Entity{Type: "italic"}, true
	case "u", "ins":
		return Entity{Type: "underline"}, true
	case "s", "strike", "del":
		return Entity{Type: "strikethrough"}, true
	case "tg-spoiler":
		return Entity{Type: "spoiler"}, true
	case "span":
		return Entity{Type: "spoiler"}, attrs["class"] == "tg-spoiler"
	case "code":
		return Entity{Type: "code", Language: strings.TrimPrefix(attrs["class"], "language-")}, true
	case "pre":
		return Entity{Type: "pre"}, true
	case "blockquote":
		return Entity{Type: "blockquote"}, true
	case "a":
		return Entity{Type: "text_link", URL: attrs["href"]}, true
	case "tg-emoji":
		_, ok := attrs["emoji-id"]
		return Entity{Type: "custom_emoji"}, ok
	}
	return Entity{}, false
}

// entity decodes the HTML entity at src[i] == '&'.
func (p *htmlParser) entity(i int) (rune, int, error) {
	r, n := decodeEntity(p.src[i:])
	if n == 0 {
		return 0, 0, fmt.Errorf("Character '&' at byte offset %d does not start an HTML entity; escape it as \"&amp;\"", i)
	}
	return r, i + n, nil
}

// decodeEntity decodes &lt; &gt; &amp; &quot; and numeric entities at the
// start of s, returning the rune and the bytes consumed (0 if none).
func decodeEntity(s string) (rune, int) {
	semi := strings.IndexByte(s, ';')
	if semi < 2 || semi > 10 {
		return 0, 0
	}
	name := s[1:semi]
	switch name {
	case "lt":
		return '<', semi + 1
	case "gt":
		return '>', semi + 1
	case "amp":
		return '&', semi + 1
	case "quot":
		return '"', semi + 1
	}
	num, ok := strings.CutPrefix(name, "#")
	if !ok {
		return 0, 0
	}
	base := 10
	if hex, ok := strings.CutPrefix(strings.ToLower(num), "x"); ok {
		num, base = hex, 16
	}
	v, err := strconv.ParseUint(num, base, 32)
	if err != nil || v == 0 || !utf8.ValidRune(rune(v)) {
		return 0, 0
	}
	return rune(v), semi + 1
}

// decodeEntities decodes entities in an attribute value, leaving anything
// that is not one as it is.
func decodeEntities(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '&' {
			if r, n := decodeEntity(s[i:]); n > 0 {
				b.WriteRune(r)
				i += n
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// trimText strips leading and trailing white space as Telegram does and
// shifts the entities to match.
func trimText(text string, ents []Entity) (string, []Entity) {
	trimmed := strings.TrimLeftFunc(text, unicode.IsSpace)
	lead := utf16Len(text[:len(text)-len(trimmed)])
	trimmed = strings.TrimRightFunc(trimmed, unicode.IsSpace)
	total := utf16Len(trimmed)
	var out []Entity
	for _, e := range ents {
		start, end := max(e.Offset-lead, 0), min(e.Offset+e.Length-lead, total)
		if end > start {
			e.Offset, e.Length = start, end-start
			out = append(out, e)
		}
	}
	return trimmed, out
}
