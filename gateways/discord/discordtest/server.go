// Package discordtest is a fake of Discord's REST API and gateway that
// speaks real HTTP and WebSocket on loopback, so tests drive latch's
// Discord adapter — and discordgo under it — the way discord.com would.
//
// It keeps Discord's semantics where latch depends on them: the bot token
// in the Authorization header ("Bot <token>", 401 otherwise), Discord's
// error JSON ({"code": 50035, ...}), the 2000-code-point content limit,
// channel history newest first with after/before paging, the gateway
// handshake (HELLO, IDENTIFY → READY with session_id, resume_gateway_url
// and the application's id, heartbeats and their ACKs, dispatches with
// increasing s, RESUME → the missed dispatches then RESUMED, op 9 when a
// session cannot be resumed), intents (no DMs without DIRECT_MESSAGES,
// blank guild content without MESSAGE_CONTENT unless the bot is
// mentioned), interactions that must be answered once within three
// seconds (button presses, and uses of the application commands the bot
// registered with a bulk overwrite), and a per-channel limit on message
// edits (SetEditRate) answered with 429 and retry_after.
//
// Point discordgo at URL(): the REST API lives under /api/v10 (and
// /api/v9), the gateway at /gateway, attachments at /attachments. Tests
// push inbound messages (SendDM, SendGuildMessage, and Post for stickers,
// polls, voice messages and forwards with their message snapshot), button
// presses (PressButton) and command uses (InvokeCommand), inject faults
// (Inject, DropConnection, InvalidateSession) and wait for what the bot
// sent (WaitSent).
//
// Messages posted while no gateway session can receive them (the bot is
// "offline") go only to the channel's history, as on Discord; a resumable
// session that lost its connection buffers them for RESUME.
//
// Attachments are served with their Content-Length, or chunked without
// one, and may announce a size other than what is served (File). The
// upload limit applies to each file of a message, as Discord's does.
// Their URLs are signed as Discord's are (ex, is, hm): the CDN route
// answers 404 "This content is no longer available." to a URL that is
// expired by the CDN's clock (SetURLTTL, SetCDNClock), wrongly signed or
// unknown, and POST /attachments/refresh-urls signs the URLs of files the
// fake holds afresh.
//
// Where it simplifies: one bot, no guild member lists or permissions,
// embeds only in a forward's snapshot (title, description, URL); only the
// READY payload is zlib-compressed when IDENTIFY asks for compression;
// rate limits are advertised (X-RateLimit-* headers) on every route but
// enforced only on message edits, elsewhere through injected faults; a
// deferred interaction response is recorded but not shown in the
// channel's history.
package discordtest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/gateways/internal/faketest"
)

// ErrClosed is returned by the Wait methods once the server is closed.
var ErrClosed = errors.New("discordtest: server closed")

// Routes, named the way Discord's documentation names them. Inject, Calls
// and Count take these.
const (
	RouteGateway             = "GET /gateway"
	RouteGatewayBot          = "GET /gateway/bot"
	RouteMe                  = "GET /users/@me"
	RouteOpenDM              = "POST /users/@me/channels"
	RouteMessages            = "GET /channels/{channel.id}/messages"
	RouteMessage             = "GET /channels/{channel.id}/messages/{message.id}"
	RouteCreateMessage       = "POST /channels/{channel.id}/messages"
	RouteEditMessage         = "PATCH /channels/{channel.id}/messages/{message.id}"
	RouteDeleteMessage       = "DELETE /channels/{channel.id}/messages/{message.id}"
	RouteTyping              = "POST /channels/{channel.id}/typing"
	RouteInteractionCallback = "POST /interactions/{interaction.id}/{interaction.token}/callback"
	RouteFollowup            = "POST /webhooks/{application.id}/{interaction.token}"
	RouteEditOriginal        = "PATCH /webhooks/{application.id}/{interaction.token}/messages/@original"
	RouteCommands            = "PUT /applications/{application.id}/commands"
	RouteAttachment          = "GET /attachments/{channel.id}/{attachment.id}/{filename}"
	RouteRefreshURLs         = "POST /attachments/refresh-urls"
)

