package tgmd

import (
	"unicode/utf16"

	"github.com/latchd/latch/gateways/internal/markdown"
)

// MaxUnits is Telegram's limit on a message, in UTF-16 code units. It
// applies after entity parsing; Chunk counts the markup too, to be safe.
const MaxUnits = 4096

// Chunk cuts Telegram HTML (well-formed, as Render makes it) into pieces of
// at most limit UTF-16 units, markup included; limit is clamped to
// [64, MaxUnits]. See markdown.ChunkHTML for where it cuts: every chunk is
// well-formed on its own and the chunks' visible text joins back to the
// input's. Chunks may be blank (only white space); a sender should skip
// those.
func Chunk(src string, limit int) []string {
	return markdown.ChunkHTML(src, min(max(limit, markdown.MinLimit), MaxUnits), utf16Len)
}

// Visible is the text Telegram shows for HTML: tags removed, entities
// decoded.
func Visible(src string) string { return markdown.VisibleHTML(src) }

// utf16Len is the length of s in UTF-16 code units, Telegram's measure.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
