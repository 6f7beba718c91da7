// Package telegram is latch's adapter for the Telegram Bot API. It long-polls
// getUpdates through go-telegram-bot-api (or, with a webhook configured,
// takes Telegram's webhook deliveries: see webhook.go), hands every update
// to the gateway sink before confirming it to Telegram, and renders replies
// within Telegram's limits: plain replies (Send), agent turns streamed into
// edited messages with tool lines and approval buttons (RenderTurn; Markdown
// to HTML in tgmd), files in and out, and button presses. Everything posted
// into a chat is paced per chat and per bot (see post). It only translates;
// policy lives in package gateways.
//
// The bot token is part of every request URL, so any error that mentions a
// URL would leak it. Every error this package logs or returns passes through
// scrub first (which removes the webhook secret too), and the library's
// debug logging stays off.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"github.com/latchd/latch/gateways/internal/loopback"
	"github.com/latchd/latch/turn"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"golang.org/x/time/rate"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/gateways/internal/typing"
	"github.com/latchd/latch/logkey"
)

const (
	gatewayName = "telegram"
	// DefaultAPIURL is the public Bot API.
	DefaultAPIURL = "https://api.telegram.org"
	// DefaultPollTimeout is how long one getUpdates long poll waits.
	DefaultPollTimeout = 30 * time.Second
	// requestSlack is added to the poll timeout to bound every request, so a
	// silent connection is noticed without cutting a long poll short.
	requestSlack = 10 * time.Second
	// sendRate keeps latch under Telegram's ~30 messages per second per bot.
	sendRate = 25
)

// ErrUnauthorized means the Bot API rejected the token. Retrying cannot fix
// it: the configuration must change. It wraps adapter.ErrUnauthorized.
var ErrUnauthorized error = unauthorizedError{}

type unauthorizedError struct{}

func (unauthorizedError) Error() string {
	return "telegram: the bot token was rejected by the Bot API (401 Unauthorized); check [telegram] token"
}

func (unauthorizedError) Unwrap() error { return adapter.ErrUnauthorized }

// ErrEmptyReply is returned by Send for a reply with no visible text, which
// Telegram would reject.
var ErrEmptyReply = errors.New("telegram: empty reply")

var errNotStarted = errors.New("telegram: gateway not started")

// Config configures the Telegram gateway.
type Config struct {
	// Token is the bot token from @BotFather. It is a secret.
	Token string
	// APIURL is the Bot API base URL; DefaultAPIURL if empty. A self-hosted
	// Bot API server or a test fake goes here.
	APIURL string
	// PollTimeout is the getUpdates long-poll wait; DefaultPollTimeout if
	// zero. It is sent in whole seconds.
	PollTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries after an
	// error (defaults 1s and 60s). Tests shorten them.
	MinBackoff, MaxBackoff time.Duration
	// Verbosity is how much of a turn's tool use the chat sees:
	// VerbosityQuiet, VerbosityNormal (the default) or VerbosityVerbose.
	Verbosity string
	// AllowGroups is [telegram] allow_groups: a group may be latched. The
	// gateway only uses it to warn at Start when the bot's privacy mode
	// would hide the owner's messages in a group (see checkPrivacy).
	AllowGroups bool

	// WebhookURL, when set, switches from polling to webhook mode: the
	// public HTTPS URL Telegram delivers updates to (plain HTTP only on
	// loopback). Its path is the one the listener serves.
	WebhookURL string
	// WebhookListen is the host:port the plain-HTTP webhook listener binds
	// (DefaultWebhookListen if empty); a reverse proxy terminates TLS.
	WebhookListen string
	// WebhookSecret is the secret_token Telegram sends with every
	// delivery (1-256 characters of A-Z a-z 0-9 _ -). It is a secret:
	// whoever knows it can post updates as if from the latched chat.
	WebhookSecret string
	// WebhookCheck is how often getWebhookInfo is asked (default
	// DefaultWebhookCheck). Tests shorten it.
	WebhookCheck time.Duration
}

