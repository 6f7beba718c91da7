// Package slack is latch's Slack gateway: a Slack app in one workspace,
// reached over Socket Mode (a WebSocket the app opens, so no public URL)
// with the slack-go client. It only translates: Slack's events become
// adapter.Message (the team-qualified conversation as ChatID, the
// team-qualified user as UserID, so a latch binds conversation, user and
// workspace), the Hub's replies become chat.postMessage in Slack's mrkdwn,
// escaped so model output can neither ping nor disguise a link.
//
// Nothing is lost and nothing is handled twice: an envelope is
// acknowledged only after Sink.Ingest stored its message (Slack sends an
// unacknowledged envelope again), the cursor remembers per conversation
// the last timestamp and the recent keys handled, and what the owner sent
// while latch was down is read once at start with conversations.history,
// for the latched conversation only.
package slack

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/redact"
	"github.com/latchd/latch/gateways/internal/retry"
)

// Config configures the gateway.
type Config struct {
	// AppToken is the app-level token (xapp-…) with connections:write,
	// for Socket Mode; BotToken the bot token (xoxb-…) for the Web API.
	AppToken, BotToken string
	// APIURL is the Web API's base ("" for https://slack.com/api/).
	APIURL string
	// AllowGroups lets channels where the bot is mentioned pair and talk;
	// by default only the bot's direct messages do.
	AllowGroups bool
	// Verbosity is how much of the tool use a turn shows (turn.Verbosity*).
	Verbosity string
	// MinBackoff and MaxBackoff bound the waits between reconnects.
	MinBackoff, MaxBackoff time.Duration
	// EditInterval paces chat.update of a streaming answer ("" for 1.2 s:
	// chat.update is Tier 3, about 50 a minute,
	// https://api.slack.com/methods/chat.update).
	EditInterval time.Duration
	// PingInterval is how long the socket may go without Slack's ping
	// before it is taken for dead (0: slack-go's default).
	PingInterval time.Duration
	// MaxFile caps a file sent to latch (0: 20 MiB).
	MaxFile int64
}

// Gateway is one Slack app in one workspace.
type Gateway struct {
	cfg   Config
	log   *slog.Logger
	api   *slack.Client
	forms []string // the tokens, as errors and logs must not show them

	mu        sync.Mutex
	team      string // the workspace's id, from auth.test
	botUser   string // the bot's user id
	botID     string // the bot's bot id
	botName   string
	connected bool
	lastErr   string
	owners    map[string]bool // chats known to be the latched one
	texts     map[string]string
	dirty     chan struct{} // an owner chat to store in the cursor
	revoked   chan error    // the bot token's refusal, for Run to end on
	edits     map[string]time.Time
}

const (
	defaultEdit    = 1200 * time.Millisecond
	defaultMaxFile = 20 << 20
	// requestTimeout bounds one Web API call.
	requestTimeout = 30 * time.Second
)

// New returns the gateway; nothing is contacted until Start.
func New(cfg Config, log *slog.Logger) *Gateway {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.EditInterval <= 0 {
		cfg.EditInterval = defaultEdit
	}
	if cfg.MaxFile <= 0 {
		cfg.MaxFile = defaultMaxFile
	}
	cfg.MinBackoff, cfg.MaxBackoff = retry.Limits(cfg.MinBackoff, cfg.MaxBackoff)
	opts := []slack.Option{slack.OptionAppLevelToken(cfg.AppToken),
		slack.OptionHTTPClient(&http.Client{Timeout: requestTimeout})}
	if cfg.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimSuffix(cfg.APIURL, "/")+"/"))
	}
	g := &Gateway{cfg: cfg, log: log.With("gateway", "slack"), api: slack.New(cfg.BotToken, opts...),
		owners: map[string]bool{}, texts: map[string]string{}, dirty: make(chan struct{}, 1), revoked: make(chan error, 1), edits: map[string]time.Time{}}
	for _, t := range []string{cfg.AppToken, cfg.BotToken} {
		g.forms = append(g.forms, redact.URLForms(t)...)
	}
	return g
}

// Name is "slack".
func (g *Gateway) Name() string { return "slack" }

