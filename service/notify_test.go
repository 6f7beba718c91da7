package service

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeNotifySocket listens where NOTIFY_SOCKET points, as systemd does, and
// returns a function that reads the next datagram. The directory comes from
// os.MkdirTemp, not t.TempDir: a socket path must fit in 108 bytes.
func fakeNotifySocket(t *testing.T) (next func() string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return func() string {
		t.Helper()
		buf := make([]byte, 4096)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
}

func TestNotifierSends(t *testing.T) {
	next := fakeNotifySocket(t)
	var n Notifier
	tests := []struct {
		send func() error
		want string
	}{
		{n.Ready, "READY=1"},
		{func() error { return n.Status("2 gateways, 1 latched") }, "STATUS=2 gateways, 1 latched"},
		{n.Watchdog, "WATCHDOG=1"},
		{n.Stopping, "STOPPING=1"},
	}
	for _, tt := range tests {
		if err := tt.send(); err != nil {
			t.Fatalf("sending %s: %v", tt.want, err)
		}
		if got := next(); got != tt.want {
			t.Errorf("systemd got %q, want %q", got, tt.want)
		}
	}
}

// TestNotifierStatusIsOneLine: a status built from a remote error message
// must not smuggle in a second assignment such as MAINPID= or READY=1.
func TestNotifierStatusIsOneLine(t *testing.T) {
	next := fakeNotifySocket(t)
	var n Notifier
	if err := n.Status("telegram: bad gateway\nMAINPID=1\r\nREADY=1\x00x"); err != nil {
		t.Fatal(err)
	}
	got := next()
	if want := "STATUS=telegram: bad gateway MAINPID=1  READY=1 x"; got != want {
		t.Errorf("systemd got %q, want %q", got, want)
	}

	if err := n.Status(strings.Repeat("é", maxStatus)); err != nil {
		t.Fatal(err)
	}
	got = strings.TrimPrefix(next(), "STATUS=")
	if len(got) > maxStatus || !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("long status: %d bytes %q..., want at most %d bytes cut at a rune boundary", len(got), got[:8], maxStatus)
	}
}

func TestNotifierOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	var n Notifier
	for name, send := range map[string]func() error{
		"Ready": n.Ready, "Watchdog": n.Watchdog, "Stopping": n.Stopping,
		"Status": func() error { return n.Status("x") },
	} {
		if err := send(); err != nil {
			t.Errorf("%s without NOTIFY_SOCKET: %v, want a silent no-op", name, err)
		}
	}
}

func TestNotifierReportsDeadSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	if err := (Notifier{}).Ready(); err == nil {
		t.Error("Ready to a socket nobody listens on: no error")
	}
}

func TestWatchdogInterval(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	tests := []struct {
		name      string
		usec, pid string
		want      time.Duration
		wantOK    bool
	}{
		{"for this process", "30000000", self, 15 * time.Second, true},
		{"no pid given", "30000000", "", 15 * time.Second, true},
		{"for another process", "30000000", strconv.Itoa(os.Getpid() + 1), 0, false},
		{"no watchdog", "", "", 0, false},
		{"malformed", "thirty", self, 0, false},
		{"zero", "0", self, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setOrUnset(t, "WATCHDOG_USEC", tt.usec)
			setOrUnset(t, "WATCHDOG_PID", tt.pid)
			got, ok := Notifier{}.WatchdogInterval()
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %s, %v; want %s, %v", tt.usec, tt.pid, got, ok, tt.want, tt.wantOK)
			}
			// The variables stay for the next call.
			if tt.usec != "" && os.Getenv("WATCHDOG_USEC") != tt.usec {
				t.Error("WatchdogInterval removed WATCHDOG_USEC")
			}
		})
	}
}

// setOrUnset sets key for the test, or unsets it when value is empty;
// t.Setenv restores the old value afterwards either way.
func setOrUnset(t *testing.T, key, value string) {
	t.Setenv(key, value)
	if value == "" {
		os.Unsetenv(key)
	}
}
