package turn

import (
	"strconv"
	"strings"
	"testing"
)

func TestClipMiddleSaysWhatIsLeftOut(t *testing.T) {
	if s, left := ClipMiddle("short", 10); s != "short" || left != 0 {
		t.Errorf("ClipMiddle(short) = %q, %d", s, left)
	}
	s := strings.Repeat("a", 500) + "TAIL"
	got, left := ClipMiddle(s, 100)
	if n := len([]rune(got)); n > 100 {
		t.Errorf("shown %d runes, over 100", n)
	}
	if !strings.HasSuffix(got, "TAIL") || !strings.HasPrefix(got, "aaa") {
		t.Errorf("head or tail missing: %q", got)
	}
	if want := "… " + strconv.Itoa(left) + " characters not shown …"; !strings.Contains(got, want) || left <= 0 ||
		len([]rune(got))-len([]rune(want))-2+left != len([]rune(s)) {
		t.Errorf("ClipMiddle = %q, left %d; want the marker %q and shown+left = all", got, left, want)
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"héllo wörld", 5, "héll…"},
		{"ab", 0, "…"},
	} {
		if got := Clip(c.in, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
	if got, want := OneLine("a\n  b\tc", 10), "a b c"; got != want {
		t.Errorf("OneLine = %q, want %q", got, want)
	}
}
