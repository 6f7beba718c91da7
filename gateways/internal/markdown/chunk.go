package markdown

import (
	"html"
	"strings"
	"unicode/utf8"
)

const (
	// atomReserve is room kept for the first text atom of a chunk (the
	// longest entity or a surrogate pair), so every chunk makes progress.
	atomReserve = 16
	// MinLimit is the smallest limit ChunkHTML works with: room for the
	// markup of a few open tags and some text.
	MinLimit = 64
)

// Break priorities: where ChunkHTML prefers to cut, best last.
const (
	breakNone = iota
	breakWord
	breakLine
	breakParagraph
)

type atomKind uint8

const (
	atomText atomKind = iota
	atomOpen
	atomClose
)

// atom is the unit ChunkHTML never cuts: one character, one entity (&amp;) or
// one tag.
type atom struct {
	kind  atomKind
	src   string
	name  string // tag name of an open or close tag
	units int    // length of src, in the caller's measure
	// closing is the length of an open tag's end tag.
	closing int
	brk     int // priority of a cut right after this atom
}

// frame is a tag open at some point of the input.
type frame struct {
	name, src string
	cost      int // of the tag and its end tag
	// emitted is false when the current chunk leaves the tag out (its
	// markup would not fit); its end tag is then left out too.
	emitted bool
}

// ChunkHTML cuts HTML (well-formed, as a renderer makes it) into pieces of
// at most limit as measure counts (Telegram: UTF-16 units), markup
// included; a limit under 64 is taken as 64. It cuts between paragraphs where it can, else between
// lines, else between words, else between characters; never inside a tag,
// an entity or a surrogate pair. Tags open at a cut are closed at the end of
// the chunk and reopened at the start of the next, so every chunk is
// well-formed on its own and the chunks' visible text joins back to the
// input's. A tag whose markup alone would take more than half a chunk is
// dropped from that chunk (its text stays). Chunks may be blank (only
// white space); a sender should skip those.
func ChunkHTML(src string, limit int, measure func(string) int) []string {
	limit = max(limit, MinLimit)
	atoms := tokenize(src, measure)
	var out []string
	var stack []frame
	for i := 0; i < len(atoms); {
		stack = fitStack(stack, limit)
		end := cutPoint(atoms, i, stack, limit)
		var chunk string
		chunk, stack = build(atoms, i, end, stack, limit)
		out = append(out, chunk)
		i = end
	}
	return out
}

// fitStack decides which of the tags open at the start of a chunk are
// reopened: all of them, unless their markup takes more than half the
// budget; then the costliest are left out.
func fitStack(stack []frame, limit int) []frame {
	stack = append([]frame(nil), stack...)
	total := 0
	for i := range stack {
		stack[i].emitted = true
		total += stack[i].cost
	}
	for total > limit/2 {
		worst := -1
		for i, f := range stack {
			if f.emitted && (worst < 0 || f.cost >= stack[worst].cost) {
				worst = i
			}
		}
		stack[worst].emitted = false
		total -= stack[worst].cost
	}
	return stack
}

// scan walks atoms[start:end] with the tags of stack open, calling visit
// after each atom that fits with the chunk's cost so far (markup to reopen
// and close included), and writing the atoms that fit to b if it is not
// nil. It returns the index of the first atom that does not fit (or end),
// and the stack there.
func scan(atoms []atom, start, end int, stack []frame, limit int, b *strings.Builder, visit func(end, cost int)) (int, []frame) {
	stack = append([]frame(nil), stack...)
	cost, text := 0, false
	for _, f := range stack {
		if f.emitted {
			cost += f.cost
		}
	}
	write := func(s string) {
		if b != nil {
			b.WriteString(s)
		}
	}
	j := start
	for ; j < end; j++ {
		a := atoms[j]
		switch a.kind {
		case atomText:
			if cost+a.units > limit {
				return j, stack
			}
			cost += a.units
			text = true
			write(a.src)
		case atomOpen:
			f := frame{name: a.name, src: a.src, cost: a.units + a.closing, emitted: true}
			reserve := 0
			if !text {
				reserve = atomReserve
			}
			if cost+f.cost+reserve > limit {
				if text {
					return j, stack
				}
				f.emitted = false // cannot fit even at the start: drop the tag
			}
			if f.emitted {
				cost += f.cost
				write(a.src)
			}
			stack = append(stack, f)
		case atomClose:
			if n := len(stack); n > 0 {
				if stack[n-1].emitted {
					write(a.src)
				}
				stack = stack[:n-1]
			}
		}
		visit(j+1, cost)
	}
	return j, stack
}

