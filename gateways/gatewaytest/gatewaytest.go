// Package gatewaytest is the conformance suite every chat adapter passes,
// in the manner of tailscale's ipn/store/storetest: an adapter's tests
// call Run with a factory that gives the adapter's constructor pointed at
// its fake platform and the fake's controls, and the suite checks, through
// the real Hub and store, what must hold on every platform. A property
// that holds for every adapter is tested here once, not once per adapter.
package gatewaytest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// Message is one message the bot sent, as the fake platform shows it.
type Message struct {
	ID   string // the platform's id of it
	Text string // what its reader sees, after the last edit
	// Pings: it would notify someone (a mention the platform would act on).
	Pings bool
}

// Fake is an adapter's fake platform and the controls the suite drives it
// with. Every field must be set.
type Fake struct {
	// Name is the gateway's name (Gateway.Name).
	Name string
	// Token is the token the fake accepts; it must not show in any error
	// or log line.
	Token string
	// New returns a new adapter pointed at the fake, with token; each call
	// is a restart of latch. The suite starts, runs and closes it.
	New func(token string, log *slog.Logger) gateways.Gateway
	// Limit bounds a message the platform takes, as Measure counts.
	Limit   int
	Measure func(string) int

	// OwnerChat is the owner's private chat with the bot, as the adapter
	// names it in Message.ChatID and Send.
	OwnerChat string
	// FromOwner, FromStranger and FromOther send text to the bot: the
	// owner and a stranger privately, and another user in a room the
	// owner and the bot share. down is set when latch is not running
	// (a platform that pushes messages keeps them in the chat's history).
	// Each returns the message's id.
	FromOwner    func(text string, down bool) string
	FromStranger func(text string)
	FromOther    func(text string)
	// Redeliver hands the owner's message id to the adapter again, as the
	// platform does after a lost acknowledgement.
	Redeliver func(id string)
	// ToOwner, ToStranger and ToOther are the messages the bot sent to
	// the owner's chat, the stranger's and the shared room.
	ToOwner    func() []Message
	ToStranger func() []Message
	ToOther    func() []Message
	// Press presses the button with payload data on the bot's message id
	// in the owner's chat; answers then counts the platform's answers to
	// that press.
	Press func(id, data string) (answers func() int, err error)
	// FailSends makes the next n sends (n < 0: every one until
	// ClearFaults) answer the HTTP status, a 429 asking to wait retryAfter
	// seconds; Sends counts the send requests the fake got.
	FailSends   func(status, n, retryAfter int)
	ClearFaults func()
	Sends       func() int
}

// Factory makes a fresh fake for one subtest; cleanup is the test's.
type Factory func(t *testing.T) *Fake

// Run runs the suite against the adapter newFake gives.
func Run(t *testing.T, newFake Factory) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, *harness)
	}{
		{"StartBadTokenUnauthorized", testBadToken},
		{"PairAnswerAndSilence", testPairAnswerAndSilence},
		{"WhileDownAfterRestart", testWhileDown},
		{"IngestBeforeConfirm", testIngestBeforeConfirm},
		{"RedeliveredHandledOnce", testRedelivered},
		{"ButtonPressAnsweredOnce", testButtonPress},
		{"LongTextSplitWithinLimit", testLongText},
		{"RejectedSend", testRejected},
		{"RateLimitHonoured", testRateLimit},
		{"FailedAnswerDeliveredAfterRestart", testOutboxAfterRestart},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, newFake(t))
			c.run(t, h)
			h.checkNoToken(t)
		})
	}
}

// harness runs the adapter under a real Hub over a store that outlives
// restarts, and keeps every log line to check for the token.
type harness struct {
	t      *testing.T
	f      *Fake
	db     *store.DB
	pairer *pairing.Pairer
	logs   *adaptertest.LogBuffer
	log    *slog.Logger
	ctx    context.Context
	mu     sync.Mutex
	errs   []error // every error an adapter returned
	// failIngest makes every Ingest fail while set; failed counts those.
	failIngest atomic.Bool
	failed     atomic.Int32
	stop       func()
}

func newHarness(t *testing.T, f *Fake) *harness {
	db, err := store.Open(filepath.Join(t.TempDir(), "latch.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pairer, err := pairing.New(bytes.Repeat([]byte{7}, pairing.KeyLen))
	if err != nil {
		t.Fatal(err)
	}
	logs := &adaptertest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	h := &harness{t: t, f: f, db: db, pairer: pairer, logs: logs, log: log, ctx: ctx}
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
		t.Log("logs:\n" + logs.String())
	})
	return h
}

