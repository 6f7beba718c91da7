package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

func TestScrub(t *testing.T) {
	const tok = testToken
	_, secret, _ := strings.Cut(tok, ":")
	urlErr := func(inner error) error {
		return &url.Error{Op: "Post", URL: "https://api.telegram.org/bot" + tok + "/getUpdates", Err: inner}
	}
	tests := []struct {
		name     string
		err      error
		wantSame bool  // no token: returned unchanged
		wantIs   error // errors.Is must still hold
		check    func(t *testing.T, err error)
	}{
		{name: "nil", err: nil, wantSame: true},
		{name: "clean", err: errors.New("connection reset"), wantSame: true},
		{name: "url error", err: urlErr(context.Canceled), wantIs: context.Canceled, check: func(t *testing.T, err error) {
			var ue *url.Error
			if !errors.As(err, &ue) || ue.URL != "https://api.telegram.org/bot<redacted>/getUpdates" {
				t.Errorf("url.Error URL not scrubbed in place: %v", err)
			}
		}},
		{name: "wrapped url error", err: fmt.Errorf("poll: %w", urlErr(context.DeadlineExceeded)), wantIs: context.DeadlineExceeded, check: func(t *testing.T, err error) {
			var ue *url.Error
			if errors.As(err, &ue) {
				t.Errorf("the original url.Error is still reachable: %#v", ue)
			}
		}},
		{name: "api error", err: &tgbotapi.Error{Code: 400, Message: "Bad Request: " + tok}, check: func(t *testing.T, err error) {
			var ae *tgbotapi.Error
			if !errors.As(err, &ae) || ae.Code != 400 {
				t.Errorf("API error lost its code: %v", err)
			}
		}},
		{name: "joined", err: errors.Join(errors.New("a"), fmt.Errorf("b %s", tok))},
		{name: "path escaped", err: errors.New("GET /bot" + url.PathEscape(tok))},
		{name: "secret alone", err: errors.New("token=" + secret)},
		{name: "hidden in the chain", err: hiddenErr{inner: urlErr(context.Canceled)}, wantIs: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scrub(tt.err, tok)
			if tt.wantSame {
				if got != tt.err {
					t.Errorf("scrub changed an error without the token: %v", got)
				}
				return
			}
			for e := got; e != nil; e = errors.Unwrap(e) {
				if s := fmt.Sprintf("%v %+v %#v", e, e, e); strings.Contains(s, secret) {
					t.Errorf("token in the scrubbed chain: %s", s)
				}
			}
			if tt.wantIs != nil && !errors.Is(got, tt.wantIs) {
				t.Errorf("scrub(%v) lost errors.Is %v", tt.err, tt.wantIs)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// hiddenErr wraps an error without repeating its text.
type hiddenErr struct{ inner error }

func (hiddenErr) Error() string   { return "something failed" }
func (e hiddenErr) Unwrap() error { return e.inner }

func TestSplit(t *testing.T) {
	escaped := func(r rune) int { return escapedLen(r) }
	tests := []struct {
		name   string
		text   string
		budget int
		cost   func(rune) int
		want   []string
	}{
		{"empty", "", 10, utf16.RuneLen, nil},
		{"fits", "abc\ndef", 10, utf16.RuneLen, []string{"abc\ndef"}},
		{"at lines", "aaaa\nbbbb\ncccc", 10, utf16.RuneLen, []string{"aaaa\nbbbb\n", "cccc"}},
		{"exact budget", "aaaaaaaaa\nb", 10, utf16.RuneLen, []string{"aaaaaaaaa\n", "b"}},
		{"long line", "abcdefghijklmnop", 10, utf16.RuneLen, []string{"abcdefghij", "klmnop"}},
		{"long line after short", "ab\nabcdefghijkl\ncd", 10, utf16.RuneLen, []string{"ab\n", "abcdefghij", "kl\ncd"}},
		{"surrogate pairs", "a😀😀😀", 4, utf16.RuneLen, []string{"a😀", "😀😀"}},
		{"escaped markup", "<<<&", 9, escaped, []string{"<<", "<&"}},
		{"multibyte", "ééééé", 2, utf16.RuneLen, []string{"éé", "éé", "é"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := split(tt.text, tt.budget, tt.cost)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("split(%q, %d) = %q, want %q", tt.text, tt.budget, got, tt.want)
			}
		})
	}
}

func TestRenderPre(t *testing.T) {
	got := render(gatewaysReply("if a < b && c > d {}", true))
	want := []string{"<pre>if a &lt; b &amp;&amp; c &gt; d {}</pre>"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("render = %q, want %q", got, want)
	}
	if got := render(gatewaysReply("bad \xff utf8", false)); len(got) != 1 || got[0] != "bad \uFFFD utf8" {
		t.Errorf("invalid UTF-8 rendered as %q, want it replaced", got)
	}
}