// cutPoint returns where the chunk starting at atoms[start] ends.
func cutPoint(atoms []atom, start int, stack []frame, limit int) int {
	best, bestBrk := -1, -1
	last := start
	stop, _ := scan(atoms, start, len(atoms), stack, limit, nil, func(end, cost int) {
		last = end
		brk := atoms[end-1].brk
		if cost >= limit/2 && brk >= bestBrk {
			best, bestBrk = end, brk
		}
	})
	if stop == len(atoms) {
		return len(atoms)
	}
	end := last
	if best > 0 && bestBrk > breakNone {
		end = best
	}
	if end == start { // cannot happen: the first atom always fits
		end = start + 1
	}
	// End tags right after the cut belong to this chunk: they cost nothing
	// more (their markup is counted already) and the next chunk would
	// start with an empty element otherwise.
	for end < len(atoms) && atoms[end].kind == atomClose {
		end++
	}
	return end
}

// build writes the chunk atoms[start:end] with stack open at its start and
// returns it with the stack open at its end. It repeats cutPoint's scan, so
// it drops exactly the tags that scan found too long.
func build(atoms []atom, start, end int, stack []frame, limit int) (string, []frame) {
	var b strings.Builder
	for _, f := range stack {
		if f.emitted {
			b.WriteString(f.src)
		}
	}
	_, stack = scan(atoms, start, end, stack, limit, &b, func(int, int) {})
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i].emitted {
			b.WriteString("</" + stack[i].name + ">")
		}
	}
	return b.String(), stack
}

// tokenize splits HTML into atoms, measured, and marks the break priority
// after each.
func tokenize(s string, measure func(string) int) []atom {
	var atoms []atom
	for i := 0; i < len(s); {
		a := atom{kind: atomText}
		switch s[i] {
		case '<':
			if end := strings.IndexByte(s[i:], '>'); end > 0 {
				a.src = s[i : i+end+1]
				a.kind, a.name = tagOf(a.src)
			}
		case '&':
			if end := strings.IndexByte(s[i:], ';'); end > 0 && end <= 10 {
				a.src = s[i : i+end+1]
			}
		}
		if a.src == "" {
			_, size := utf8.DecodeRuneInString(s[i:])
			a.src = s[i : i+size]
		}
		a.units = measure(a.src)
		if a.kind == atomOpen {
			a.closing = measure("</" + a.name + ">")
		}
		atoms = append(atoms, a)
		i += len(a.src)
	}
	for i := range atoms {
		if atoms[i].kind != atomText {
			continue
		}
		switch atoms[i].src {
		case "\n":
			atoms[i].brk = breakLine
			if prev := lastText(atoms, i); prev >= 0 && atoms[prev].src == "\n" {
				atoms[i].brk = breakParagraph
			}
		case " ", "\t":
			atoms[i].brk = breakWord
		}
	}
	return atoms
}

// lastText is the index of the text atom before i, skipping tags, or -1.
func lastText(atoms []atom, i int) int {
	for j := i - 1; j >= 0; j-- {
		if atoms[j].kind == atomText {
			return j
		}
	}
	return -1
}

// tagOf classifies "<name …>" or "</name>".
func tagOf(tag string) (atomKind, string) {
	kind := atomOpen
	body := tag[1 : len(tag)-1]
	if rest, ok := strings.CutPrefix(body, "/"); ok {
		kind, body = atomClose, rest
	}
	name, _, _ := strings.Cut(body, " ")
	return kind, strings.ToLower(strings.TrimSpace(name))
}

// VisibleHTML is the text HTML shows: tags removed, entities decoded.
func VisibleHTML(src string) string {
	var b strings.Builder
	for _, a := range tokenize(src, func(string) int { return 0 }) {
		if a.kind == atomText {
			b.WriteString(a.src)
		}
	}
	return html.UnescapeString(b.String())
}
