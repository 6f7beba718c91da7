package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/slack/slacktest"
	"github.com/latchd/latch/turn"
)

const (
	slackBot = "xoxb-1-2-e2eSLACKbotSecret"
	slackApp = "xapp-1-A0LATCH-3-e2eSLACKappSecret"
)

var (
	sAlice = slacktest.User{ID: "U0ALICE"}
	sBob   = slacktest.User{ID: "U0BOB"}
	// sFar has Alice's user id, in another workspace.
	sFar = slacktest.User{ID: "U0ALICE", Team: "T0FAR"}
)

// withSlack adds a Slack gateway on a fake to e's daemons.
func withSlack(e *env) *slacktest.Server {
	fake := newSlackFake(e)
	prev := e.tweak
	e.tweak = func(c *config.Config) {
		if prev != nil {
			prev(c)
		}
		c.Slack.AppToken, c.Slack.BotToken, c.Slack.APIURL = slackApp, slackBot, fake.URL()
	}
	return fake
}

// newSlackFake is a Slack fake for e that, once the test is done, checks
// that no Slack token reached the daemon's logs.
func newSlackFake(e *env) *slacktest.Server {
	fake := slacktest.New(slackBot, slackApp)
	e.t.Cleanup(func() {
		fake.Close()
		if strings.Contains(e.logs.String(), "e2eSLACK") {
			e.t.Error("a Slack token is in the logs")
		}
	})
	return fake
}

// waitSlack polls the fake (it has no change feed a test can select on
// for a given text) until the bot's message in channel shows want.
func waitSlack(t *testing.T, fake *slacktest.Server, channel, want string) slacktest.Message {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range fake.Sent(channel) {
			if strings.Contains(m.Shown(), want) {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Slack message to %s containing %q; sent %+v", channel, want, fake.Sent(channel))
		}
		select {
		case <-fake.Changed():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestE2ESlack: pairing by DM, strangers and another workspace's user of
// the same id ignored, !echo, and a message sent while the daemon was
// down answered after the restart exactly once.
func TestE2ESlack(t *testing.T) {
	e := newEnv(t)
	fake := withSlack(e)
	r := e.start()
	code := e.mintFor("slack")
	dm := slacktest.DM(sAlice)
	fake.SendDM(sAlice, "/pair "+code)
	waitSlack(t, fake, dm, "Paired")
	fake.SendDM(sBob, "/pair "+code)
	fake.SendDM(sBob, "!echo bob")
	fake.SendDM(sFar, "!echo far")
	fake.SendDM(sAlice, "!echo hi from slack <!channel>")
	m := waitSlack(t, fake, dm, "hi from slack")
	if m.Pings() {
		t.Errorf("the answer %q would ping", m.Text)
	}
	for _, s := range fake.Sent(dm) {
		if strings.Contains(s.Shown(), "far") || strings.Contains(s.Shown(), "bob") {
			t.Errorf("a stranger's command ran: %q", s.Shown())
		}
	}
	if got := fake.Sent(slacktest.DM(sBob)); len(got) != 0 {
		t.Errorf("a stranger got %d replies", len(got))
	}
	r.stop(t)

	fake.Post(sAlice, dm, "!echo while-down", false)
	e.start()
	waitSlack(t, fake, dm, "while-down")
	fake.SendDM(sAlice, "!echo after")
	waitSlack(t, fake, dm, "after")
	n := 0
	for _, s := range fake.Sent(dm) {
		if strings.Contains(s.Shown(), "while-down") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the message sent while down was answered %d times", n)
	}
}

// TestE2ESlackApprovalButton: an agent turn over Slack whose tool call is
// approved by pressing the button; a stranger's press does nothing, and
// the request loses its buttons once answered.
func TestE2ESlackApprovalButton(t *testing.T) {
	e, model, fake, dm := slackWithModel(t)
	model.Script(
		anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo pressed > pressed.txt"}`),
		anthropictest.Text("Done over Slack."),
	)
	fake.SendDM(sAlice, "please run it")
	req := waitSlack(t, fake, dm, "bash")
	if !req.HasButtons() {
		t.Fatalf("no buttons on %q", req.Shown())
	}
	approve := approvePayload(req)
	fake.Press(sBob, dm, req.TS, approve)
	fake.Press(sFar, dm, req.TS, approve)
	// Once /status, sent after them, is answered, they have been handled
	// (a !command would queue behind the waiting turn): the tool has not
	// run.
	before := len(fake.Sent(dm))
	fake.SendDM(sAlice, "/status")
	deadline := time.Now().Add(30 * time.Second)
	for len(fake.Sent(dm)) == before && time.Now().Before(deadline) {
		select {
		case <-fake.Changed():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, "workspace", "pressed.txt")); err == nil {
		t.Fatal("a stranger's press approved the call")
	}
	fake.Press(sAlice, dm, req.TS, approve)
	waitSlack(t, fake, dm, "Done over Slack.")
	if b, _ := os.ReadFile(filepath.Join(e.home, "workspace", "pressed.txt")); string(b) != "pressed\n" {
		t.Fatalf("pressed.txt = %q", b)
	}
	m := waitSlack(t, fake, dm, "approved")
	if m.TS != req.TS || m.HasButtons() {
		t.Errorf("after the press the request is %q with buttons %v", m.Shown(), m.HasButtons())
	}
}

// slackWithModel starts a daemon with a model and a Slack gateway, sAlice
// paired in her DM, which it returns.
func slackWithModel(t *testing.T) (*env, *anthropictest.Server, *slacktest.Server, string) {
	t.Helper()
	e := newEnv(t)
	model := withModel(e)
	fake := withSlack(e)
	e.start()
	return e, model, fake, pairSlack(e, fake)
}

// approvePayload is the Approve button's payload on an approval request.
func approvePayload(req slacktest.Message) string {
	return turn.Payload(turn.KindApprove, strings.TrimSpace(between(string(req.Blocks), `"value":"approve:`, `"`)))
}

// between is the text of s after from and before to.
func between(s, from, to string) string {
	_, after, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(after, to)
	return v
}
