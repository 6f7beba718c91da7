// Package adaptertest holds the helpers the chat adapters' own tests
// share: a buffer that collects a gateway's log lines, bounded waits, and
// running a gateway in the background. Each adapter keeps its fake server
// (telegramtest, discordtest) and what is particular to it.
package adaptertest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitLimit bounds every wait. It is generous on purpose: it only turns a
// hang into a failure.
const WaitLimit = 20 * time.Second

// LogBuffer collects log output from concurrent goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines returns the log lines containing all of the given substrings.
func (l *LogBuffer) Lines(subs ...string) []string {
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

// Logger logs at debug level, as text, to logs and the test's output.
func Logger(t *testing.T, logs io.Writer) *slog.Logger {
	h := slog.NewTextHandler(io.MultiWriter(logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(h)
}

// Context is the test's context bounded by WaitLimit.
func Context(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitLimit)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond until it holds or WaitLimit passes.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitLimit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// Run starts run (a gateway's Run) in the background. The returned stop
// cancels its context and returns its result; it also runs at cleanup.
func Run(t *testing.T, run func(context.Context) error) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- run(ctx) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-errc:
			case <-time.After(WaitLimit):
				result = errors.New("Run did not return after its context ended")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
