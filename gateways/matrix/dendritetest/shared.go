package dendritetest

import (
	"os"
	"sync"
	"testing"
)

// shared is the one server of a test binary (see Shared).
var shared struct {
	mu     sync.Mutex
	server *Server
	dir    string
	err    error
}

// Shared is one server for every test of the package, started by the first
// test that asks and stopped by StopShared, which the package's TestMain
// calls after m.Run. Starting Dendrite takes seconds; tests that share it
// register users of their own (unique localparts) so they do not meet.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := Binaries(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "dendritetest")
		if shared.err == nil {
			shared.server, shared.err = Launch(bin, shared.dir, Options{})
		}
	}
	if shared.err != nil {
		t.Fatalf("start the shared dendrite: %v", shared.err)
	}
	s := shared.server
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dendrite log (tail):\n%s", s.LogTail(60))
		}
	})
	return s
}

// StopShared stops the shared server, if one was started, and removes its
// files.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server != nil {
		shared.server.Close()
		shared.server = nil
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
		shared.dir = ""
	}
}
