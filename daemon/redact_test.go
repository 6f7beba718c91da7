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