// Verbosity levels ([telegram] verbosity).
const (
	VerbosityQuiet   = turn.VerbosityQuiet
	VerbosityNormal  = turn.VerbosityNormal
	VerbosityVerbose = turn.VerbosityVerbose
)

// Gateway is one Telegram bot. It implements adapter.Gateway and
// adapter.PairLinker.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	http    *http.Client
	limiter *rate.Limiter
	timing  turnTiming
	// chatEvery paces each chat (chatInterval; tests not about pacing
	// shorten it), groupWindow each group (groupWindow; tests of group
	// pacing shorten it, with the fake's window).
	chatEvery   time.Duration
	groupWindow time.Duration

	mu  sync.Mutex
	api *tgbotapi.BotAPI // set by Start; copied per call, see bot
	// menuDue is set by Start: the next Run sets the command menu beside
	// its first poll (setMenu), rather than Start waiting for it.
	menuDue bool
	info    adapter.Info
	chats   map[int64]*rate.Limiter // per-chat pacing, see post
	// topics is the forum topic latch last answered in, per chat (see
	// topic.go), also stored in the cursor (see topicstate.go):
	// topicsRead is set once the stored ones were read, topicsStored is
	// topics.changes as last stored, and topicsChanged wakes Run's saver.
	topics        topicBook
	topicsRead    bool
	topicsStored  uint64
	topicsChanged chan struct{}
	// cursorMu orders the writes of the cursor (see ingest), so that none
	// is older than the one before it. It is held across Ingest, never
	// while holding mu.
	cursorMu sync.Mutex
	// typing leaves out a "typing…" request while the last one shows.
	typing *typing.Gate
	// approvals remembers the text of recent approval requests, so that
	// AnswerCallback can append the outcome to it.
	approvals approvalTexts
	// hook is the webhook listener Start bound and Run will serve.
	hook *webhook
}

var (
	_ adapter.Gateway          = (*Gateway)(nil)
	_ adapter.PairLinker       = (*Gateway)(nil)
	_ adapter.CallbackAnswerer = (*Gateway)(nil)
	_ adapter.Downloader       = (*Gateway)(nil)
)

// New returns a gateway for cfg. It does not touch the network until Start.
// log should already name the gateway (the daemon adds gateway=telegram).
func New(cfg Config, log *slog.Logger) *Gateway {
	cfg.Token = strings.TrimSpace(cfg.Token)
	cfg.APIURL = strings.TrimRight(strings.TrimSpace(cfg.APIURL), "/")
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = DefaultPollTimeout
	}
	cfg.MinBackoff, cfg.MaxBackoff = retry.Limits(cfg.MinBackoff, cfg.MaxBackoff)
	cfg.WebhookURL = strings.TrimSpace(cfg.WebhookURL)
	if cfg.WebhookListen = strings.TrimSpace(cfg.WebhookListen); cfg.WebhookListen == "" {
		cfg.WebhookListen = DefaultWebhookListen
	}
	if cfg.WebhookCheck <= 0 {
		cfg.WebhookCheck = DefaultWebhookCheck
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if v, ok := turn.ParseVerbosity(cfg.Verbosity); ok {
		cfg.Verbosity = v
	} else {
		log.Warn("unknown [telegram] verbosity; using normal", "verbosity", cfg.Verbosity)
		cfg.Verbosity = v
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	return &Gateway{
		cfg: cfg,
		log: log,
		http: &http.Client{
			Transport: transport,
			// A redirect would carry the token in its path to wherever it
			// points; Telegram never redirects API calls.
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("redirect refused: the Bot API does not redirect")
			},
		},
		limiter: rate.NewLimiter(sendRate, sendRate),
		chats:   map[int64]*rate.Limiter{},
		typing:  typing.New(typing.Fresh),
		timing:  defaultTiming,
		// A change of topic needs storing once; one wake-up covers any
		// number of changes made before the saver runs.
		topicsChanged: make(chan struct{}, 1),
		// One send or edit per chat per second, and 20 a minute into a
		// group, as Telegram asks.
		chatEvery:   chatInterval,
		groupWindow: groupWindow,
	}
}

