package turn

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Clip cuts s to at most n runes, the last of them "…" when it cut.
func Clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// OneLine is s with every run of white space (newlines too) made one
// space, clipped to n runes: a name or a summary on one line.
func OneLine(s string, n int) string {
	return Clip(strings.Join(strings.Fields(s), " "), n)
}

// ClipMiddle returns s whole if it has at most n runes. Otherwise it keeps
// the head and the tail, joined by a line saying how many characters are
// left out, so that a request never hides part of a command without
// saying so; left is that count (0 when s is whole).
func ClipMiddle(s string, n int) (shown string, left int) {
	total := utf8.RuneCountInString(s)
	if total <= n {
		return s, 0
	}
	r := []rune(s)
	marker := func(k int) string { return fmt.Sprintf("\n… %d characters not shown …\n", k) }
	keep := max(n-utf8.RuneCountInString(marker(total)), 2)
	head, tail := keep*2/3, keep-keep*2/3
	left = total - head - tail
	return string(r[:head]) + marker(left) + string(r[total-tail:]), left
}
