package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/slack/slacktest"
)

// slackChild gives e's child daemons (startChild) a Slack gateway on a
// fake in the test process.
func slackChild(e *env) *slacktest.Server {
	fake := newSlackFake(e)
	e.childEnv = append(e.childEnv, config.EnvSlackAppToken+"="+slackApp, config.EnvSlackBotToken+"="+slackBot,
		config.EnvSlackAPIURL+"="+fake.URL())
	return fake
}

// TestE2ESlackKill9MidCommand kills the daemon process with SIGKILL while
// a command the owner sent over Slack runs. While it is down the owner
// sends two more: one Slack holds as an unacknowledged envelope for the
// next socket, one latch only finds with conversations.history (both
// reach latch by the two ways at the next start). After the restart the
// interrupted command is reported and not run again, and each of the two
// is answered exactly once.
func TestE2ESlackKill9MidCommand(t *testing.T) {
	e := newEnv(t)
	fake := slackChild(e)
	child := e.startChild()
	dm := pairSlack(e, fake)
	marker := filepath.Join(e.home, "ran")
	pidfile := filepath.Join(e.home, "pgid")
	fake.SendDM(sAlice, "!echo $$ > "+pidfile+"; echo x >> "+marker+"; sleep 30")
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return len(b) > 0 })
	child.Process.Kill()
	child.Wait()
	if b, err := os.ReadFile(pidfile); err == nil {
		if pgid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pgid > 1 {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	fake.SendDM(sAlice, "!echo queued-while-down")
	fake.Post(sAlice, dm, "!echo history-while-down", false)

	e.startChild()
	waitSlack(t, fake, dm, "interrupted by a restart")
	waitSlack(t, fake, dm, "queued-while-down")
	waitSlack(t, fake, dm, "history-while-down")
	fake.SendDM(sAlice, "!echo after")
	waitSlack(t, fake, dm, "after")
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the interrupted command ran again", b)
	}
	for _, want := range []string{"queued-while-down", "history-while-down", "interrupted by a restart"} {
		if n := countSlack(fake, dm, want); n != 1 {
			t.Errorf("%q shows in %d messages, want 1", want, n)
		}
	}
	// Every envelope is acknowledged in the end, those the killed daemon
	// had been sent too (the fake sends them again on the new socket).
	waitFor(t, func() bool { return fake.Unacked() == 0 })
}
