package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Redact wraps h so that none of secrets appears in a log line, whatever
// logged it: the message and every attribute value are scrubbed. It is the
// last line of defence; code should not log secrets in the first place.
func Redact(h slog.Handler, secrets ...string) slog.Handler {
	s := &Secrets{}
	s.Add(secrets...)
	return RedactWith(h, s)
}

// RedactWith is Redact with a set that may grow while the logger is in
// use: a reload adds the new configuration's secrets.
func RedactWith(h slog.Handler, s *Secrets) slog.Handler {
	return &redactHandler{next: h, secrets: s}
}

// Secrets is the set of strings a redacting handler scrubs. It only grows:
// a token replaced by a reload may still turn up in a line logged late.
type Secrets struct {
	mu   sync.Mutex
	list atomic.Pointer[[]string]
}

// Add puts secrets into the set; strings under 6 bytes are left out (a
// short "secret" would redact ordinary words), and so are repeats.
func (s *Secrets) Add(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var list []string
	if old := s.list.Load(); old != nil {
		list = slices.Clone(*old)
	}
	for _, sec := range secrets {
		if len(sec) >= 6 && !slices.Contains(list, sec) {
			list = append(list, sec)
		}
	}
	s.list.Store(&list)
}

func (s *Secrets) all() []string {
	if l := s.list.Load(); l != nil {
		return *l
	}
	return nil
}

type redactHandler struct {
	next    slog.Handler
	secrets *Secrets
}

func (r *redactHandler) scrub(s string) string {
	for _, sec := range r.secrets.all() {
		s = strings.ReplaceAll(s, sec, "[redacted]")
	}
	return s
}

func (r *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.scrub(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = r.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		return slog.String(a.Key, r.scrub(fmt.Sprint(v.Any())))
	}
	return a
}

func (r *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return r.next.Enabled(ctx, l)
}

func (r *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, r.scrub(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.next.Handle(ctx, out)
}

func (r *redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		scrubbed[i] = r.attr(a)
	}
	return &redactHandler{next: r.next.WithAttrs(scrubbed), secrets: r.secrets}
}

func (r *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{next: r.next.WithGroup(name), secrets: r.secrets}
}
