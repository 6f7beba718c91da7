// Package matrix is latch's Matrix gateway: one Matrix account (a user on
// a homeserver, with an access token and a device) reached over the
// client-server API with mautrix-go. It only translates: /sync's timeline
// events become adapter.Message (the room as ChatID, the sender's user ID
// as UserID, so a latch binds room and user), the Hub's replies become
// m.room.message events with Matrix's HTML subset in formatted_body and
// plain text in body, and an answer streams by m.replace edits.
//
// Nothing is lost and nothing is handled twice: /sync's next_batch is the
// cursor, stored by Sink.Ingest in the same transaction as the events of
// that batch, and the cursor also keeps the IDs of the events recently
// handled, so an event served again is dropped.
//
// End-to-end encryption is the Olm/Megolm of the goolm package (pure Go,
// chosen without a build tag: latch imports goolm's packages, never
// mautrix/crypto, whose driver is chosen by the goolm tag). Its state lives
// in a Vault the daemon gives the gateway (a bucket of latch's bbolt); see
// e2ee.go.
package matrix

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/redact"
	"github.com/latchd/latch/gateways/internal/retry"
)

// Config configures the gateway.
type Config struct {
	// Homeserver is the client-server API's base URL.
	Homeserver string
	// UserID is the bot's Matrix ID (@latch:example.org); AccessToken its
	// token; DeviceID the device the token belongs to ("" to take it from
	// whoami).
	UserID, AccessToken, DeviceID string
	// AllowGroups lets latch join rooms it is invited to that are not
	// direct chats, and talk there; by default only DMs.
	AllowGroups bool
	// Verbosity is how much of the tool use a turn shows (turn.Verbosity*).
	Verbosity string
	// MinBackoff and MaxBackoff bound the waits between failed syncs.
	MinBackoff, MaxBackoff time.Duration
	// EditInterval paces the m.replace edits of a streaming answer per
	// room (0: 1.5 s; the homeserver's rate limit, typically a few
	// events a second with a burst, is the bound).
	EditInterval time.Duration
	// SyncTimeout is /sync's long-poll (0: 30 s); RequestTimeout bounds
	// every call, /sync on top of its long-poll (0: 30 s).
	SyncTimeout, RequestTimeout time.Duration
	// MaxFile caps a file sent to latch (0: 20 MiB).
	MaxFile int64
	// Vault keeps the end-to-end encryption state; nil: encrypted rooms
	// cannot be read nor answered (the daemon always sets it).
	Vault adapter.Vault
}

// Gateway is one Matrix account.
type Gateway struct {
	cfg   Config
	log   *slog.Logger
	cli   *mautrix.Client
	forms []string // the token, as errors and logs must not show it

	mu        sync.Mutex
	user      id.UserID
	device    id.DeviceID
	connected bool
	lastErr   string
	undecrypt int   // events that could not be decrypted, for status
	startedMS int64 // when Start ran, in ms: the first sync takes events from then on
	rooms     map[id.RoomID]*room
	buttons   map[id.EventID]approvalMsg // messages whose reactions answer
	edits     map[id.RoomID]time.Time
	owner     owner // the latched room and its user, once known
	dirty     chan struct{}
	e2ee      *e2ee
}

// room is what latch knows of a joined room.
type room struct {
	direct    bool      // a DM (is_direct on the invite, or two members)
	known     bool      // direct was decided
	encrypted bool      // m.room.encryption is set
	encKnown  bool      // encrypted was read from the room's state
	inviter   id.UserID // who invited latch
	lastUser  id.UserID // the last sender of a message latch took
	joinedAt  time.Time
}

// approvalMsg is a message latch sent with buttons: a reaction on it with
// one of the emoji presses the button.
type approvalMsg struct {
	room    id.RoomID
	text    string            // its formatted text, for AnswerCallback's edit
	plain   string            // its plain text
	payload map[string]string // emoji → payload
}

const (
	defaultEdit    = 1500 * time.Millisecond
	defaultSync    = 30 * time.Second
	defaultMaxFile = 20 << 20
	// requestTimeout bounds one API call but /sync, which gets its
	// long-poll on top.
	requestTimeout = 30 * time.Second
	// maxRooms bounds the rooms latch remembers; maxButtons the messages
	// with buttons.
	maxRooms   = 256
	maxButtons = 64
)

// New returns the gateway; nothing is contacted until Start.
func New(cfg Config, log *slog.Logger) *Gateway {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.EditInterval <= 0 {
		cfg.EditInterval = defaultEdit
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = defaultSync
	}
	if cfg.MaxFile <= 0 {
		cfg.MaxFile = defaultMaxFile
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = requestTimeout
	}
	cfg.MinBackoff, cfg.MaxBackoff = retry.Limits(cfg.MinBackoff, cfg.MaxBackoff)
	g := &Gateway{cfg: cfg, log: log, rooms: map[id.RoomID]*room{},
		buttons: map[id.EventID]approvalMsg{}, edits: map[id.RoomID]time.Time{}, dirty: make(chan struct{}, 1),
		forms: redact.URLForms(cfg.AccessToken)}
	cli, err := mautrix.NewClient(strings.TrimSuffix(cfg.Homeserver, "/"), id.UserID(cfg.UserID), cfg.AccessToken)
	if err != nil {
		g.lastErr = "matrix: the homeserver URL: " + err.Error()
		return g
	}
	cli.DeviceID = id.DeviceID(cfg.DeviceID)
	// latch waits out 429s itself (call) and retries /sync itself (Run).
	cli.DefaultHTTPRetries, cli.IgnoreRateLimit = 0, true
	cli.Client = &http.Client{Timeout: cfg.RequestTimeout + cfg.SyncTimeout}
	cli.UserAgent = "latch"
	g.cli = cli
	return g
}

