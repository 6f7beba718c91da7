package tgmd

import (
	"fmt"
	"github.com/latchd/latch/gateways/internal/markdown"
	"strings"
	"testing"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// checkChunks asserts Chunk's contract for src cut at limit: every chunk
// within the limit and well-formed for Telegram, the visible text joining
// back to src's.
func checkChunks(t *testing.T, src string, limit int, chunks []string) {
	t.Helper()
	want, _, err := telegramtest.ParseHTML(src)
	if err != nil {
		t.Fatalf("the input itself is not valid Telegram HTML: %v\n%s", err, src)
	}
	eff := min(max(limit, markdown.MinLimit), MaxUnits)
	var joined strings.Builder
	for i, c := range chunks {
		if n := utf16Len(c); n > eff {
			t.Errorf("chunk %d is %d UTF-16 units, limit %d", i, n, eff)
		}
		plain, _, err := telegramtest.ParseHTML(c)
		if err != nil {
			t.Fatalf("chunk %d is not well-formed: %v\n%s", i, err, c)
		}
		if v := Visible(c); v != plain {
			t.Errorf("Visible(chunk %d) = %q, Telegram would show %q", i, v, plain)
		}
		joined.WriteString(plain)
	}
	if joined.String() != want {
		t.Errorf("visible text of the chunks differs from the input's:\n got %q\nwant %q", joined.String(), want)
	}
}

func TestChunkShortIsOneChunk(t *testing.T) {
	src := Render("hello **world**")
	if got := Chunk(src, MaxUnits); len(got) != 1 || got[0] != src {
		t.Errorf("Chunk = %q, want [%q]", got, src)
	}
	if got := Chunk("", MaxUnits); len(got) != 0 {
		t.Errorf("Chunk(\"\") = %q, want none", got)
	}
}

func TestChunkPrefersParagraphsThenLinesThenWords(t *testing.T) {
	para := strings.Repeat("word ", 50) // 250 units
	tests := []struct {
		name    string
		src     string
		wantEnd string // every chunk but the last ends with this
	}{
		{"paragraphs", strings.Repeat(para+"\n\n", 40), "\n\n"},
		{"lines", strings.Repeat(para+"\n", 40), "\n"},
		{"words", strings.Repeat("word ", 2000), " "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := Chunk(tt.src, MaxUnits)
			if len(chunks) < 2 {
				t.Fatalf("got %d chunks, want a split", len(chunks))
			}
			for i, c := range chunks[:len(chunks)-1] {
				if !strings.HasSuffix(c, tt.wantEnd) {
					t.Errorf("chunk %d ends with %q, want a cut after %q", i, c[max(0, len(c)-10):], tt.wantEnd)
				}
				if utf16Len(c) < MaxUnits/2 {
					t.Errorf("chunk %d is only %d units: cut too early", i, utf16Len(c))
				}
			}
			checkChunks(t, tt.src, MaxUnits, chunks)
		})
	}
}

func TestChunkReopensTags(t *testing.T) {
	var code strings.Builder
	for i := range 400 {
		fmt.Fprintf(&code, "\tx%d := a < b && c > d // %d\n", i, i)
	}
	md := "Intro **bold " + strings.Repeat("long bold text ", 400) + "end**\n\n```go\n" + code.String() + "```\n"
	src := Render(md)
	chunks := Chunk(src, MaxUnits)
	checkChunks(t, src, MaxUnits, chunks)
	reopenedPre := 0
	for i, c := range chunks {
		if i > 0 && strings.HasPrefix(c, `<pre><code class="language-go">`) {
			reopenedPre++
		}
		if strings.Contains(c, "&amp;&amp;") && strings.Count(c, "&") != strings.Count(c, ";") {
			t.Errorf("chunk %d cut an entity", i)
		}
	}
	if reopenedPre == 0 {
		t.Errorf("no chunk reopens the go code block:\n%q", chunks)
	}
}

func TestChunkSurrogatesAndEntities(t *testing.T) {
	for _, limit := range []int{64, 65, 66, 67, 100, 4096} {
		src := "<b>" + strings.Repeat("😀&amp;é&lt;", 700) + "</b>"
		checkChunks(t, src, limit, Chunk(src, limit))
	}
}

func TestChunkDropsTagsTooLongToReopen(t *testing.T) {
	href := "https://e.com/" + strings.Repeat("a", 1000)
	src := `<a href="` + href + `">` + strings.Repeat("x ", 200) + "</a>"
	chunks := Chunk(src, 300)
	checkChunks(t, src, 300, chunks)
	if len(chunks) < 2 {
		t.Fatalf("got %d chunks, want several", len(chunks))
	}
}

// FuzzChunk checks Chunk's contract on Render's output for any Markdown and
// any limit. The seed corpus is in testdata/fuzz/FuzzChunk.
func FuzzChunk(f *testing.F) {
	f.Add("hello **world**", uint16(4096))
	f.Fuzz(func(t *testing.T, md string, limit uint16) {
		if len(md) > 1<<16 {
			return
		}
		src := Render(md)
		checkChunks(t, src, int(limit), Chunk(src, int(limit)))
	})
}
