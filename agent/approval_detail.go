package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/latchd/latch/agent/tools"
)

// ApprovalDetail is what an approval request shows of a call: for bash the
// whole command, line by line; for fetch the method, URL, headers and
// body; for write and edit the path and the text. Other tools get their
// summary. Characters that would not show as themselves are spelled out
// (see [Visible]), so what the owner reads is what runs.
func ApprovalDetail(name string, input json.RawMessage) string {
	var a struct {
		Command     string            `json:"command"`
		Path        string            `json:"path"`
		Content     string            `json:"content"`
		Old         string            `json:"old"`
		New         string            `json:"new"`
		URL         string            `json:"url"`
		Method      string            `json:"method"`
		Body        string            `json:"body"`
		ContentType string            `json:"content_type"`
		Headers     map[string]string `json:"headers"`
	}
	json.Unmarshal(input, &a)
	var b strings.Builder
	if server, tool, ok := strings.Cut(name, mcpSeparator); ok {
		// The arguments whole, credentials redacted: the server gets them
		// as they are, the chat need not show the secret to be judged.
		fmt.Fprintf(&b, "MCP server %q, tool %q\n%s", server, tool, tools.RedactJSON(input))
		return Visible(b.String())
	}
	switch name {
	case ToolBash:
		b.WriteString(a.Command)
	case ToolWrite:
		fmt.Fprintf(&b, "%s (%d bytes)\n%s", a.Path, len(a.Content), a.Content)
	case ToolEdit:
		fmt.Fprintf(&b, "%s\n--- replace\n%s\n+++ with\n%s", a.Path, a.Old, a.New)
	case ToolFetch:
		m := a.Method
		if m == "" {
			m = "GET"
		}
		b.WriteString(m + " " + a.URL)
		keys := make([]string, 0, len(a.Headers))
		for k := range a.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString("\n" + k + ": " + a.Headers[k])
		}
		if a.ContentType != "" {
			b.WriteString("\nContent-Type: " + a.ContentType)
		}
		if a.Body != "" {
			b.WriteString("\n\n" + a.Body)
		}
	case ToolSchedule:
		b.WriteString(scheduleLine(input))
	default:
		return Summary(name, input)
	}
	return Visible(b.String())
}

// Visible spells out the characters of s that would not show as
// themselves in a chat: control characters other than newline and tab,
// and format characters (bidirectional overrides, zero-width spaces and
// joiners, the byte order mark), which can make a command read
// differently from what runs. Each becomes "\u{XXXX}"; invalid UTF-8
// becomes "\x{XX}".
func Visible(s string) string {
	if !strings.ContainsFunc(s, hidden) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x{%02X}`, s[i])
		case hidden(r):
			fmt.Fprintf(&b, `\u{%04X}`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// hidden reports whether r would not show as itself: a control character
// other than newline and tab, or a format character (Unicode category Cf,
// which holds the bidirectional controls and the zero-width characters).
func hidden(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}
