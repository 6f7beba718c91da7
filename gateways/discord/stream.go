package discord

import (
	"strings"
	"unicode"
)

// A streaming answer is shown as the messages its text will end up as:
// the chunks (chunk, maxContent) that no later text can change are final,
// and the one after them grows until it is final too. Since text only
// grows while it streams, a final chunk is exactly the chunk the complete
// answer will have in its place, so the messages never need rewriting
// once the step ends — unless the step's final text is not the streamed
// one, which delivery repairs.

// streamChunks returns the messages a streaming answer shows now: the
// final chunks (blank ones left out, as Send leaves them out) and the
// growing one after them ("" when there is none to show yet).
func streamChunks(text string) (final []string, growing string) {
	return streamChunksN(text, maxContent)
}

// streamChunksN is streamChunks for chunks of limit code points.
func streamChunksN(text string, limit int) (final []string, growing string) {
	text = strings.ToValidUTF8(text, "\uFFFD")
	stable := stablePrefix(text)
	var done int
	if parts := chunk(stable, limit); len(parts) > 1 {
		done = len(parts) - 1 // the last chunk of stable may still grow
		for _, c := range parts[:done] {
			if !blank(c) {
				final = append(final, c)
			}
		}
	}
	if all := chunk(text, limit); len(all) > done && !blank(all[done]) {
		growing = all[done]
	}
	return final, growing
}

// stablePrefix is the longest prefix of text that chunks the same way
// whatever follows: every chunk of it but the last is a chunk of any
// longer text that starts with it. chunk looks at whole lines only when
// they open or close a code block, so the prefix is all of text unless its
// last line could still become such a line (or, being one, change what it
// opens); then that line is left out.
func stablePrefix(text string) string {
	start := strings.LastIndexByte(text, '\n') + 1
	if line := text[start:]; line == "" || settled(line) {
		return text
	}
	return text[:start]
}

// settled reports whether a line being written can no longer become a
// line that opens or closes a code block, nor one closesAt accepts: it has
// text other than spaces and backticks, and does not start like a fence.
func settled(line string) bool {
	return !isFenceLine(line) && strings.ContainsFunc(line, func(r rune) bool {
		return r != '`' && !unicode.IsSpace(r)
	})
}
