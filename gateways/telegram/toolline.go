package telegram

import (
	"strings"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/gateways/internal/turnrender"
)

const (
	// maxSummaryRunes bounds the call summary on a tool line.
	maxSummaryRunes = 120
	// maxErrorRunes bounds the error under a failed call: one line at
	// normal verbosity, a few at verbose.
	maxErrorRunes        = 120
	maxVerboseErrorRunes = 1000
	maxVerboseErrorLines = 8
)

// toolLine is the text of a tool call's line: "⚙ bash: make test" while it
// runs, "✓ bash: make test · 1.2s" or "✗ …" once it ended. A failed call
// adds its error: the first line at normal verbosity, the first lines at
// verbose. (A successful call's output is not in agent.ToolResult, so it
// is never shown.)
func toolLine(c agent.ToolCall, r *agent.ToolResult, verbosity string) string {
	line := c.Name
	if s := oneLine(c.Summary); s != "" {
		line += ": " + clipRunes(s, maxSummaryRunes)
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
		line += " · " + turnrender.Seconds(r.Duration)
	}
	if r.Err == nil || r.Denied && verbosity != VerbosityVerbose {
		return line
	}
	msg := r.Err.Error()
	if verbosity == VerbosityVerbose {
		lines := strings.Split(msg, "\n")
		lines = lines[:min(len(lines), maxVerboseErrorLines)]
		return line + "\n" + clipRunes(strings.Join(lines, "\n"), maxVerboseErrorRunes)
	}
	first, _, _ := strings.Cut(msg, "\n")
	return line + "\n" + clipRunes(first, maxErrorRunes)
}

// oneLine joins a summary's lines so that it fits on one.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ⏎ ")), " ")
}
