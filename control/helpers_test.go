package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// epoch is the fake's clock: fixed, so results compare exactly.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeBackend is a small in-memory daemon: gateways that can be latched,
// minted for and unpaired, with the sentinel errors a real backend uses.
// fail, when set, is returned by every method instead. It records every
// call and the peer it saw.
type fakeBackend struct {
	mu      sync.Mutex
	latched map[string]bool // gateway name → latched
	fail    error
	calls   []string
	peers   []Peer
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{latched: map[string]bool{"telegram": true, "discord": false}}
}

func (f *fakeBackend) record(ctx context.Context, call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if p, ok := PeerFromContext(ctx); ok {
		f.peers = append(f.peers, p)
	}
	return f.fail
}

func (f *fakeBackend) Mint(ctx context.Context, req MintRequest) (MintResult, error) {
	if err := f.record(ctx, "mint "+req.Gateway); err != nil {
		return MintResult{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.latched[req.Gateway]; !ok {
		return MintResult{}, fmt.Errorf("gateway %q: %w", req.Gateway, ErrUnknownGateway)
	}
	code := "K7Q2-9XMP"
	return MintResult{
		Gateway:   req.Gateway,
		Code:      code,
		ExpiresAt: epoch.Add(req.TTL),
		Link:      "https://t.me/latch_bot?start=" + code,
	}, nil
}

func (f *fakeBackend) Unpair(ctx context.Context, gateway string) error {
	if err := f.record(ctx, "unpair "+gateway); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	latched, ok := f.latched[gateway]
	switch {
	case !ok:
		return fmt.Errorf("gateway %q: %w", gateway, ErrUnknownGateway)
	case !latched:
		return fmt.Errorf("gateway %q: %w", gateway, ErrNotLatched)
	}
	f.latched[gateway] = false
	return nil
}

func (f *fakeBackend) Status(ctx context.Context) (Status, error) {
	if err := f.record(ctx, "status"); err != nil {
		return Status{}, err
	}
	return fakeStatus(), nil
}

func fakeStatus() Status {
	return Status{
		PID:       4242,
		Version:   "v0.1.0",
		StartedAt: epoch,
		Home:      "/home/owner/.latch",
		Gateways: []GatewayStatus{
			{
				Name: "telegram", Configured: true, Connected: true, BotName: "latch_bot",
				Latch: &LatchInfo{
					ChatID: "1001", ChatName: "Owner", ChatType: "private",
					UserID: "1001", UserName: "owner", Since: epoch.Add(-time.Hour),
				},
				Handled: 12, StrangersDropped: 3, FailedAttempts: 1, Running: 1,
			},
			{
				Name: "discord", Configured: true, LastError: "gateway: 401 Unauthorized",
				Pending: &PendingInfo{ExpiresAt: epoch.Add(10 * time.Minute), Attempts: 2},
			},
		},
	}
}

func (f *fakeBackend) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeBackend) seenPeers() []Peer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Peer(nil), f.peers...)
}

// socketDir makes a private (0700) directory with a path short enough for
// a Unix socket; t.TempDir's names can exceed the 107-byte limit.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// testLogger writes to the test's output, and to buf when it is not nil.
func testLogger(t *testing.T, buf *syncBuffer) *slog.Logger {
	var w io.Writer = t.Output()
	if buf != nil {
		w = io.MultiWriter(w, buf)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testServer struct {
	srv  *Server
	path string
	done chan error // Serve's result
	stop context.CancelFunc
}

// startServer listens in a fresh private directory and serves until the
// test ends. setup, if not nil, adjusts the server before Serve starts.
func startServer(t *testing.T, b Backend, log *slog.Logger, setup func(*Server)) *testServer {
	t.Helper()
	if log == nil {
		log = testLogger(t, nil)
	}
	path := filepath.Join(socketDir(t), "latch.sock")
	srv, err := Listen(path, b, log)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if setup != nil {
		setup(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{srv: srv, path: path, done: make(chan error, 1), stop: cancel}
	go func() { ts.done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := ts.wait(t); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// wait returns Serve's result, failing the test if it takes too long.
func (ts *testServer) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-ts.done:
		ts.done <- err // let a second wait (the cleanup) see it too
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s")
		return nil
	}
}

// rawClient is a plain HTTP client on the socket, for requests the Client
// would never send.
func rawClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// rawDo sends one request and returns the status and the decoded error
// body (zero for a 200).
func rawDo(t *testing.T, path, method, url, body string) (int, errorBody) {
	t.Helper()
	req, err := http.NewRequest(method, "http://latch.sock"+url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	c := rawClient(path)
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type = %q, want application/json", method, url, ct)
	}
	var eb errorBody
	if resp.StatusCode != http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
			t.Errorf("%s %s: error body is not JSON: %v", method, url, err)
		}
	}
	return resp.StatusCode, eb
}
