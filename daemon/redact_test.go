package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	const token = "123456:AAHsecretTOKENvalue"
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		log := slog.New(Redact(h, token, "x"))
		log.Info("calling https://api.telegram.org/bot"+token+"/getMe",
			"err", errors.New("Post https://api.telegram.org/bot"+token+"/getUpdates: EOF"),
			"url", "https://x/bot"+token,
			slog.Group("g", "inner", token),
			"n", 3)
		log.With("token", token).WithGroup("grp").Warn("again", "v", []string{token})
	}
	out := buf.String()
	if strings.Contains(out, token) {
		t.Fatalf("token leaked into logs:\n%s", out)
	}
	if !strings.Contains(out, "[redacted]") || !strings.Contains(out, "n=3") {
		t.Fatalf("log lines lost their shape:\n%s", out)
	}
}

// TestRedactLearnsReloadedSecrets: a secret added after the logger was
// made — a token a reload brought in — is scrubbed from then on, also by a
// logger derived before, and the old ones stay scrubbed.
func TestRedactLearnsReloadedSecrets(t *testing.T) {
	const old, next = "123456:AAHoldTOKENvalue", "654321:AAHnewTOKENvalue"
	var buf bytes.Buffer
	s := &Secrets{}
	s.Add(old)
	log := slog.New(RedactWith(slog.NewTextHandler(&buf, nil), s))
	derived := log.With("gateway", "telegram")
	s.Add(next, "short")
	log.Info("token " + next)
	derived.Info("tokens", "old", old, "new", next)
	if out := buf.String(); strings.Contains(out, old) || strings.Contains(out, next) {
		t.Fatalf("a secret leaked:\n%s", out)
	}
	if got := s.all(); len(got) != 2 {
		t.Errorf("secrets %q, want the two tokens (\"short\" is too short)", got)
	}
}
