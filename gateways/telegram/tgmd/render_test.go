package tgmd

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestRenderGolden renders every testdata/*.md and compares the result with
// the .html beside it. Run with -update to accept new output.
func TestRenderGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs in testdata (err %v)", err)
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".md")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := Render(string(src))
			golden := strings.TrimSuffix(in, ".md") + ".html"
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != strings.TrimSuffix(string(want), "\n") {
				t.Errorf("Render(%s) differs from %s:\n--- got\n%s\n--- want\n%s", in, golden, got, want)
			}
			if _, _, err := telegramtest.ParseHTML(got); err != nil {
				t.Errorf("Telegram would reject the output: %v", err)
			}
		})
	}
}

func TestRenderSafety(t *testing.T) {
	tests := []struct {
		name, md string
		want     string // a substring of the output
		notWant  string
	}{
		{"raw html escaped", `<b onclick="x">hi</b>`, "&lt;b onclick=&quot;x&quot;&gt;hi&lt;/b&gt;", "<b "},
		{"javascript link is text", `[x](javascript:alert(1))`, "x (javascript:alert(1))", "<a"},
		{"quote in href", `[x](https://e.com/"><b>)`, `<a href="https://e.com/%22%3E%3Cb%3E">x</a>`, `"><b>`},
		{"ampersand in href", `[x](https://e.com/?a=1&b=2)`, `href="https://e.com/?a=1&amp;b=2"`, ""},
		{"long href is text", "[x](https://e.com/" + strings.Repeat("a", 2000) + ")", "x (https://e.com/aaa", "<a"},
		{"uppercase scheme", `[x](HTTPS://E.COM)`, `<a href="HTTPS://E.COM">x</a>`, ""},
		{"scheme only", `[x](https://)`, "x (https://)", "<a"},
		{"no self nesting", `**a **b** c**`, "<b>a b c</b>", "<b><b>"},
		{"no code in link", "[`c`](https://e.com)", `<a href="https://e.com">c</a>`, "<code>"},
		{"no pre in quote", "> ```\n> x\n> ```", "<blockquote>x</blockquote>", "<pre>"},
		{"invalid utf8", "a\xffb", "a\uFFFDb", ""},
		{"nul", "a\x00b", "a\uFFFDb", "\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Render(tt.md)
			if !strings.Contains(got, tt.want) {
				t.Errorf("Render(%q) = %q, want it to contain %q", tt.md, got, tt.want)
			}
			if tt.notWant != "" && strings.Contains(got, tt.notWant) {
				t.Errorf("Render(%q) = %q, must not contain %q", tt.md, got, tt.notWant)
			}
			if _, _, err := telegramtest.ParseHTML(got); err != nil {
				t.Errorf("Telegram would reject %q: %v", got, err)
			}
		})
	}
}
