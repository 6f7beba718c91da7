package discord

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
	"github.com/latchd/latch/gateways/discord/discordtest"
)

// testToken looks like a real bot token (base64 of the bot's id, a
// timestamp, an HMAC); neither it nor its HMAC part may show up in logs or
// errors. The fake reads the bot's id, 1234567890123456789, from it.
const testToken = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GabcDE.sEcReT-hmacValue_0123456789abcdefghijkl"

// waitLimit bounds every wait in these tests. It only turns a hang into a
// failure.
const waitLimit = 20 * time.Second

var (
	alice = discordtest.User{ID: "300000000000000001", Username: "alice", GlobalName: "Alice"}
	bob   = discordtest.User{ID: "300000000000000002", Username: "bob"}
	robot = discordtest.User{ID: "300000000000000003", Username: "otherbot", Bot: true}
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

// newFake starts a fake Discord for testToken. discordgo's endpoints are
// process-global (SetAPIBase), so tests in this package never run in
// parallel.
func newFake(t *testing.T) *discordtest.Server {
	t.Helper()
	srv := discordtest.New(testToken)
	t.Cleanup(srv.Close)
	return srv
}

// newGateway returns a gateway pointed at srv with short back-off and edit
// interval, logging at debug level to a buffer and the test output. It is
// closed at cleanup.
func newGateway(t *testing.T, srv *discordtest.Server, mutate ...func(*Config)) (*Gateway, *logBuffer) {
	t.Helper()
	cfg := Config{Token: testToken, APIURL: srv.URL(), MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		EditInterval: 10 * time.Millisecond}
	for _, m := range mutate {
		m(&cfg)
	}
	logs := &logBuffer{}
	h := slog.NewTextHandler(io.MultiWriter(logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug})
	g := New(cfg, slog.New(h))
	t.Cleanup(func() { _ = g.Close() })
	return g, logs
}

// started is newGateway plus a successful Start.
func started(t *testing.T, srv *discordtest.Server, mutate ...func(*Config)) (*Gateway, *logBuffer) {
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
func waitFake(t *testing.T, srv *discordtest.Server, what string, cond func() bool) {
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
	ingestErrs int // Ingest fails this many more times
	calls      []ingestCall
	stored     []gateways.Message
	changed    chan struct{}
}

func newSink(cursor string) *memSink { return &memSink{cursor: cursor, changed: make(chan struct{})} }

func (s *memSink) Cursor(_ context.Context, gateway string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gateway != "discord" {
		return "", errors.New("wrong gateway " + gateway)
	}
	return s.cursor, nil
}

func (s *memSink) Ingest(_ context.Context, gateway, cursor string, msgs []gateways.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	call := ingestCall{cursor: cursor, msgs: slices.Clone(msgs)}
	switch {
	case gateway != "discord":
		call.err = errors.New("wrong gateway " + gateway)
	case s.ingestErrs > 0:
		s.ingestErrs--
		call.err = errors.New("disk full")
	default:
		s.cursor = cursor
		s.stored = append(s.stored, msgs...)
	}
	s.calls = append(s.calls, call)
	close(s.changed)
	s.changed = make(chan struct{})
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

// waitStored waits until the sink holds n messages and returns them.
func (s *memSink) waitStored(t *testing.T, n int) []gateways.Message {
	t.Helper()
	ctx := testContext(t)
	for {
		s.mu.Lock()
		got, changed := slices.Clone(s.stored), s.changed
		s.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %d stored messages, have %d: %+v", n, len(got), got)
		}
	}
}

// texts are the texts of messages, in order.
func texts(msgs []gateways.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text)
	}
	return out
}
