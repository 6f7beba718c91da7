package adaptertest

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestLogBufferLines(t *testing.T) {
	var l LogBuffer
	log := Logger(t, &l)
	log.Info("polling failed", "n", 1)
	log.Warn("polling failed", "n", 2)
	log.Info("other")
	got := l.Lines("polling failed", "level=WARN")
	if len(got) != 1 || !strings.Contains(got[0], "n=2") {
		t.Errorf("Lines = %q, want the one warning", got)
	}
	if n := len(l.Lines()); n != 3 {
		t.Errorf("Lines() = %d lines, want all 3", n)
	}
}

func TestRun(t *testing.T) {
	errStopped := errors.New("stopped")
	started := make(chan struct{})
	stop := Run(t, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return errStopped
	})
	<-started
	if err := stop(); err != errStopped {
		t.Errorf("stop = %v, want Run's result", err)
	}
	if err := stop(); err != errStopped {
		t.Errorf("a second stop = %v, want the same result", err)
	}
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond polled %d times, want until it held", n)
	}
}
