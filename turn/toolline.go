package turn

import (
	"fmt"
	"strings"
	"time"
)

// Verbosity levels: how much of a turn's tool use a chat sees (the
// verbosity setting of a platform's section).
const (
	// VerbosityQuiet shows only answers, approvals and files.
	VerbosityQuiet = "quiet"
	// VerbosityNormal adds one line per tool call.
	VerbosityNormal = "normal"
	// VerbosityVerbose also shows the first lines of a failed call's error.
	VerbosityVerbose = "verbose"
)

// ParseVerbosity reads a verbosity setting: case and surrounding space do
// not matter, "" is normal; ok is false for an unknown one, which is then
// normal too (the caller warns).
func ParseVerbosity(s string) (v string, ok bool) {
	switch v = strings.ToLower(strings.TrimSpace(s)); v {
	case VerbosityQuiet, VerbosityNormal, VerbosityVerbose:
		return v, true
	case "":
		return VerbosityNormal, true
	}
	return VerbosityNormal, false
}

const (
	// maxSummaryRunes bounds the call summary on a tool line.
	maxSummaryRunes = 120
	// maxErrorRunes bounds the error under a failed call: one line at
	// normal verbosity, a few at verbose.
	maxErrorRunes        = 120
	maxVerboseErrorRunes = 1000
	maxVerboseErrorLines = 8
)

// LineStyle is how a platform marks up a tool line; a nil func shows its
// text as is.
type LineStyle struct {
	// Name shows the tool's name (Discord escapes its Markdown).
	Name func(string) string
	// Code shows the call's summary and its error (Discord: inline code,
	// so that Markdown in a command does not render).
	Code func(string) string
}

func (s LineStyle) name(t string) string { return apply(s.Name, t) }
func (s LineStyle) code(t string) string { return apply(s.Code, t) }

func apply(f func(string) string, s string) string {
	if f == nil {
		return s
	}
	return f(s)
}

// ToolLine is the text of a tool call's line: "⚙ bash: make test" while it
// runs, "✓ bash: make test · 1.2s" or "✗ …" once it ended. A failed call
// adds its error: the first line at normal verbosity, the first lines at
// verbose (a denied call's reason only at verbose). A successful call's
// output is not in ToolResult, so it is never shown.
func ToolLine(c ToolCall, r *ToolResult, verbosity string, style LineStyle) string {
	line := style.name(c.Name)
	if s := summaryLine(c.Summary); s != "" {
		line += ": " + style.code(Clip(s, maxSummaryRunes))
	}
	if r == nil {
		return "⚙ " + line
	}
	mark := "✓ "
	if r.Err != nil || r.Denied {
		mark = "✗ "
	}
	line = mark + line
	if r.Denied {
		line += " · denied"
	} else {
		line += " · " + Seconds(r.Duration)
	}
	if r.Err == nil || r.Denied && verbosity != VerbosityVerbose {
		return line
	}
	msg := r.Err.Error()
	if verbosity == VerbosityVerbose {
		lines := strings.Split(msg, "\n")
		lines = lines[:min(len(lines), maxVerboseErrorLines)]
		return line + "\n" + style.code(Clip(strings.Join(lines, "\n"), maxVerboseErrorRunes))
	}
	first, _, _ := strings.Cut(msg, "\n")
	return line + "\n" + style.code(Clip(first, maxErrorRunes))
}

// summaryLine joins a summary's lines so that it fits on one, marking
// where each line ended.
func summaryLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ⏎ ")), " ")
}

// Seconds formats a tool call's duration for its line: 0.4s, 12.3s, 2m05s.
func Seconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
