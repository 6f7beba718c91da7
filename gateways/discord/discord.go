// Package discord is latch's adapter for Discord. It keeps a gateway
// (WebSocket) session through discordgo for inbound messages and button
// presses, sends through Discord's REST API with discordgo's rate limiter,
// and hands every message to the gateway sink. It only translates; policy
// lives in package gateways.
//
// Discord has no update offset to confirm, so the cursor latch stores is
// the id (a snowflake, which grows with time) of the last message handled
// in each recently active channel. Live messages at or below it are
// duplicates and dropped; on start-up, and whenever the gateway had to
// start a new session instead of resuming, the channels in the cursor are
// backfilled from their history (messages after the cursor, in order)
// before live messages go on. A backfill outlasts rate limits and outages
// (it waits and asks again); a channel leaves the cursor only when Discord
// says latch lost access to it, and the latched chat's channel is the
// last to make room for another.
//
// The bot token travels in a header and in the IDENTIFY payload, never in a
// URL; but discordgo's errors carry the request (header included) and its
// debug log prints IDENTIFY. So every error this package returns or logs is
// scrubbed, discordgo's own log lines are routed through a scrubber, and
// its debug output stays off.
package discord

import (
	"context"
	"errors"
	"fmt"
	"github.com/latchd/latch/gateways/internal/loopback"
	"github.com/latchd/latch/turn"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/gateways/internal/typing"
)

const (
	gatewayName = "discord"
	// DefaultAPIURL is Discord itself.
	DefaultAPIURL = "https://discord.com"
	// DefaultMaxUpload is the largest file SendFile uploads: Discord's
	// limit in a server without boosts and in DMs.
	DefaultMaxUpload = 10 << 20
	// requestTimeout bounds one REST call; uploadTimeout one upload or
	// download.
	requestTimeout = 30 * time.Second
	uploadTimeout  = 5 * time.Minute
	// openTimeout bounds a gateway handshake (dial to READY or RESUMED),
	// also of discordgo's own reconnects, so a silent server cannot wedge
	// them.
	openTimeout = 30 * time.Second
	// closeGrace is how long closing waits for a handshake in progress.
	closeGrace = 5 * time.Second
)

// ErrUnauthorized means Discord rejected the bot token. Retrying cannot fix
// it: the configuration must change. It wraps adapter.ErrUnauthorized.
var ErrUnauthorized error = unauthorizedError{}

type unauthorizedError struct{}

func (unauthorizedError) Error() string {
	return "discord: the bot token was rejected by Discord (401 Unauthorized); check [discord] token"
}

func (unauthorizedError) Unwrap() error { return adapter.ErrUnauthorized }

var (
	// ErrEmptyReply is returned by Send for a reply with no visible text.
	ErrEmptyReply = errors.New("discord: empty reply")
	// ErrFileTooLarge is wrapped by SendFile and Download when a file is
	// over the limit that applies.
	ErrFileTooLarge = errors.New("file too large")
	errNotStarted   = errors.New("discord: gateway not started")
	errClosed       = errors.New("discord: gateway closed")
)

// Config configures the Discord gateway.
type Config struct {
	// Token is the bot token from the Developer Portal. It is a secret.
	Token string
	// APIURL is the API base (scheme and host); DefaultAPIURL if empty. A
	// test fake goes here. See SetAPIBase: it is process-global.
	APIURL string
	// AllowGroups also reads server (guild) channels, where only messages
	// that mention the bot count. Off: direct messages only.
	AllowGroups bool
	// MaxUpload is SendFile's limit in bytes; DefaultMaxUpload if zero.
	MaxUpload int64
	// MinBackoff and MaxBackoff bound the wait between retries after an
	// error (defaults 1s and 60s). Tests shorten them.
	MinBackoff, MaxBackoff time.Duration
	// EditInterval is the least time between two edits of messages in one
	// channel (streaming answers, tool lines); DefaultEditInterval if
	// zero. Tests shorten it.
	EditInterval time.Duration
	// Verbosity is how much of a turn's tool use the chat sees:
	// turn.VerbosityQuiet, VerbosityNormal (the default) or VerbosityVerbose.
	Verbosity string
}

// Gateway is one Discord bot. It implements adapter.Gateway,
// CallbackAnswerer, Downloader, FileSender and TurnRenderer.
type Gateway struct {
	cfg      Config
	log      *slog.Logger
	http     *http.Client // REST, through discordgo
	download *http.Client // attachments, without the token
	queue    eventQueue
	edits    *editPacer
	timing   turnTiming    // of rendered turns
	pairWait time.Duration // how long a /pair response waits for the Hub's reply

	mu       sync.Mutex
	session  *discordgo.Session // set by Start
	net      *netGuard          // the session's gateway connections
	botID    string
	appID    string // the application's id, from READY
	info     adapter.Info
	readies  int                     // READY events seen: the first is Start's
	answered map[string]reply        // channels sent to since the cursor last noted them (cursor.markAnswered)
	pairs    map[string]*pendingPair // /pair uses waiting for the Hub's reply, by interaction id
	texts    textMemory              // content of recent messages with buttons
	typing   *typing.Gate            // leaves out "typing…" while the last one shows
}

