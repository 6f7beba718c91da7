package doctor

import (
	"strings"
	"testing"

	"github.com/latchd/latch/gateways/slack/slacktest"
)

const (
	slackApp = "xapp-1-A0LATCH-1-appsecretvalue"
	slackBot = "xoxb-1-2-botsecretvalue"
)

// TestSlackCheck: both tokens are tried as the gateway uses them, a
// missing scope is named with the manifest as the fix, a refused token
// fails with the way to a new one, and no token shows.
func TestSlackCheck(t *testing.T) {
	srv := slacktest.New(slackBot, slackApp)
	defer srv.Close()
	conf := func(app string) string {
		return tomlConfig("slack.app_token", app, "slack.bot_token", slackBot, "slack.api_url", strings.TrimSuffix(srv.URL(), "/"))
	}
	rep := newFixture(t, conf(slackApp)).run(t)
	wantCheck(t, rep, "slack", OK, []string{"@latch", "every scope"}, nil)
	srv.Scopes = "chat:write"
	rep = newFixture(t, conf(slackApp)).run(t)
	wantCheck(t, rep, "slack", Fail, []string{"im:history", "files:write"}, []string{"manifest.yaml", "reinstall"})
	rep = newFixture(t, conf("xapp-1-A0LATCH-1-wrongsecretvalue")).run(t)
	wantCheck(t, rep, "slack", Fail, []string{"app token", "invalid_auth"}, []string{"App-Level Tokens"})
	assertNoSecrets(t, rep)
	for _, c := range rep.Checks {
		if strings.Contains(c.Detail+c.Fix, "secretvalue") {
			t.Errorf("check %s shows a token: %s %s", c.Name, c.Detail, c.Fix)
		}
	}
	if rep := newFixture(t, tomlConfig()).run(t); check(t, rep, "slack").Status != Skip {
		t.Error("no tokens: the check does not skip")
	}
}
