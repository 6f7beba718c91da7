package redact

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const secret = "s3cret/part+x"

var forms = URLForms(secret)

func TestURLForms(t *testing.T) {
	got := strings.Join(URLForms(secret), " ")
	if want := "s3cret/part+x s3cret%2Fpart+x s3cret%2Fpart%2Bx"; got != want {
		t.Errorf("URLForms = %q, want %q", got, want)
	}
	if f := URLForms(""); f != nil {
		t.Errorf("URLForms(\"\") = %q, want none", f)
	}
}

func TestString(t *testing.T) {
	in := "a s3cret/part+x b s3cret%2Fpart%2Bx c"
	if got, want := String(in, forms), "a <redacted> b <redacted> c"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := String(in, []string{""}); got != in {
		t.Errorf("an empty form changed the text to %q", got)
	}
}

var errKind = errors.New("unauthorized")

func TestOpaque(t *testing.T) {
	clean := errors.New("no secret here")
	tests := []struct {
		name   string
		err    error
		same   bool  // returned as it is
		wantIs error // still answers errors.Is
	}{
		{"nil", nil, true, nil},
		{"clean", clean, true, nil},
		{"wrapped clean", fmt.Errorf("call: %w", clean), true, nil},
		{"in the text", errors.New("GET /bot" + secret + "/x failed"), false, nil},
		{"deep in the chain", fmt.Errorf("outer: %w", fmt.Errorf("mid: %w", errors.New("tok "+secret))), false, nil},
		{"in a joined error", errors.Join(clean, errors.New("escaped s3cret%2Fpart%2Bx")), false, nil},
		{"cancelled", fmt.Errorf("%s: %w", secret, context.Canceled), false, context.Canceled},
		{"timeout", fmt.Errorf("%s: %w", secret, context.DeadlineExceeded), false, context.DeadlineExceeded},
		{"kind", fmt.Errorf("%s: %w", secret, errKind), false, errKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Opaque(tt.err, forms, errKind)
			if tt.same {
				if got != tt.err {
					t.Errorf("Opaque(%v) = %v, want it unchanged", tt.err, got)
				}
				return
			}
			if strings.Contains(got.Error(), secret) || !strings.Contains(got.Error(), Placeholder) {
				t.Errorf("Opaque = %q, want the secret replaced", got)
			}
			if errors.Unwrap(got) != nil {
				t.Error("the opaque error still unwraps to its chain")
			}
			if tt.wantIs != nil && !errors.Is(got, tt.wantIs) {
				t.Errorf("Opaque lost errors.Is %v", tt.wantIs)
			}
			for _, other := range []error{context.Canceled, context.DeadlineExceeded, errKind} {
				if other != tt.wantIs && errors.Is(got, other) {
					t.Errorf("Opaque answers errors.Is %v, which the original did not", other)
				}
			}
		})
	}
}
