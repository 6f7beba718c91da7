package telegram

import (
	"fmt"
	"strings"
	"time"
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
func (t *turn) toolLine(it *item) string {
	line := it.call.Name
	if s := oneLine(it.call.Summary); s != "" {
		line += ": " + clipRunes(s, maxSummaryRunes)
	}
	r := it.result
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
		line += " · " + seconds(r.Duration)
	}
	if r.Err == nil || r.Denied && t.g.cfg.Verbosity != VerbosityVerbose {
		return line
	}
	msg := r.Err.Error()
	if t.g.cfg.Verbosity == VerbosityVerbose {
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

// seconds formats a duration for a tool line: 0.4s, 12.3s, 2m05s.
func seconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
