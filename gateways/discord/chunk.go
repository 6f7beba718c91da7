package discord

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// maxContent is Discord's limit on a message, in code points (the
	// unit Discord's API counts).
	maxContent = 2000
	fence      = "```"
	// fenceClose is what closes a code block cut by a chunk boundary.
	fenceClose = "\n" + fence
	// maxOpener bounds the opening line repeated at the top of a chunk
	// that continues a code block ("```go"); a longer one is shortened to
	// a bare fence.
	maxOpener = 24
)

// Break priorities: where chunk prefers to cut, best last.
const (
	breakNone = iota
	breakWord
	breakLine
	breakParagraph
)

// chunk cuts Markdown text into pieces of at most limit code points. It
// cuts between paragraphs where it can, else between lines, else between
// words, else between characters, always in the second half of a chunk, so
// no chunk is needlessly short. A ``` code block cut by a boundary is
// closed at the end of its chunk and opened again (with its language) at
// the start of the next, so each chunk renders on its own. Concatenating
// the chunks without those added fences gives the text back. Chunks may be
// blank; a sender skips them.
func chunk(text string, limit int) []string {
	var out []string
	for _, p := range chunkParts(text, limit) {
		out = append(out, p.prefix+p.body+p.suffix)
	}
	return out
}

// part is one chunk: a piece of the text with the fences added around it.
type part struct{ prefix, body, suffix string }

func chunkParts(text string, limit int) []part {
	rs := []rune(text)
	open, fenceLine := scanFences(rs)
	var out []part
	for i := 0; i < len(rs); {
		var p part
		if open[i] != "" {
			p.prefix = open[i] + "\n"
		}
		budget := limit - utf8.RuneCountInString(p.prefix)
		if inFence(open, i, i+budget) {
			budget -= utf8.RuneCountInString(fenceClose) // room to close the block
		}
		end := cut(rs, i, max(budget, 1))
		if ls := togglingLine(rs, fenceLine, end); ls > i {
			end = ls // never split a line that opens or closes a block
		}
		if open[end] != "" && end < len(rs) && (end == 0 || rs[end-1] == '\n') {
			// The block's own closing fence, if it fits in the room kept
			// for ours, ends this chunk instead.
			if lineEnd, ok := closesAt(rs, end); ok && lineEnd-end <= len(fence) {
				end = min(lineEnd+1, len(rs))
			}
		}
		p.body = string(rs[i:end])
		if end < len(rs) && open[end] != "" {
			if !strings.HasSuffix(p.body, "\n") {
				p.suffix = "\n"
			}
			p.suffix += fence
		}
		out = append(out, p)
		i = end
	}
	return out
}

// inFence reports whether any position in [from, to] is inside a code
// block.
func inFence(open []string, from, to int) bool {
	for j := from; j <= min(to, len(open)-1); j++ {
		if open[j] != "" {
			return true
		}
	}
	return false
}

// cut returns where a chunk starting at start ends: at the best break in
// the second half of budget, else at budget.
func cut(rs []rune, start, budget int) int {
	if len(rs)-start <= budget {
		return len(rs)
	}
	best, bestBrk := -1, breakNone
	for j := start + budget/2; j < start+budget; j++ {
		if brk := breakAfter(rs, j); brk > breakNone && brk >= bestBrk {
			best, bestBrk = j+1, brk
		}
	}
	if best > 0 {
		return best
	}
	return start + budget
}

// breakAfter is how good a cut right after rs[j] is.
func breakAfter(rs []rune, j int) int {
	switch {
	case rs[j] == '\n' && j > 0 && rs[j-1] == '\n':
		return breakParagraph
	case rs[j] == '\n':
		return breakLine
	case unicode.IsSpace(rs[j]):
		return breakWord
	}
	return breakNone
}

// fenceStates returns, for every position of rs (and one past the end),
// the opening line of the code block it is inside, or "". A line whose
// text starts with ``` (after up to three spaces) opens a block outside one
// and closes it inside one; the state changes after the line.
func fenceStates(rs []rune) []string {
	open, _ := scanFences(rs)
	return open
}

// scanFences is fenceStates plus, per position, the start of its line if
// that line opens or closes a block (or is a fence line ending the text),
// else -1.
func scanFences(rs []rune) (open []string, fenceLine []int) {
	open = make([]string, len(rs)+1)
	fenceLine = make([]int, len(rs)+1)
	state := ""
	lineStart := 0
	for i := 0; i <= len(rs); i++ {
		open[i] = state
		fenceLine[i] = -1
		if i < len(rs) && rs[i] != '\n' {
			continue
		}
		line := string(rs[lineStart:i])
		if isFenceLine(line) {
			before := state
			if state == "" {
				state = opener(strings.TrimLeft(line, " "))
			} else if strings.Trim(line, "` \t") == "" {
				state = ""
			}
			if state != before || i == len(rs) {
				for j := lineStart; j <= i; j++ {
					fenceLine[j] = lineStart
				}
			}
		}
		lineStart = i + 1
	}
	return open, fenceLine
}

// opener is the line that reopens a block: the fence and its language.
func opener(line string) string {
	line = strings.TrimRight(line, " \t\r")
	if utf8.RuneCountInString(line) > maxOpener || strings.Contains(strings.TrimLeft(line, "`"), "`") {
		return fence
	}
	return line
}

// togglingLine returns the start of the line around rs[at] if that line
// opens or closes a code block and at is inside it, else -1.
func togglingLine(rs []rune, fenceLine []int, at int) int {
	if at >= len(rs) || at == 0 || rs[at-1] == '\n' {
		return -1
	}
	return fenceLine[at]
}

func isFenceLine(line string) bool {
	trimmed := strings.TrimLeft(line, " ")
	return len(line)-len(trimmed) <= 3 && strings.HasPrefix(trimmed, fence)
}

// closesAt reports whether the line starting at rs[i] is a closing fence,
// and where it ends (its newline, or the end of the text).
func closesAt(rs []rune, i int) (int, bool) {
	end := i
	for end < len(rs) && rs[end] != '\n' {
		end++
	}
	line := strings.TrimSpace(string(rs[i:end]))
	return end, strings.HasPrefix(line, fence) && strings.Trim(line, "`") == ""
}

// escapeFences breaks up every run of three backticks with a zero-width
// space, so text shown inside a code block cannot end it.
func escapeFences(s string) string {
	for strings.Contains(s, fence) {
		s = strings.ReplaceAll(s, fence, "``\u200b`")
	}
	return s
}

// blank reports whether a chunk shows nothing: only white space and
// fences.
func blank(c string) bool {
	return strings.TrimSpace(strings.ReplaceAll(c, fence, "")) == ""
}
