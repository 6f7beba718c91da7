package cli

import (
	"strconv"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
)

// Colours that pin the QR code to dark modules on a light ground, as
// scanners want it, whatever the terminal's theme: black on bright white.
const (
	qrColours = "\x1b[30;107m"
	qrReset   = "\x1b[0m"
)

// terminalQR draws a QR code of text for a terminal, two modules per
// character cell. Drawn in the terminal's own colours, a code is right on a
// dark theme and inverted (unscannable by many phones) on a light one, so
// it sets its colours itself. Where NO_COLOR asks for none, COLORFGBG
// ("15;0": light text on a dark ground) says which way round to draw;
// without it, a dark ground is assumed.
func terminalQR(text string, getenv func(string) string) (string, error) {
	q, err := qrcode.New(text, qrcode.Low)
	if err != nil {
		return "", err
	}
	if getenv("NO_COLOR") != "" {
		// ToSmallString(false) draws dark modules as blanks: right where
		// the ground is dark.
		return q.ToSmallString(lightGround(getenv("COLORFGBG"))), nil
	}
	var b strings.Builder
	for line := range strings.Lines(q.ToSmallString(true)) {
		b.WriteString(qrColours + strings.TrimSuffix(line, "\n") + qrReset + "\n")
	}
	return b.String(), nil
}

// lightGround reads COLORFGBG ("fg;bg" or "fg;default;bg"): colours 7 and
// 9 to 15 of the 16 are light.
func lightGround(colorfgbg string) bool {
	parts := strings.Split(colorfgbg, ";")
	bg, err := strconv.Atoi(parts[len(parts)-1])
	return err == nil && (bg == 7 || bg >= 9 && bg <= 15)
}