const (
	maxRequestBody = 1 << 20
	maxUploadBody  = 30 << 20
)

// Server is a running fake Discord for one bot token. All methods are safe
// for concurrent use.
type Server struct {
	token     string
	bot       User
	srv       *httptest.Server
	done      chan struct{}
	closeOnce sync.Once

	mu           sync.Mutex
	changes      faketest.Signal // notified on every state change
	lastID       uint64
	users        map[string]User
	channels     map[string]*channel
	dms          map[string]string // user id → DM channel id
	sent         []*Sent
	sentIndex    map[string]*Sent // message id → sent
	files        map[string]storedFile
	cdnKey       []byte // signs attachment URLs (hm)
	urlTTL       time.Duration
	cdnClock     func() time.Time
	interactions map[string]*Interaction
	originals    map[string]*Sent // interaction id → its initial response
	commands     []Command
	faults       faketest.Faults[Fault]
	calls        map[string][]Call
	gw           gateway
	ackWindow    time.Duration
	maxUpload    int
	editLimit    int
	editWindow   time.Duration
	editBuckets  map[string]*editBucket
	editClock    func() time.Time
	rates        RateStats
}

type channel struct {
	id        string
	kind      int
	guildID   string
	recipient User
	msgs      []*Message // oldest first
}

// Call is one request the server received.
type Call struct {
	Route string
	Path  string
	Query map[string]string
	// Authorized is false for a request without the right bot token
	// where one is needed; HadAuth is whether it carried any
	// Authorization header at all.
	Authorized bool
	HadAuth    bool
	Body       []byte // JSON body, or payload_json of a multipart one
	Time       time.Time
}

// New starts a fake Discord on 127.0.0.1 that accepts token. The bot's user
// id is read from the token's first part, as Discord encodes it.
func New(token string) *Server {
	id := botID(token)
	s := &Server{
		token:        token,
		bot:          User{ID: id, Username: "latch_test_bot", GlobalName: "Latch Test", Bot: true},
		done:         make(chan struct{}),
		users:        map[string]User{},
		channels:     map[string]*channel{},
		dms:          map[string]string{},
		sentIndex:    map[string]*Sent{},
		files:        map[string]storedFile{},
		cdnKey:       newCDNKey(),
		urlTTL:       DefaultURLTTL,
		cdnClock:     time.Now,
		interactions: map[string]*Interaction{},
		originals:    map[string]*Sent{},
		calls:        map[string][]Call{},
		ackWindow:    DefaultAckWindow,
		maxUpload:    DefaultMaxUpload,
		editLimit:    DefaultEditLimit,
		editWindow:   DefaultEditWindow,
		editBuckets:  map[string]*editBucket{},
		editClock:    time.Now,
	}
	s.gw = newGateway()
	s.users[id] = s.bot
	s.srv = faketest.Loopback("discordtest", http.HandlerFunc(s.serve))
	return s
}

// botID decodes the user id Discord puts, base64-encoded, before the first
// dot of a bot token.
func botID(token string) string {
	first, _, _ := strings.Cut(token, ".")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.StdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(first); err == nil {
			if _, err := strconv.ParseUint(string(b), 10, 64); err == nil {
				return string(b)
			}
		}
	}
	return "100000000000000001"
}

// URL is the base URL to configure as the API address (api_url).
func (s *Server) URL() string { return s.srv.URL }

// GatewayURL is the WebSocket URL the gateway routes announce.
func (s *Server) GatewayURL() string {
	return "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gateway"
}

// Bot is the bot's user.
func (s *Server) Bot() User { return s.bot }

// BotMention is the text that mentions the bot in a message.
func (s *Server) BotMention() string { return "<@" + s.bot.ID + ">" }

// SetAckWindow changes how long an interaction may go unanswered (3 s by
// default).
func (s *Server) SetAckWindow(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ackWindow = d
}

// SetMaxUpload changes the attachment size limit (10 MB by default). As
// on Discord, it applies to each file of a message on its own.
func (s *Server) SetMaxUpload(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxUpload = n
}