var (
	_ adapter.Gateway          = (*Gateway)(nil)
	_ adapter.CallbackAnswerer = (*Gateway)(nil)
	_ adapter.Downloader       = (*Gateway)(nil)
	_ adapter.FileSender       = (*Gateway)(nil)
	_ adapter.TurnRenderer     = (*Gateway)(nil)
)

// New returns a gateway for cfg. It does not touch the network until Start.
// log should already name the gateway (the daemon adds gateway=discord).
func New(cfg Config, log *slog.Logger) *Gateway {
	cfg.Token = strings.TrimSpace(cfg.Token)
	cfg.APIURL = strings.TrimRight(strings.TrimSpace(cfg.APIURL), "/")
	if cfg.APIURL == "" {
		cfg.APIURL = DefaultAPIURL
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	cfg.MinBackoff, cfg.MaxBackoff = retry.Limits(cfg.MinBackoff, cfg.MaxBackoff)
	if cfg.EditInterval <= 0 {
		cfg.EditInterval = DefaultEditInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if v, ok := turn.ParseVerbosity(cfg.Verbosity); ok {
		cfg.Verbosity = v
	} else {
		log.Warn("unknown [discord] verbosity; using normal", "verbosity", cfg.Verbosity)
		cfg.Verbosity = v
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = requestTimeout
	g := &Gateway{
		cfg: cfg,
		log: log,
		http: &http.Client{
			Transport: noteTransport{transport},
			// A redirect would carry the Authorization header on; Discord's
			// API does not redirect.
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("redirect refused: Discord's API does not redirect")
			},
		},
		queue:    newEventQueue(),
		typing:   typing.New(typing.Fresh),
		edits:    newEditPacer(cfg.EditInterval),
		timing:   defaultTiming,
		pairWait: pairAnswerWait,
		answered: map[string]reply{},
		pairs:    map[string]*pendingPair{},
	}
	g.download = &http.Client{Transport: transport, CheckRedirect: g.checkDownloadRedirect}
	return g
}

// Name is the gateway's configuration key, "discord".
func (g *Gateway) Name() string { return gatewayName }

// Info reports the bot name and connection state.
func (g *Gateway) Info() adapter.Info {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.info
}

// Start verifies the token (GET /users/@me), then opens the gateway
// session and waits for READY, and registers the /pair command (a failure
// there is only logged: "/pair CODE" as text works without it). A rejected
// token gives ErrUnauthorized; a refused intent says what to enable; any
// other error is transient and Start may be called again. Messages that
// arrive from here on are queued for Run.
func (g *Gateway) Start(ctx context.Context) error {
	if g.cfg.Token == "" {
		return errors.New("discord: no bot token configured ([discord] token)")
	}
	if err := g.checkAPIURL(); err != nil {
		return err
	}
	if err := SetAPIBase(g.cfg.APIURL); err != nil {
		return err
	}
	g.Close() // a session of an earlier Start
	attachLibraryLog(g)
	s, n := g.newSession()
	var me *discordgo.User
	err := g.call(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) (err error) {
		me, err = s.User("@me", opts...)
		return err
	})
	if err != nil {
		err = g.startError(err)
		g.setError(err)
		return err
	}
	g.mu.Lock()
	g.session, g.net, g.botID = s, n, me.ID
	g.info.BotName = me.Username
	g.readies = 0
	g.mu.Unlock()
	if err := g.open(ctx, s, n); err != nil {
		g.mu.Lock()
		g.session, g.net = nil, nil
		g.mu.Unlock()
		err = g.openError(err)
		g.setError(err)
		return err
	}
	g.log.Info("connected to the Discord gateway", "bot", me.Username)
	g.registerCommands(ctx, s)
	return nil
}

// newSession makes a discordgo session set up for latch: its REST client,
// a guarded WebSocket dialer, quiet logging, events delivered in order.
func (g *Gateway) newSession() (*discordgo.Session, *netGuard) {
	s, _ := discordgo.New("Bot " + g.cfg.Token) // New never fails
	n := &netGuard{pending: map[net.Conn]bool{}}
	s.LogLevel = discordgo.LogWarning // LogDebug would print IDENTIFY, token included
	s.Debug = false
	s.Client = g.http
	s.Dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: openTimeout, NetDialContext: n.dial}
	// Handlers run one after another on the reading goroutine, so messages
	// keep their order; they only queue.
	s.SyncEvents = true
	s.StateEnabled = false
	s.ShouldReconnectOnError = true
	s.ShouldRetryOnRateLimit = false // call waits out a 429 itself, under its context
	// No Message Content intent: latch reads only DMs and server messages
	// that mention the bot, whose content Discord shows without it. Asking
	// for the privileged intent would make the start fail (4014) until the
	// owner switches it on in the Developer Portal, for nothing.
	s.Identify.Intents = discordgo.IntentsDirectMessages
	if g.cfg.AllowGroups {
		s.Identify.Intents |= discordgo.IntentsGuildMessages
	}
	s.AddHandler(g.onReady)
	s.AddHandler(g.onResumed)
	s.AddHandler(func(*discordgo.Session, *discordgo.Connect) { n.established(); g.setConnected(true) })
	s.AddHandler(func(*discordgo.Session, *discordgo.Disconnect) { g.onDisconnect(n) })
	s.AddHandler(g.onMessage)
	s.AddHandler(g.onInteraction)
	return s, n
}

