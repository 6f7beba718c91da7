package telegram

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// testToken looks like a real token; its secret half must never show up in
// logs or errors.
const testToken = "987654321:AAF-secretTokenValue_0123456789abcdefg"

// waitLimit bounds every wait in these tests. It is generous on purpose: it
// only turns a hang into a failure.
const waitLimit = 20 * time.Second

var (
	alice = telegramtest.User{ID: 1111, FirstName: "Alice", LastName: "Liddell", Username: "alice"}
	bob   = telegramtest.User{ID: 2222, FirstName: "Bob"}
)

// logBuffer collects log output from concurrent goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the log lines containing all of the given substrings.
func (l *logBuffer) lines(subs ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// newFake starts a fake Bot API for testToken.
func newFake(t *testing.T) *telegramtest.Server {
	t.Helper()
	srv := telegramtest.New(testToken)
	t.Cleanup(srv.Close)
	return srv
}

// newGateway returns a gateway pointed at srv with short back-off, logging
// at debug level to a buffer and the test output.
func newGateway(t *testing.T, srv *telegramtest.Server, mutate ...func(*Config)) (*Gateway, *logBuffer) {
	t.Helper()
	cfg := Config{Token: testToken, APIURL: srv.URL(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	for _, m := range mutate {
		m(&cfg)
	}
	logs := &logBuffer{}
	h := slog.NewTextHandler(io.MultiWriter(logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug})
	return New(cfg, slog.New(h)), logs
}

// started is newGateway plus a successful Start.
func started(t *testing.T, srv *telegramtest.Server, mutate ...func(*Config)) (*Gateway, *logBuffer) {
	t.Helper()
	g, logs := newGateway(t, srv, mutate...)
	if err := g.Start(testContext(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return g, logs
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// run starts g.Run in the background. The returned stop cancels it and
// returns Run's result; it also runs at cleanup.
func run(t *testing.T, g *Gateway, sink gateways.Sink) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- g.Run(ctx, sink) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-errc:
			case <-time.After(waitLimit):
				result = errors.New("Run did not return after its context ended")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// eventually polls cond until it holds or waitLimit passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// waitFake waits for a condition on the fake's state.
func waitFake(t *testing.T, srv *telegramtest.Server, what string, cond func() bool) {
	t.Helper()
	if err := srv.Wait(testContext(t), cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// ingestCall is one call of memSink.Ingest.
type ingestCall struct {
	cursor string
	msgs   []gateways.Message
	err    error
}

// memSink is an in-memory gateways.Sink that can be told to fail.
type memSink struct {
	mu         sync.Mutex
	cursor     string
	cursorErrs int // Cursor fails this many more times
	ingestErrs int // Ingest fails this many more times
	calls      []ingestCall
	stored     []gateways.Message
	onIngest   func(ingestCall) // called on every Ingest, under mu
}

func (s *memSink) Cursor(_ context.Context, gateway string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gateway != "telegram" {
		return "", errors.New("wrong gateway " + gateway)
	}
	if s.cursorErrs > 0 {
		s.cursorErrs--
		return "", errors.New("store unavailable")
	}
	return s.cursor, nil
}

func (s *memSink) Ingest(_ context.Context, gateway, cursor string, msgs []gateways.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := ingestCall{cursor: cursor, msgs: slices.Clone(msgs)}
	switch {
	case gateway != "telegram":
		call.err = errors.New("wrong gateway " + gateway)
	case s.ingestErrs > 0:
		s.ingestErrs--
		call.err = errors.New("disk full")
	default:
		s.cursor = cursor
		s.stored = append(s.stored, msgs...)
	}
	if s.onIngest != nil {
		s.onIngest(call)
	}
	s.calls = append(s.calls, call)
	return call.err
}

func (s *memSink) storedCursor() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor
}

func (s *memSink) storedMsgs() []gateways.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stored)
}

func (s *memSink) ingestCalls() []ingestCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}