// Close stops the server: gateway connections drop, Wait calls return
// ErrClosed.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.closeGateway()
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// notifyLocked wakes everything waiting for a state change. s.mu must be held.
func (s *Server) notifyLocked() { s.changes.Notify() }

// nextIDLocked returns a new snowflake: the time since Discord's epoch in
// its upper bits, strictly increasing across the server.
func (s *Server) nextIDLocked(now time.Time) string {
	id := uint64(now.UnixMilli()-discordEpoch) << 22
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatUint(id, 10)
}

// request is one REST request being served.
type request struct {
	w     http.ResponseWriter
	r     *http.Request
	route string
	args  []string // path parameters, in route order
	body  []byte
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/gateway" || r.URL.Path == "/gateway/" {
		s.serveGateway(w, r)
		return
	}
	route, args, ok := matchRoute(r.Method, r.URL.Path)
	if !ok {
		writeError(w, http.StatusNotFound, 0, "404: Not Found")
		return
	}
	authorized := route == RouteGateway || route == RouteAttachment ||
		route == RouteInteractionCallback || route == RouteFollowup || route == RouteEditOriginal ||
		r.Header.Get("Authorization") == "Bot "+s.token
	req := &request{w: w, r: r, route: route, args: args}
	f, faulty := s.admit(req, authorized)
	if !authorized {
		writeError(w, http.StatusUnauthorized, 0, "401: Unauthorized")
		return
	}
	if faulty && s.applyFault(req, f) {
		return
	}
	s.handle(req)
}

// matchRoute maps a method and path to a route and its parameters.
func matchRoute(method, path string) (string, []string, bool) {
	if rest, ok := strings.CutPrefix(path, "/attachments/"); ok && method == http.MethodGet {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) == 3 {
			return RouteAttachment, parts, true
		}
		return "", nil, false
	}
	rest, ok := strings.CutPrefix(path, "/api/v10/")
	if !ok {
		if rest, ok = strings.CutPrefix(path, "/api/v9/"); !ok {
			return "", nil, false
		}
	}
	seg := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	for _, p := range routePatterns {
		if p.method != method {
			continue
		}
		if args, ok := matchSegments(strings.Split(p.pattern, "/"), seg); ok {
			return p.route, args, true
		}
	}
	return "", nil, false
}

// routePatterns are the REST routes under /api/v10; "*" is a parameter.
var routePatterns = []struct{ method, pattern, route string }{
	{"GET", "gateway", RouteGateway},
	{"GET", "gateway/bot", RouteGatewayBot},
	{"GET", "users/@me", RouteMe},
	{"POST", "users/@me/channels", RouteOpenDM},
	{"GET", "channels/*/messages", RouteMessages},
	{"GET", "channels/*/messages/*", RouteMessage},
	{"POST", "channels/*/messages", RouteCreateMessage},
	{"PATCH", "channels/*/messages/*", RouteEditMessage},
	{"DELETE", "channels/*/messages/*", RouteDeleteMessage},
	{"POST", "channels/*/typing", RouteTyping},
	{"POST", "interactions/*/*/callback", RouteInteractionCallback},
	{"POST", "webhooks/*/*", RouteFollowup},
	{"PATCH", "webhooks/*/*/messages/@original", RouteEditOriginal},
	{"PUT", "applications/*/commands", RouteCommands},
	{"POST", "attachments/refresh-urls", RouteRefreshURLs},
}

func matchSegments(pattern, seg []string) ([]string, bool) {
	if len(pattern) != len(seg) {
		return nil, false
	}
	var args []string
	for i, p := range pattern {
		switch {
		case p == "*" && seg[i] != "":
			args = append(args, seg[i])
		case p != seg[i]:
			return nil, false
		}
	}
	return args, true
}

func (s *Server) handle(req *request) {
	handlers := map[string]func(*request){
		RouteGateway:             s.getGateway,
		RouteGatewayBot:          s.getGatewayBot,
		RouteMe:                  s.getMe,
		RouteOpenDM:              s.openDM,
		RouteMessages:            s.getMessages,
		RouteMessage:             s.getMessage,
		RouteCreateMessage:       s.createMessage,
		RouteEditMessage:         s.editMessage,
		RouteDeleteMessage:       s.deleteMessage,
		RouteTyping:              s.typing,
		RouteInteractionCallback: s.interactionCallback,
		RouteFollowup:            s.followup,
		RouteEditOriginal:        s.editOriginal,
		RouteCommands:            s.putCommands,
		RouteAttachment:          s.attachment,
		RouteRefreshURLs:         s.refreshURLs,
	}
	handlers[req.route](req)
}