// open runs discordgo's Open (which takes no context) until READY, or
// until ctx ends: then the connection being set up is cut.
func (g *Gateway) open(ctx context.Context, s *discordgo.Session, n *netGuard) error {
	done := make(chan error, 1)
	go func() { done <- s.Open() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		n.cut()
		if err := <-done; err == nil {
			_ = g.closeGateway(s, n)
		}
		n.refuse()
		return ctx.Err()
	}
}

// Close ends the gateway session. Send and the other REST calls fail
// afterwards until Start is called again. It is safe to call more than
// once.
func (g *Gateway) Close() error {
	g.mu.Lock()
	s, n := g.session, g.net
	g.session, g.net = nil, nil
	g.mu.Unlock()
	err := g.closeGateway(s, n)
	detachLibraryLog(g)
	return err
}

// closeGateway closes a session's WebSocket (REST keeps working) and keeps
// discordgo from reconnecting it. discordgo reconnects whenever its reader
// or heartbeat hits an error, also one its own Close caused (a heartbeat
// racing the close), so reconnecting is switched off first, under the
// session's lock, and the guard refuses dials from then on. This happens
// once per session: a heartbeat that read the switch during the first
// close would race a second write. discordgo's Close waits for a handshake
// in progress (it holds that lock); one that does not finish within
// closeGrace is cut. (A reconnect loop that was already running, between
// two attempts, keeps running, refused, until the process exits: discordgo
// offers no way to stop it.)
func (g *Gateway) closeGateway(s *discordgo.Session, n *netGuard) error {
	if s == nil || n != nil && !n.refuse() {
		return nil // closed already
	}
	done := make(chan error, 1)
	go func() {
		s.Lock()
		s.ShouldReconnectOnError = false
		s.Unlock()
		done <- s.Close() // sends close 1000: Discord ends the session
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(closeGrace):
		n.cut()
		err = <-done
	}
	g.setConnected(false)
	return g.scrub(err)
}

// started returns the session, or errNotStarted.
func (g *Gateway) started() (*discordgo.Session, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.session == nil {
		return nil, errNotStarted
	}
	return g.session, nil
}

func (g *Gateway) botUserID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.botID
}

// checkAPIURL refuses a URL that is not http(s) and warns about clear text.
func (g *Gateway) checkAPIURL() error {
	u, err := url.Parse(g.cfg.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("discord: invalid api_url %q: want an http(s) URL", g.cfg.APIURL)
	}
	if u.Scheme == "http" && !loopback.Host(u.Hostname()) {
		g.log.Warn("api_url is not HTTPS: the bot token crosses the network in clear text", "api_url", g.cfg.APIURL)
	}
	return nil
}

// startError turns a failed token check into an error that says what to fix.
func (g *Gateway) startError(err error) error {
	switch {
	case isAPI(err, http.StatusUnauthorized, 0):
		return ErrUnauthorized
	case isAPI(err, http.StatusNotFound, 0):
		return fmt.Errorf("discord: the API answered 404 Not Found to GET /users/@me; check [discord] api_url: %w", err)
	}
	return fmt.Errorf("discord: verify the bot token: %w", err)
}

// openError explains a failed gateway handshake.
func (g *Gateway) openError(err error) error {
	err = g.scrub(err)
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case 4004:
			return ErrUnauthorized
		case 4013, 4014:
			return fmt.Errorf("discord: the gateway refused latch's intents: %w", err)
		}
	}
	return fmt.Errorf("discord: open the gateway: %w", err)
}

func (g *Gateway) setConnected(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.info.Connected = on
	if on {
		g.info.LastError = ""
	}
}

// setError records a failure for Info.
func (g *Gateway) setError(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.info.LastError = g.scrub(err).Error()
}

// scrub removes the bot token (and any extra secrets) from err.
func (g *Gateway) scrub(err error, extra ...string) error {
	return scrub(err, append([]string{g.cfg.Token}, extra...)...)
}
