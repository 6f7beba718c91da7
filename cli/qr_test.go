package cli

import (
	"strings"
	"testing"

	qrcode "github.com/skip2/go-qrcode"
)

// TestTerminalQR: the code is drawn dark on light whatever the theme. It
// used to be drawn in the terminal's colours with dark modules as blanks,
// which a light theme shows inverted.
func TestTerminalQR(t *testing.T) {
	const link = "https://t.me/latch_test_bot?start=ABCD2345"
	q, _ := qrcode.New(link, qrcode.Low)
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

	got, err := terminalQR(link, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	// Dark modules are drawn as glyphs, in black on white.
	want := q.ToSmallString(true)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != strings.Count(want, "\n") {
		t.Fatalf("%d lines, want %d", len(lines), strings.Count(want, "\n"))
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, qrColours) || !strings.HasSuffix(l, qrReset) {
			t.Fatalf("line %d %q does not set its colours", i, l)
		}
	}
	if plain := strings.ReplaceAll(strings.ReplaceAll(got, qrColours, ""), qrReset, ""); plain != want {
		t.Errorf("the code is not drawn dark modules as glyphs:\n%s", plain)
	}

	// Without colours, COLORFGBG picks the way round.
	for _, tt := range []struct {
		colorfgbg string
		inverse   bool
	}{{"", false}, {"15;0", false}, {"0;15", true}, {"0;default;7", true}, {"7;8", false}} {
		got, _ := terminalQR(link, env(map[string]string{"NO_COLOR": "1", "COLORFGBG": tt.colorfgbg}))
		if got != q.ToSmallString(tt.inverse) {
			t.Errorf("NO_COLOR with COLORFGBG=%q: not drawn with inverse=%t", tt.colorfgbg, tt.inverse)
		}
	}
}