// Name is the gateway's configuration key, "telegram".
func (g *Gateway) Name() string { return gatewayName }

// Info reports the bot name and connection state.
func (g *Gateway) Info() adapter.Info {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.info
}

// PairLink is the deep link that opens the bot and sends "/start <code>", or
// "" while the bot name is unknown.
func (g *Gateway) PairLink(code string) string { return StartLink(g.Info().BotName, code) }

// StartLink is the deep link that opens the bot named bot and sends
// "/start <code>", or "" when bot is "".
func StartLink(bot, code string) string {
	if bot == "" {
		return ""
	}
	return "https://t.me/" + bot + "?start=" + url.QueryEscape(code)
}

// Start verifies the token with getMe; the next Run registers the bot's
// commands (setMenu). For polling, a webhook still set is removed by Run
// when its poll meets the 409 that says so (onConflict), keeping pending
// updates; in webhook mode Start binds the listener and sets the webhook. A rejected token gives
// ErrUnauthorized; any other error is transient and Start may be called
// again.
func (g *Gateway) Start(ctx context.Context) error {
	if g.cfg.Token == "" {
		return errors.New("telegram: no bot token configured ([telegram] token)")
	}
	endpoint, err := g.endpoint()
	if err != nil {
		return err
	}
	api, err := tgbotapi.NewBotAPIWithClient(g.cfg.Token, endpoint, g.client(ctx))
	if err != nil {
		err = g.startError(err)
		g.setStatus(err)
		return err
	}
	api.Debug = false // debug logging prints request parameters
	g.mu.Lock()
	g.api = api
	g.info.BotName = api.Self.UserName
	g.menuDue = true
	g.mu.Unlock()
	g.setStatus(nil)
	g.log.Info("connected to the Bot API", "bot", api.Self.UserName)
	g.checkPrivacy(api.Self)

	// In polling mode a webhook still set is deleted by Run when its
	// first poll meets the 409 that says so (onConflict), not here.
	if g.webhookMode() {
		if err := g.startWebhook(ctx); err != nil {
			g.setStatus(err)
			return err
		}
	}
	return nil
}

// setMenu registers the bot's command menu once after each Start. It is
// no condition of receiving messages, so Run does it beside its first
// poll: a start waits one Bot API round trip less (on the real API some
// 50–200 ms). A failure is logged and ignored.
func (g *Gateway) setMenu(ctx context.Context) {
	g.mu.Lock()
	due := g.menuDue
	g.menuDue = false
	g.mu.Unlock()
	if !due {
		return
	}
	if _, err := g.request(ctx, tgbotapi.NewSetMyCommands(commands()...)); err != nil && ctx.Err() == nil {
		g.log.Debug("setMyCommands failed; ignored", logkey.Err, err)
	}
}

// checkPrivacy warns when groups may be latched but the bot's privacy mode
// is on (as it is for every new bot). Telegram then passes a bot only the
// group messages meant for it: commands, replies to its messages and
// mentions of it. /pair works in the group, but the owner's plain messages
// and !commands there never reach latch, and nothing else would say why.
func (g *Gateway) checkPrivacy(self tgbotapi.User) {
	if !g.cfg.AllowGroups || self.CanReadAllGroupMessages {
		return
	}
	g.log.Warn("allow_groups is set but the bot's privacy mode is on: in a group Telegram passes the bot "+
		"only /commands, replies to its messages and @mentions, so the owner's other messages and !commands "+
		"there never reach latch. To fix it, send /setprivacy to @BotFather, choose the bot and Disable, "+
		"then remove the bot from the group and add it again (or make the bot an administrator of the group)",
		"bot", self.UserName)
}

// commands is the bot's command menu.
func commands() []tgbotapi.BotCommand {
	return []tgbotapi.BotCommand{
		{Command: "new", Description: "Start a new conversation"},
		{Command: "stop", Description: "Stop the running task"},
		{Command: "status", Description: "Show latch's status"},
		{Command: "jobs", Description: "List scheduled jobs"},
		{Command: "help", Description: "Show help"},
	}
}

