package slack_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/gateways/slack"
	"github.com/latchd/latch/gateways/slack/slacktest"
)

// TestCheck: doctor's check names the bot, the scopes missing, and a
// refused token as ErrUnauthorized without showing it.
func TestCheck(t *testing.T) {
	srv := slacktest.New(botToken, appToken)
	t.Cleanup(srv.Close)
	ctx := adaptertest.Context(t)
	cfg := slack.Config{BotToken: botToken, AppToken: appToken, APIURL: srv.URL()}
	rep, err := slack.Check(ctx, cfg)
	if err != nil || rep.Bot != "latch" || len(rep.Missing) != 0 {
		t.Fatalf("Check = %+v, %v", rep, err)
	}
	srv.Scopes = "chat:write,im:history"
	if rep, err := slack.Check(ctx, cfg); err != nil || !slices.Contains(rep.Missing, "files:write") || slices.Contains(rep.Missing, "chat:write") {
		t.Errorf("Check with scopes missing = %+v, %v", rep, err)
	}
	for _, bad := range []slack.Config{{BotToken: "xoxb-wrong", AppToken: appToken, APIURL: srv.URL()},
		{BotToken: botToken, AppToken: "xapp-wrong", APIURL: srv.URL()}} {
		_, err := slack.Check(ctx, bad)
		if !errors.Is(err, gateways.ErrUnauthorized) || strings.Contains(err.Error(), "wrong") {
			t.Errorf("Check with a refused token = %v", err)
		}
	}
}

// TestManifestGrantsTheScopes: the manifest a user pastes grants every
// scope latch checks for, with Socket Mode on and the events latch reads.
func TestManifestGrantsTheScopes(t *testing.T) {
	b, err := os.ReadFile("manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := string(b)
	for _, s := range slack.Scopes {
		if !strings.Contains(m, "      - "+s+" ") && !strings.Contains(m, "      - "+s+"\n") {
			t.Errorf("the manifest does not grant %s", s)
		}
	}
	// Slack refuses a "/name" typed in a message unless the app has the
	// command: every one the Hub answers (its help, and the latch
	// request's typed answers) must be in the manifest.
	commands := regexp.MustCompile(`/[a-z]+`).FindAllString(gateways.HelpText, -1)
	commands = append(commands, "/pair", "/approvelatch", "/denylatch")
	for _, c := range commands {
		if !strings.Contains(m, "command: "+c+"\n") {
			t.Errorf("the manifest lacks the slash command %s", c)
		}
	}
	for _, want := range []string{"socket_mode_enabled: true", "- message.im", "- app_mention", "is_enabled: true"} {
		if !strings.Contains(m, want) {
			t.Errorf("the manifest lacks %q", want)
		}
	}
}
