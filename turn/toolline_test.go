package turn

import (
	"errors"
	"testing"
	"time"
)

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		400 * time.Millisecond:   "0.4s",
		12300 * time.Millisecond: "12.3s",
		125 * time.Second:        "2m05s",
	} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestToolLineStyle: a platform's style marks up the name, the summary and
// the error, and nothing else.
func TestToolLineStyle(t *testing.T) {
	style := LineStyle{Name: func(s string) string { return "<" + s + ">" }, Code: func(s string) string { return "`" + s + "`" }}
	c := ToolCall{Name: "read_file", Summary: "a\nb"}
	r := &ToolResult{Err: errors.New("no such file\nmore"), Duration: 1200 * time.Millisecond}
	for _, tc := range []struct {
		r         *ToolResult
		verbosity string
		want      string
	}{
		{nil, VerbosityNormal, "⚙ <read_file>: `a ⏎ b`"},
		{r, VerbosityNormal, "✗ <read_file>: `a ⏎ b` · 1.2s\n`no such file`"},
		{r, VerbosityVerbose, "✗ <read_file>: `a ⏎ b` · 1.2s\n`no such file\nmore`"},
		{&ToolResult{Denied: true, Err: errors.New("declined")}, VerbosityNormal, "✗ <read_file>: `a ⏎ b` · denied"},
	} {
		if got := ToolLine(c, tc.r, tc.verbosity, style); got != tc.want {
			t.Errorf("ToolLine(%v, %s) = %q, want %q", tc.r, tc.verbosity, got, tc.want)
		}
	}
}

func TestParseVerbosity(t *testing.T) {
	for in, want := range map[string]struct {
		v  string
		ok bool
	}{
		"": {VerbosityNormal, true}, " Quiet ": {VerbosityQuiet, true}, "verbose": {VerbosityVerbose, true}, "loud": {VerbosityNormal, false},
	} {
		if v, ok := ParseVerbosity(in); v != want.v || ok != want.ok {
			t.Errorf("ParseVerbosity(%q) = %q, %t; want %q, %t", in, v, ok, want.v, want.ok)
		}
	}
}
