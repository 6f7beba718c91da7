package slack

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// Scopes are the bot token scopes latch uses; manifest.yaml grants them
// (a test checks that they agree).
var Scopes = []string{"app_mentions:read", "channels:history", "chat:write", "commands", "files:read",
	"files:write", "groups:history", "im:history", "im:read", "reactions:write"}

// Report is what Check found.
type Report struct {
	Bot, Team string   // the bot's name and the workspace's
	Missing   []string // scopes the bot token lacks
}

// Check verifies both tokens as latch doctor does: the bot token with
// auth.test, whose X-OAuth-Scopes header lists its scopes, and the app
// token by opening a Socket Mode URL (left unused). Its error is scrubbed
// of the tokens, and ErrUnauthorized for a token Slack refuses.
func Check(ctx context.Context, cfg Config) (Report, error) {
	var mu sync.Mutex
	var scopes string
	opts := []slack.Option{slack.OptionAppLevelToken(cfg.AppToken), slack.OptionHTTPClient(&http.Client{Timeout: requestTimeout}),
		slack.OptionOnResponseHeaders(func(path string, h http.Header) {
			if strings.HasSuffix(path, "auth.test") {
				mu.Lock()
				scopes = h.Get("X-OAuth-Scopes")
				mu.Unlock()
			}
		})}
	if cfg.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimSuffix(cfg.APIURL, "/")+"/"))
	}
	g := New(cfg, nil)
	g.api = slack.New(cfg.BotToken, opts...)
	at, err := g.api.AuthTestContext(ctx)
	if err != nil {
		return Report{}, g.startErr("bot_token", err)
	}
	if _, _, err := socketmode.New(g.api).OpenContext(ctx); err != nil {
		return Report{}, g.startErr("app_token", err)
	}
	rep := Report{Bot: at.User, Team: at.Team}
	mu.Lock()
	granted := strings.Split(strings.ReplaceAll(scopes, " ", ""), ",")
	mu.Unlock()
	for _, s := range Scopes {
		if !slices.Contains(granted, s) {
			rep.Missing = append(rep.Missing, s)
		}
	}
	return rep, nil
}