// Start checks both tokens: the bot token with auth.test (which also
// names the workspace and the bot), the app token by opening a Socket
// Mode connection URL (which is left to expire unused).
func (g *Gateway) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	at, err := g.api.AuthTestContext(ctx)
	if err != nil {
		return g.startErr("bot_token", err)
	}
	if _, _, err := socketmode.New(g.api).OpenContext(ctx); err != nil {
		return g.startErr("app_token", err)
	}
	g.mu.Lock()
	g.team, g.botUser, g.botID, g.botName, g.connected = at.TeamID, at.UserID, at.BotID, at.User, true
	g.mu.Unlock()
	g.log.Info("connected", "bot", at.User, "team", at.Team)
	return nil
}

// startErr is Start's error: a refusal for a token Slack does not take.
func (g *Gateway) startErr(key string, err error) error {
	err = g.scrub(err)
	g.noteErr(err)
	if unauthorized(err) {
		return refused(key, err)
	}
	return errors.New("slack: checking [slack] " + key + ": " + err.Error())
}

// refusedError is Slack refusing one of the two tokens (wrong, revoked,
// the app uninstalled): ErrUnauthorized, which the daemon ends on, since
// running on cannot fix it.
type refusedError struct {
	key string // the token's setting: app_token or bot_token
	err error  // Slack's answer, scrubbed
}

func refused(key string, err error) error { return &refusedError{key: key, err: err} }

func (e *refusedError) Error() string {
	return "slack: Slack refused the " + strings.TrimSuffix(e.key, "_token") + " token ([slack] " + e.key + "): " + e.err.Error()
}

func (e *refusedError) Unwrap() []error { return []error{adapter.ErrUnauthorized, e.err} }

// revoke hands Run the refusal of the bot token seen by a Web API call,
// for Run to end with it (the first one is enough).
func (g *Gateway) revoke(err error) {
	select {
	case g.revoked <- err:
	default:
	}
}

// unauthorized: Slack's answer to a token it does not take.
func unauthorized(err error) bool {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type":
			return true
		}
	}
	var sc slack.StatusCodeError
	return errors.As(err, &sc) && sc.Code == http.StatusUnauthorized
}

// Info describes the gateway.
func (g *Gateway) Info() adapter.Info {
	g.mu.Lock()
	defer g.mu.Unlock()
	return adapter.Info{BotName: g.botName, Connected: g.connected, LastError: g.lastErr}
}

// Close has nothing to release: Run's context owns the socket.
func (g *Gateway) Close() error { return nil }

func (g *Gateway) noteErr(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.connected = err == nil
	if err != nil {
		g.lastErr = err.Error()
	}
}

// scrub keeps the tokens out of an error.
func (g *Gateway) scrub(err error) error {
	return redact.Opaque(err, g.forms, adapter.ErrUnauthorized)
}

// ids returns the workspace and bot user.
func (g *Gateway) ids() (team, bot, botID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.team, g.botUser, g.botID
}

// chatID is a conversation's id in latch: team/channel.
func chatID(team, channel string) string { return team + "/" + channel }

// channelOf returns the conversation of a chat id of this workspace.
func (g *Gateway) channelOf(chat string) (string, error) {
	team, ch, ok := strings.Cut(chat, "/")
	if own, _, _ := g.ids(); !ok || team != own || ch == "" || strings.ContainsAny(ch, "/?&#") {
		return "", adapter.Rejected(errors.New("slack: not a conversation of this workspace: " + chat))
	}
	return ch, nil
}

// markOwner notes chat as the latched one, for the cursor to keep it and
// the next start to read its history.
func (g *Gateway) markOwner(chat string) {
	g.mu.Lock()
	known := g.owners[chat]
	g.owners[chat] = true
	g.mu.Unlock()
	if !known {
		select {
		case g.dirty <- struct{}{}:
		default:
		}
	}
}

func (g *Gateway) ownerChats() map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]bool, len(g.owners))
	for k := range g.owners {
		out[k] = true
	}
	return out
}

var _ interface {
	adapter.Gateway
	adapter.TurnRenderer
	adapter.CallbackAnswerer
	adapter.Downloader
	adapter.FileSender
} = (*Gateway)(nil)
