package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSystemdNotify: under systemd (NOTIFY_SOCKET set) the daemon reports
// READY once the store, the socket and the gateway are up, a STATUS line,
// WATCHDOG pings from the dispatch loop, and STOPPING on shutdown.
func TestSystemdNotify(t *testing.T) {
	dir, err := os.MkdirTemp("", "ln")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "200000") // pings every 100 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	got := make(chan string, 100)
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