const errNoHomeserver = "matrix: [matrix] homeserver is not set (the client-server API's URL, e.g. https://matrix.example.org)"

// Name is "matrix".
func (g *Gateway) Name() string { return "matrix" }

// Start checks the token with whoami (which also names the device), and
// with a Vault sets up end-to-end encryption: the account's keys are
// created and stored before they are uploaded.
func (g *Gateway) Start(ctx context.Context) error {
	if g.cfg.Homeserver == "" {
		// Restarting cannot help: a configuration error (exit 78).
		return errors.Join(adapter.ErrUnauthorized, errors.New(errNoHomeserver))
	}
	if g.cli == nil {
		return errors.New(g.lastErr)
	}
	g.startedMS = time.Now().UnixMilli()
	var who *mautrix.RespWhoami
	err := g.call(ctx, func(ctx context.Context) (err error) {
		who, err = g.cli.Whoami(ctx)
		return err
	})
	if err != nil {
		g.noteErr(err)
		if unauthorized(err) {
			return errors.Join(adapter.ErrUnauthorized, errors.New("matrix: the homeserver refused the access token: "+err.Error()))
		}
		return errors.New("matrix: checking the access token: " + err.Error())
	}
	if g.cfg.UserID != "" && who.UserID != id.UserID(g.cfg.UserID) {
		return errors.New("matrix: the access token is " + string(who.UserID) + "'s, not " + g.cfg.UserID + "'s")
	}
	dev := who.DeviceID
	if g.cfg.DeviceID != "" && dev != "" && dev != id.DeviceID(g.cfg.DeviceID) {
		return errors.New("matrix: the access token is device " + string(dev) + "'s, not " + g.cfg.DeviceID + "'s")
	}
	if dev == "" {
		dev = id.DeviceID(g.cfg.DeviceID)
	}
	g.cli.UserID, g.cli.DeviceID = who.UserID, dev
	g.mu.Lock()
	g.user, g.device, g.connected = who.UserID, dev, true
	g.mu.Unlock()
	if g.cfg.Vault != nil && dev != "" {
		e, err := openE2EE(ctx, g, g.cfg.Vault)
		if errors.Is(err, adapter.ErrRejected) {
			// The device has other keys on the homeserver (latch.db lost
			// or another client on this device): a new login is needed.
			return errors.Join(adapter.ErrUnauthorized, errors.New("matrix: the homeserver refused this device's encryption keys ("+
				g.scrub(err).Error()+"); log the bot in again for a new device and set [matrix] device_id and the new access token"))
		}
		if err != nil {
			return errors.New("matrix: end-to-end encryption: " + g.scrub(err).Error())
		}
		g.mu.Lock()
		g.e2ee = e
		g.mu.Unlock()
	} else {
		g.log.Warn("no end-to-end encryption: encrypted rooms are neither read nor answered", "device", string(dev))
	}
	g.log.Info("connected", "user", string(who.UserID), "device", string(dev))
	return nil
}

// unauthorized: the homeserver's answer to a token it does not take.
func unauthorized(err error) bool {
	var he mautrix.HTTPError
	if errors.As(err, &he) {
		if he.RespError != nil && (he.RespError.ErrCode == mautrix.MUnknownToken.ErrCode || he.RespError.ErrCode == mautrix.MMissingToken.ErrCode) {
			return true
		}
		return he.IsStatus(http.StatusUnauthorized)
	}
	return errors.Is(err, mautrix.MUnknownToken) || errors.Is(err, mautrix.MMissingToken)
}

// Info describes the gateway: its user ID, and in LastError the last
// failure, or how many events could not be decrypted.
func (g *Gateway) Info() adapter.Info {
	g.mu.Lock()
	defer g.mu.Unlock()
	last := g.lastErr
	if g.undecrypt > 0 && last == "" {
		last = undecryptableNote(g.undecrypt)
	}
	return adapter.Info{BotName: string(g.user), Connected: g.connected, LastError: last}
}

// Close has nothing to release: Run's context owns the sync.
func (g *Gateway) Close() error { return nil }

func (g *Gateway) noteErr(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.connected = err == nil
	if err != nil {
		g.lastErr = g.scrub(err).Error()
	} else {
		g.lastErr = ""
	}
}

// scrub keeps the token out of an error.
func (g *Gateway) scrub(err error) error {
	return redact.Opaque(err, g.forms, adapter.ErrUnauthorized)
}

func (g *Gateway) self() id.UserID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.user
}

// roomOf returns the room of a chat id ("!room:server").
func roomOf(chat string) (id.RoomID, error) {
	if !strings.HasPrefix(chat, "!") || !strings.Contains(chat, ":") || strings.ContainsAny(chat, "/?#\x00 ") {
		return "", adapter.Rejected(errors.New("matrix: not a room ID: " + chat))
	}
	return id.RoomID(chat), nil
}

var _ interface {
	adapter.Gateway
	adapter.TurnRenderer
	adapter.CallbackAnswerer
	adapter.Downloader
	adapter.FileSender
} = (*Gateway)(nil)

// UseVault takes the store of the end-to-end encryption state; the daemon
// calls it before Start.
func (g *Gateway) UseVault(v adapter.Vault) { g.cfg.Vault = v }
