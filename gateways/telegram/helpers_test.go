package telegram

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// testToken looks like a real token; its secret half must never show up in
// logs or errors.
const testToken = "987654321:AAF-secretTokenValue_0123456789abcdefg"

// waitLimit bounds every wait in these tests; it only turns a hang into a
// failure.
const waitLimit = adaptertest.WaitLimit

var (
	alice = telegramtest.User{ID: 1111, FirstName: "Alice", LastName: "Liddell", Username: "alice"}
	bob   = telegramtest.User{ID: 2222, FirstName: "Bob"}
)

// logBuffer collects log output from concurrent goroutines.
type logBuffer struct{ adaptertest.LogBuffer }

// lines returns the log lines containing all of the given substrings.
func (l *logBuffer) lines(subs ...string) []string { return l.Lines(subs...) }

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
	return New(cfg, adaptertest.Logger(t, logs)), logs
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

// testContext is the test's context bounded by waitLimit; eventually
// polls a condition until it holds or waitLimit passes.
var (
	testContext = adaptertest.Context
	eventually  = adaptertest.Eventually
)

// run starts g.Run in the background. The returned stop cancels it and
// returns Run's result; it also runs at cleanup.
func run(t *testing.T, g *Gateway, sink gateways.Sink) (stop func() error) {
	t.Helper()
	return adaptertest.Run(t, func(ctx context.Context) error { return g.Run(ctx, sink) })
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

// storedNext is the offset in the stored cursor, the part before ';'.
func (s *memSink) storedNext() string {
	next, _, _ := strings.Cut(s.storedCursor(), ";")
	return next
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
