package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/slack"
)

// slackManifest is where the app manifest that grants latch's scopes is.
const slackManifest = "gateways/slack/manifest.yaml in latch's source (README: Slack)"

// checkSlack tests both Slack tokens as the gateway uses them (auth.test,
// apps.connections.open) and names the bot scopes the app lacks.
func (r *run) checkSlack(ctx context.Context) Check {
	if r.cfg == nil {
		return skip("needs a config that loads")
	}
	s := r.cfg.Slack
	if !s.Enabled() {
		return skip(fmt.Sprintf("no tokens ([slack] app_token and bot_token, or %s and %s); the Slack gateway is off",
			config.EnvSlackAppToken, config.EnvSlackBotToken))
	}
	rep, err := slack.Check(ctx, slack.Config{AppToken: s.AppToken, BotToken: s.BotToken, APIURL: s.APIURL})
	switch {
	case errors.Is(err, gateways.ErrUnauthorized):
		return fail(err.Error(), fmt.Sprintf("create a new token in the app's settings at https://api.slack.com/apps "+
			"(app token: Basic Information → App-Level Tokens, scope connections:write; bot token: Install App) "+
			"and put it in [slack] app_token_file / bot_token_file (from %s / %s)", s.AppTokenSource, s.BotTokenSource))
	case err != nil:
		return fail(err.Error(), "check the network, or [slack] api_url ("+s.APIURL+")")
	case len(rep.Missing) > 0:
		return fail(fmt.Sprintf("the bot token lacks the scopes %s", strings.Join(rep.Missing, ", ")),
			"add them under OAuth & Permissions → Bot Token Scopes (or recreate the app from "+slackManifest+") and reinstall the app")
	}
	return ok(fmt.Sprintf("@%s in %s, Socket Mode works, every scope granted", rep.Bot, rep.Team))
}
