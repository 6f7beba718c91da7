package discord

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/gateways/internal/adaptertest"
)

// testToken looks like a real bot token (base64 of the bot's id, a
// timestamp, an HMAC); neither it nor its HMAC part may show up in logs or
// errors. The fake reads the bot's id, 1234567890123456789, from it.
const testToken = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GabcDE.sEcReT-hmacValue_0123456789abcdefghijkl"

// waitLimit bounds every wait in these tests; it only turns a hang into a
// failure.
const waitLimit = adaptertest.WaitLimit

var (
	alice = discordtest.User{ID: "300000000000000001", Username: "alice", GlobalName: "Alice"}
	bob   = discordtest.User{ID: "300000000000000002", Username: "bob"}
	robot = discordtest.User{ID: "300000000000000003", Username: "otherbot", Bot: true}
)

// logBuffer collects log output from concurrent goroutines.
type logBuffer struct{ adaptertest.LogBuffer }

// lines returns the log lines containing all of the given substrings.
func (l *logBuffer) lines(subs ...string) []string { return l.Lines(subs...) }

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
	g := New(cfg, adaptertest.Logger(t, logs))
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

// running is a fake Discord and a started gateway that runs into a new
// sink, with no cursor, until the test ends.
func running(t *testing.T) (*discordtest.Server, *Gateway, *memSink) {
	t.Helper()
	srv := newFake(t)
	g, _ := started(t, srv)
	sink := newSink("")
	run(t, g, sink)
	return srv, g, sink
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
