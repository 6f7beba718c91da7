package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/control"
)

// TestPrintStatusCommands: status says how the daemon ends a command's
// processes, and why it cannot use cgroups when it cannot.
func TestPrintStatusCommands(t *testing.T) {
	for _, tc := range []struct{ commands, want string }{
		{control.CommandsInCgroups, "  commands: a cgroup per command\n"},
		{"no cgroup per command: cgroup v2 is not mounted", "  commands: ended by a walk of /proc (no cgroup per command: cgroup v2 is not mounted)\n"},
	} {
		var b bytes.Buffer
		printStatus(&b, true, control.Status{PID: 7, Version: "v1", StartedAt: time.Now(), Commands: tc.commands}, true)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("status:\n%s\nwant the line %q", b.String(), tc.want)
		}
	}
}

// TestPrintStatusGoroutines: status shows how many goroutines the daemon
// runs and what their stacks take.
func TestPrintStatusGoroutines(t *testing.T) {
	var b bytes.Buffer
	printStatus(&b, true, control.Status{PID: 7, Version: "v1", StartedAt: time.Now(),
		Memory: &control.MemoryInfo{HeapLive: 900_000, Held: 5_000_000, Goroutines: 23, Stacks: 720_896}}, true)
	want := "  memory:   0.9 MB live heap · 5.0 MB held by the Go runtime · 23 goroutines (0.72 MB of stacks)\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("status:\n%s\nwant the line %q", b.String(), want)
	}
}
