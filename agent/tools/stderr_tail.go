package tools

import (
	"strings"
	"sync"
)

// StderrTail keeps the last 4 KiB a child wrote to its standard error (an
// MCP server, a coding agent CLI), for the reason it failed. It is safe
// for concurrent use.
type StderrTail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *StderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4<<10 {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-4<<10:]...)
	}
	return len(p), nil
}

// LastLine is the last line written, trimmed.
func (t *StderrTail) LastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
