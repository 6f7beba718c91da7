package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EStopSaysWhatItWaitsFor: a stop while a command runs used to say
// nothing until the grace ran out, and a second Ctrl-C was ignored. Now
// the log says at once what it waits for and how long, the chat is told,
// and StopNow (the second Ctrl-C) ends the grace at once: the command is
// killed and, as after a crash, reported as interrupted, never re-run.
func TestE2EStopSaysWhatItWaitsFor(t *testing.T) {
	e := newEnv(t)
	e.grace = 10 * time.Minute // only StopNow can end this test's stop
	e.stopNow = make(chan struct{})
	r := e.start()
	e.pair()
	marker := filepath.Join(e.home, "ran")
	e.say(owner, "!echo x >> "+marker+"; sleep 600")
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return len(b) > 0 })

	r.cancel() // the first Ctrl-C
	e.waitReply(owner.ID, "latch is stopping on this machine. What is running has 10m0s to finish")
	waitFor(t, func() bool {
		logs := e.logs.String()
		return strings.Contains(logs, "waiting for running jobs to finish") &&
			strings.Contains(logs, "a shell command in telegram chat 1001") && strings.Contains(logs, "grace=10m0s")
	})
	close(e.stopNow) // the second
	select {
	case err := <-r.done:
		close(r.done)
		if err != nil {
			t.Fatalf("daemon Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop at the second Ctrl-C")
	}

	e.stopNow = nil
	e.start()
	e.waitReply(owner.ID, "interrupted by a restart")
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the command ran again", b)
	}
}
