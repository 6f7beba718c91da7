package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/config"
)

// TestSystemdNotify: under systemd (NOTIFY_SOCKET set) the daemon reports
// READY once the store, the socket and the gateway are up, a STATUS line,
// WATCHDOG pings from the dispatch loop, and STOPPING on shutdown.
func TestSystemdNotify(t *testing.T) {
	got := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "200000") // pings every 100 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	e := newEnv(t)
	r := e.start()
	want := map[string]bool{"READY=1": false, "STATUS=telegram: not paired": false, "WATCHDOG=1": false}
	deadline := time.After(20 * time.Second)
	for !(want["READY=1"] && want["STATUS=telegram: not paired"] && want["WATCHDOG=1"]) {
		select {
		case m := <-got:
			for k := range want {
				if strings.Contains(m, k) {
					want[k] = true
				}
			}
		case <-deadline:
			t.Fatalf("notifications so far: %v", want)
		}
	}
	r.stop(t)
	for {
		select {
		case m := <-got:
			if strings.Contains(m, "STOPPING=1") {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no STOPPING=1")
		}
	}
}

// listenNotify points NOTIFY_SOCKET at a socket of the test's and returns
// what arrives on it, one datagram each.
func listenNotify(t *testing.T) <-chan string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ln")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	got := make(chan string, 1000)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	return got
}

// states collects the READY, RELOADING and STOPPING notifications in got
// until want of them have come (or 20 s pass), in order.
func states(t *testing.T, got <-chan string, want int) []string {
	t.Helper()
	var out []string
	deadline := time.After(20 * time.Second)
	for len(out) < want {
		select {
		case m := <-got:
			for _, line := range strings.Split(m, "\n") {
				switch {
				case line == "READY=1", line == "RELOADING=1", line == "STOPPING=1":
					out = append(out, line)
				case strings.HasPrefix(line, "MONOTONIC_USEC="):
					if _, err := strconv.ParseUint(strings.TrimPrefix(line, "MONOTONIC_USEC="), 10, 64); err != nil {
						t.Errorf("bad %q", line)
					}
				}
			}
		case <-deadline:
			t.Fatalf("states so far %q, want %d", out, want)
		}
	}
	return out
}

// TestSystemdNotifyReload: a reload (SIGHUP) is RELOADING=1 then READY=1 to
// systemd, never STOPPING=1 — which systemd takes for a stop, and answers
// by killing the whole unit, running commands included, once its stop
// timeout has passed. Only the final stop says STOPPING=1.
func TestSystemdNotifyReload(t *testing.T) {
	got := listenNotify(t)
	e := newEnv(t)
	log := slog.New(slog.NewTextHandler(e.logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reload := make(chan struct{})
	done := make(chan error, 1)
	build := func(c *config.Config) *Daemon {
		d := New(c, log, "test")
		d.ShutdownGrace = e.grace
		return d
	}
	load := func() (*config.Config, error) { return e.config(), nil }
	go func() { done <- Supervise(ctx, e.config(), load, reload, log, build) }()
	if s := states(t, got, 1); s[0] != "READY=1" {
		t.Fatalf("first state %q", s)
	}
	reload <- struct{}{}
	if s := states(t, got, 2); !slices.Equal(s, []string{"RELOADING=1", "READY=1"}) {
		t.Errorf("a reload told systemd %q, want RELOADING=1 then READY=1", s)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := states(t, got, 1); s[0] != "STOPPING=1" {
		t.Errorf("the stop told systemd %q", s)
	}
}

// TestSystemdNotifyNeverReadyWithABadToken: a gateway that fails for good
// at start (the token is refused) fails the start: no READY=1, so
// `systemctl start` and `latch service install` report a failed start
// instead of a service that was ready and then stopped.
func TestSystemdNotifyNeverReadyWithABadToken(t *testing.T) {
	got := listenNotify(t)
	e := newEnv(t)
	cfg := e.config()
	cfg.Telegram.Token = "7012345678:wrong"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := New(cfg, nil, "test").Run(ctx); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad token: %v", err)
	}
	for {
		select {
		case m := <-got:
			if strings.Contains(m, "READY=1") {
				t.Fatalf("READY=1 with a refused token: %q", m)
			}
		case <-time.After(200 * time.Millisecond): // all that was sent has been read
			return
		}
	}
}
