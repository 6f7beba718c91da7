package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
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
	kill9(child, pidfile)
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

// TestE2ESlackKill9MidTurnResumes: SIGKILL while an agent's tool runs in a
// turn asked over Slack. After the restart the turn resumes from its last
// completed step in the same conversation: the tool call is not run
// again, the model is told, and the owner is told once.
func TestE2ESlackKill9MidTurnResumes(t *testing.T) {
	e := newEnv(t)
	model := anthropictest.New(modelKey)
	t.Cleanup(model.Close)
	cfgText := fmt.Sprintf("[agent]\nprovider = \"anthropic\"\nmodel = \"claude-test\"\nbase_url = %q\napi_key = %q\n\n[agent.permissions]\nbash = \"allow\"\n",
		model.URL(), modelKey)
	if err := os.WriteFile(filepath.Join(e.home, "config.toml"), []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := slackChild(e)
	child := e.startChild()
	dm := pairSlack(e, fake)
	marker := filepath.Join(e.home, "workspace", "ran")
	model.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo $$ > pgid; echo x >> ran; sleep 30"}`))
	fake.SendDM(sAlice, "run the long job")
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return len(b) > 0 })
	kill9(child, filepath.Join(e.home, "workspace", "pgid"))

	model.Script(anthropictest.Text("The job was cut by a restart. Shall I start it again?"))
	e.startChild()
	waitSlack(t, fake, dm, "continuing from the last completed step")
	waitSlack(t, fake, dm, "Shall I start it again?")
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the tool call ran again", b)
	}
	reqs := model.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "interrupted by a restart") {
		t.Errorf("the model was not told: %s", last)
	}
	for _, want := range []string{"continuing from the last completed step", "Shall I start it again?"} {
		if n := countSlack(fake, dm, want); n != 1 {
			t.Errorf("%q shows in %d messages, want 1", want, n)
		}
	}
}

// kill9 kills a child daemon with SIGKILL, and the command it left running
// (its process group, whose id the command wrote to pgidFile) with it, so
// the orphan does not finish on its own.
func kill9(child *exec.Cmd, pgidFile string) {
	child.Process.Kill()
	child.Wait()
	if b, err := os.ReadFile(pgidFile); err == nil {
		if pgid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pgid > 1 {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}