// admit reads the request body, records the call and, for an authorized
// request, takes the route's next fault in the same step, so faults go to
// requests in arrival order.
func (s *Server) admit(req *request, authorized bool) (Fault, bool) {
	limit := int64(maxRequestBody)
	if strings.HasPrefix(req.r.Header.Get("Content-Type"), "multipart/") {
		limit = maxUploadBody
	}
	req.r.Body = http.MaxBytesReader(req.w, req.r.Body, limit)
	body, multipart := readBody(req.r)
	req.body = body
	call := Call{Route: req.route, Path: req.r.URL.Path, Query: map[string]string{},
		Authorized: authorized, HadAuth: req.r.Header.Get("Authorization") != "", Body: body, Time: time.Now()}
	if multipart {
		call.Body = []byte(req.r.FormValue("payload_json"))
	}
	for k, v := range req.r.URL.Query() {
		call.Query[k] = v[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[req.route] = append(s.calls[req.route], call)
	s.notifyLocked()
	if !authorized {
		return Fault{}, false
	}
	return s.faults.Take(req.route)
}

// readBody reads a JSON body, or parses a multipart one (reporting true;
// a malformed form shows when the handler reads it).
func readBody(r *http.Request) ([]byte, bool) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		_ = r.ParseMultipartForm(maxUploadBody)
		return nil, true
	}
	b, _ := io.ReadAll(r.Body)
	return b, false
}

// apiError is Discord's error JSON.
type apiError struct {
	Message string          `json:"message"`
	Code    int             `json:"code"`
	Errors  json.RawMessage `json:"errors,omitempty"`
}

func writeError(w http.ResponseWriter, status, code int, message string) {
	writeJSON(w, status, apiError{Message: message, Code: code})
}

// formError is 400 Invalid Form Body (50035) for one field.
func formError(w http.ResponseWriter, field, code, message string) {
	errs := fmt.Sprintf(`{%q:{"_errors":[{"code":%q,"message":%q}]}}`, field, code, message)
	writeJSON(w, http.StatusBadRequest, apiError{Message: "Invalid Form Body", Code: 50035, Errors: json.RawMessage(errs)})
}

// writeJSON answers with v and the rate-limit headers Discord sends on
// every REST answer (those a fault set already stay). The fake never runs
// out of its bucket on its own.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"message":"500: Internal Server Error","code":0}`)
	}
	h := w.Header()
	setRateHeaders(h, 50, 49, 1, false)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeNoContent(w http.ResponseWriter) {
	setRateHeaders(w.Header(), 50, 49, 1, false)
	w.WriteHeader(http.StatusNoContent)
}

// setRateHeaders sets the X-RateLimit-* headers that are not set yet.
func setRateHeaders(h http.Header, limit, remaining int, resetAfter float64, global bool) {
	set := func(k, v string) {
		if h.Get(k) == "" {
			h.Set(k, v)
		}
	}
	set("X-RateLimit-Limit", strconv.Itoa(limit))
	set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	reset := float64(time.Now().UnixMilli())/1000 + resetAfter
	set("X-RateLimit-Reset", strconv.FormatFloat(reset, 'f', 3, 64))
	set("X-RateLimit-Reset-After", strconv.FormatFloat(resetAfter, 'f', 3, 64))
	set("X-RateLimit-Bucket", "fakebucket")
	if global {
		set("X-RateLimit-Global", "true")
		set("X-RateLimit-Scope", "global")
	} else if remaining == 0 {
		set("X-RateLimit-Scope", "user")
	}
}

// retryAfterHeader is Retry-After in whole seconds, rounded up.
func retryAfterHeader(seconds float64) string {
	return strconv.Itoa(int(math.Ceil(seconds)))
}
