package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/slack/slacktest"
)

// pairSlack pairs sAlice's DM with the bot and returns the DM.
func pairSlack(e *env, fake *slacktest.Server) string {
	e.t.Helper()
	dm := slacktest.DM(sAlice)
	fake.SendDM(sAlice, "/pair "+e.mintFor("slack"))
	waitSlack(e.t, fake, dm, "Paired")
	return dm
}

// countSlack counts the bot's messages in channel that show want.
func countSlack(fake *slacktest.Server, channel, want string) int {
	n := 0
	for _, m := range fake.Sent(channel) {
		if strings.Contains(m.Shown(), want) {
			n++
		}
	}
	return n
}

// TestE2ESlackRevokedWhileRunning: a Slack token revoked while latch runs
// ends the daemon with ErrConfig (on which `latch run` exits 78), its
// message naming the token and not showing it, where it used to log and
// run on deaf (app token) or mute (bot token). The reply that met the
// refused bot token is not lost: a start with a working token sends it,
// once.
func TestE2ESlackRevokedWhileRunning(t *testing.T) {
	for _, tc := range []struct {
		key    string
		revoke func(*slacktest.Server)
		fix    func(*slacktest.Server)
	}{
		{"bot_token", func(f *slacktest.Server) { f.RefuseBotToken(true) }, func(f *slacktest.Server) { f.RefuseBotToken(false) }},
		{"app_token", func(f *slacktest.Server) { f.RefuseSockets(true); f.DropSockets() }, func(f *slacktest.Server) { f.RefuseSockets(false) }},
	} {
		t.Run(tc.key, func(t *testing.T) {
			e := newEnv(t)
			fake := withSlack(e)
			r := e.start()
			dm := pairSlack(e, fake)
			tc.revoke(fake)
			fake.SendDM(sAlice, "!echo met-the-refusal")
			select {
			case err := <-r.done:
				close(r.done)
				if !errors.Is(err, ErrConfig) || !errors.Is(err, gateways.ErrUnauthorized) {
					t.Fatalf("the daemon ended with %v, want ErrConfig and ErrUnauthorized", err)
				}
				if msg := err.Error(); !strings.Contains(msg, tc.key) || strings.Contains(msg, "e2eSLACK") {
					t.Errorf("the error %q should name %s and not show a token", msg, tc.key)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the daemon runs on with the %s refused", tc.key)
			}
			tc.fix(fake)
			e.start()
			waitSlack(t, fake, dm, "met-the-refusal")
			fake.SendDM(sAlice, "!echo after")
			waitSlack(t, fake, dm, "after")
			if n := countSlack(fake, dm, "met-the-refusal"); n != 1 {
				t.Errorf("the command sent as the token was refused was answered %d times", n)
			}
		})
	}
}