// startError turns a getMe failure into an error that says what to fix.
func (g *Gateway) startError(err error) error {
	err = g.scrub(err)
	var apiErr *tgbotapi.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case http.StatusUnauthorized:
			return ErrUnauthorized
		case http.StatusNotFound:
			return fmt.Errorf("telegram: the Bot API answered 404 Not Found to getMe; check [telegram] token and api_url: %w", err)
		}
	}
	return fmt.Errorf("telegram: getMe: %w", err)
}

// endpoint is the library's endpoint format: base URL, then /bot<token>/<method>.
func (g *Gateway) endpoint() (string, error) {
	u, err := url.Parse(g.cfg.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("telegram: invalid api_url %q: want an http(s) URL", g.cfg.APIURL)
	}
	if u.Scheme == "http" && !loopback.Host(u.Hostname()) {
		g.log.Warn("api_url is not HTTPS: the bot token crosses the network in clear text", "api_url", g.cfg.APIURL)
	}
	// The library formats the endpoint with Sprintf: escape any % in the URL.
	return strings.ReplaceAll(g.cfg.APIURL, "%", "%%") + "/bot%s/%s", nil
}

// client returns the HTTP client for calls made under ctx.
func (g *Gateway) client(ctx context.Context) *httpClient {
	return g.clientTimeout(ctx, g.cfg.PollTimeout+requestSlack)
}

func (g *Gateway) clientTimeout(ctx context.Context, timeout time.Duration) *httpClient {
	return &httpClient{ctx: ctx, base: g.http, timeout: timeout, token: g.cfg.Token}
}

// bot returns a copy of the started BotAPI whose requests are bound to ctx.
// The library has no context parameters; a per-call copy lets concurrent
// calls (Run's long poll, Send) carry their own contexts.
func (g *Gateway) bot(ctx context.Context) (*tgbotapi.BotAPI, error) {
	return g.botTimeout(ctx, g.cfg.PollTimeout+requestSlack)
}

// botTimeout is bot with a per-request timeout (uploads need longer).
func (g *Gateway) botTimeout(ctx context.Context, timeout time.Duration) (*tgbotapi.BotAPI, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.api == nil {
		return nil, errNotStarted
	}
	b := *g.api
	b.Client = g.clientTimeout(ctx, timeout)
	return &b, nil
}

// request makes one API call under ctx and returns its scrubbed error.
func (g *Gateway) request(ctx context.Context, c tgbotapi.Chattable) (*tgbotapi.APIResponse, error) {
	b, err := g.bot(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := b.Request(c)
	return resp, g.scrub(err)
}

// setStatus records the outcome of a call for Info.
func (g *Gateway) setStatus(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.info.Connected = err == nil
	if err != nil {
		g.info.LastError = g.scrub(err).Error()
	}
}

// setRequestStatus is setStatus for a call about one chat: an API error
// about that request (a 400 for a bad chat, a 403 from a user who blocked
// the bot) still proves the connection works.
func (g *Gateway) setRequestStatus(err error) {
	var apiErr *tgbotapi.Error
	if errors.As(err, &apiErr) && apiErr.Code >= 400 && apiErr.Code < 500 &&
		apiErr.Code != http.StatusUnauthorized && apiErr.Code != http.StatusTooManyRequests {
		g.setStatus(nil)
		g.mu.Lock()
		g.info.LastError = err.Error()
		g.mu.Unlock()
		return
	}
	g.setStatus(err)
}

// scrub removes the bot token and the webhook secret from err. A secret of
// a few characters is not looked for: it would mangle every message.
func (g *Gateway) scrub(err error) error {
	err = scrub(err, g.cfg.Token)
	if len(g.cfg.WebhookSecret) >= 8 {
		err = scrub(err, g.cfg.WebhookSecret)
	}
	return err
}