// start runs a new adapter and a Hub, as the daemon does; stopAll ends
// them (also at cleanup).
func (h *harness) start() gateways.Gateway {
	h.t.Helper()
	g := h.f.New(h.f.Token, h.log)
	if err := g.Start(h.ctx); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	hub := gateways.NewHub(gateways.Config{Store: h.db, Pairer: h.pairer, Gateways: []gateways.Gateway{g}, Log: h.log,
		Shell: shell})
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := g.Run(ctx, failingSink{hub, h}); ctx.Err() == nil {
			h.noteErr(err)
		}
	}()
	go func() { defer wg.Done(); _ = hub.Run(ctx) }()
	h.stop = func() {
		cancel()
		wg.Wait()
		h.noteErr(closeGateway(g))
		h.stop = nil
	}
	return g
}

func (h *harness) stopAll() {
	if h.stop != nil {
		h.stop()
	}
}

// pair latches the owner's chat with a code minted in the store.
func (h *harness) pair() {
	h.t.Helper()
	var code string
	if err := h.db.Update(func(tx *store.Tx) (err error) {
		code, _, err = h.pairer.Mint(tx, h.f.Name, 0)
		return err
	}); err != nil {
		h.t.Fatal(err)
	}
	h.f.FromOwner("/pair "+code, false)
	h.waitOwner("Paired.")
}

// waitOwner waits for a message to the owner that contains want.
func (h *harness) waitOwner(want string) Message {
	h.t.Helper()
	var got Message
	h.eventually("a message to the owner with "+want, func() bool {
		for _, m := range h.f.ToOwner() {
			if strings.Contains(m.Text, want) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// countOwner counts the messages to the owner that contain want.
func (h *harness) countOwner(want string) int {
	n := 0
	for _, m := range h.f.ToOwner() {
		if strings.Contains(m.Text, want) {
			n++
		}
	}
	return n
}

// idle waits until the Hub has nothing left in the inbox or the outbox.
func (h *harness) idle() {
	h.t.Helper()
	h.eventually("the Hub to finish", func() bool {
		// An answer owed moves to the outbox (AnswerInbox) until its
		// delivery is confirmed: a restart before then sends it again.
		in, out := -1, -1
		_ = h.db.View(func(tx *store.Tx) (err error) {
			if in, err = tx.InboxLen(); err != nil {
				return err
			}
			out, err = tx.OutboxLen()
			return err
		})
		return in == 0 && out == 0
	})
}

// eventually polls cond (the store and the fakes have no change
// notification) until it holds or the test's deadline passes.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("waiting for %s: %v", what, h.ctx.Err())
		case <-tick.C:
		}
	}
}

// checkNoToken: the token is in no error an adapter returned and no log
// line.
func (h *harness) checkNoToken(t *testing.T) {
	t.Helper()
	h.stopAll()
	if strings.Contains(h.logs.String(), h.f.Token) {
		t.Error("the token is in the logs")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, err := range h.errs {
		if strings.Contains(err.Error(), h.f.Token) {
			t.Errorf("the token is in the error %q", err)
		}
	}
}

// noteErr keeps err, for checkNoToken, and returns it.
func (h *harness) noteErr(err error) error {
	if err != nil {
		h.mu.Lock()
		h.errs = append(h.errs, err)
		h.mu.Unlock()
	}
	return err
}

// failingSink is the Hub, but for an Ingest that fails while the test
// says so.
type failingSink struct {
	gateways.Sink
	h *harness
}

var errIngest = errors.New("gatewaytest: the store is failing")

func (s failingSink) Ingest(ctx context.Context, gateway, cursor string, msgs []gateways.Message) error {
	if s.h.failIngest.Load() {
		s.h.failed.Add(1)
		return errIngest
	}
	return s.Sink.Ingest(ctx, gateway, cursor, msgs)
}

// closeGateway closes g if it has a Close (the adapters do).
func closeGateway(g gateways.Gateway) error {
	if c, ok := g.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// shell stands in for the owner's shell: "echo x" answers "ran x".
func shell(_ context.Context, cmd string) string { return "ran " + strings.TrimPrefix(cmd, "echo ") }

// words is "w0", "w1", … "w<n-1>".
func words(n int) []string {
	w := make([]string, n)
	for i := range w {
		w[i] = "w" + strconv.Itoa(i)
	}
	return w
}
