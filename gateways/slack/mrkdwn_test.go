package slack

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestMrkdwnInjection: nothing the model writes becomes a control
// sequence — no special mention, user mention or disguised link.
func TestMrkdwnInjection(t *testing.T) {
	for in, want := range map[string]string{
		"<!channel> <!here> <@U123> <!subteam^S1>": "&lt;!channel&gt; &lt;!here&gt; &lt;@U123&gt; &lt;!subteam^S1&gt;",
		"<http://evil.example|bank.example>":       "http://evil.example|bank.example", // an autolink, shown whole
		"[bank.example](http://evil.example)":      "bank.example (http://evil.example)",
		"[x](http://a.example/?q=<!here>)":         "x (http://a.example/?q=&lt;!here&gt;)",
		"`<!channel>` & **bold** _it_ ~~gone~~":    "`&lt;!channel&gt;` &amp; *bold* _it_ ~gone~",
		"# Title\n\n> quoted <@U1>":                "*Title*\n\n> quoted &lt;@U1&gt;",
		"```\n<!here>\n```":                        "```\n&lt;!here&gt;\n```",
		"- a\n- b":                                 "• a\n• b",
		"&lt;!here&gt; \\<!here>":                  "&lt;!here&gt; &lt;!here&gt;",
	} {
		if got := toMrkdwn(in); got != want {
			t.Errorf("toMrkdwn(%q) = %q, want %q", in, got, want)
		}
		// A quote's ">" opens no control sequence; a "<" would.
		if strings.Contains(toMrkdwn(in), "<") {
			t.Errorf("toMrkdwn(%q) holds a raw <", in)
		}
	}
	if got := escape("a<b>&c"); got != "a&lt;b&gt;&amp;c" {
		t.Errorf("escape = %q", got)
	}
}

// TestChunk: every piece within the limit, code blocks closed and opened
// again, no escape cut, nothing lost.
func TestChunk(t *testing.T) {
	src := "```\n" + strings.Repeat("line &amp; more\n", 600) + "```\n\n" + strings.Repeat("word ", 2000)
	parts := chunk(src, maxText)
	if len(parts) < 3 {
		t.Fatalf("%d parts", len(parts))
	}
	var all strings.Builder
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > maxText {
			t.Errorf("part %d has %d characters", i, n)
		}
		if strings.Count(p, "```")%2 != 0 {
			t.Errorf("part %d leaves a code block open", i)
		}
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(p, "&amp;", ""), "&lt;", ""), "&") {
			t.Errorf("part %d cuts an escape", i)
		}
		all.WriteString(strings.ReplaceAll(p, "```", ""))
	}
	if strings.Join(strings.Fields(all.String()), "") != strings.Join(strings.Fields(strings.ReplaceAll(src, "```", "")), "") {
		t.Error("text lost")
	}
	hard := chunk(strings.Repeat("&amp;", 2000), 4000)
	for _, p := range hard {
		if strings.Count(p, "&") != strings.Count(p, "&amp;") {
			t.Errorf("an escape is cut: %q…", p[len(p)-8:])
		}
	}
}

// TestFromMrkdwn: a message's text as its writer typed it.
func TestFromMrkdwn(t *testing.T) {
	for in, want := range map[string]string{
		"a &lt;b&gt; &amp; c":                 "a <b> & c",
		"<https://example.com>":               "https://example.com",
		"<https://example.com|example.com>":   "https://example.com",
		"<https://evil.example|bank.example>": "bank.example (https://evil.example)",
		"<mailto:a@b.c|a@b.c>":                "a@b.c",
		"<!here> <@U1> <#C1|general>":         "@here <@U1> #general",
	} {
		if got := fromMrkdwn(in); got != want {
			t.Errorf("fromMrkdwn(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCursor: redeliveries and what the history holds are seen; the
// owner's conversation outlives a flood of strangers.
func TestCursor(t *testing.T) {
	var c cursor
	c.add("T/D1", "1700000000.000001", true)
	c.markOwners(map[string]bool{"T/D1": true})
	for i := range 10000 {
		c.add("T/DX"+strings.Repeat("x", i%50), "1700000100.000001", true)
	}
	if len(c.Chats) > maxTracked || !c.seen("T/D1", "1700000000.000001", true) {
		t.Fatalf("cursor %+v", c)
	}
	if c.seen("T/D1", "1700000000.000002", true) {
		t.Error("a new message is taken for seen")
	}
	for i := range 2 * maxKeys {
		c.add("T/D1", "1700001000."+strings.Repeat("0", 5)+string(rune('0'+i%10)), true)
	}
	if !c.seen("T/D1", "1700000000.000001", true) {
		t.Error("an old message, long past the redelivery window, is not seen")
	}
	if n := len(parseCursor(c.encode()).Chats); n != len(c.Chats) {
		t.Errorf("round trip: %d chats", n)
	}
}
