// Package telegramtest is a fake of the Telegram Bot API that speaks real
// HTTP on loopback, so tests drive latch's Telegram adapter — and the real
// client library under it — the way api.telegram.org would. It keeps
// Telegram's semantics where latch depends on them: long polling with offset
// confirmation, 409 Conflict for a second poller, Telegram's error JSON, HTML
// entity parsing and the 4096-character limit. Tests push inbound messages,
// inject faults and wait for what the bot sent.
//
// Point a client at URL() + "/bot%s/%s" (the format go-telegram-bot-api
// takes as its endpoint). Message ids are counted per chat and shared between
// inbound and outbound messages, as on Telegram. Update ids start at 1001;
// SkipWeek makes them start again lower, as Telegram does after a week
// without updates, and an offset beyond the queue's tail is answered from
// its head. The bot's privacy mode is on, as for a new bot: in groups only
// commands, replies to the bot and mentions of it reach the bot (see
// SetPrivacyMode). Sending to a chat the server has not seen (through an
// inbound message or AddChat) fails with "chat not found".
//
// It also models what a chat experience needs: inline keyboards (recorded on
// Sent, callback_data checked against the 64-byte limit, removed by an edit
// without reply_markup or by editMessageReplyMarkup), files in (AddFile,
// getFile and the /file/bot<token>/<path> download route; messages with
// videos, video notes, animations, stickers, locations, venues, contacts,
// polls, dice and stories, and albums: see Incoming and DeliverAlbum) and
// out (sendDocument and sendPhoto, multipart, recorded byte for byte;
// sendPhoto reads the image's header and applies Telegram's photo rules:
// 10 MB, sides adding up to 10,000 and at most 20 times apart), and an
// optional rate model (SetChatRateLimit: about one post per second per chat,
// 20 per minute per group) that answers 429 with retry_after and counts its
// violations.
//
// Forum supergroups (Forum) have topics (CreateTopic, SetTopicClosed,
// DeleteTopic) as on Telegram: messages in a topic carry message_thread_id
// and is_topic_message, a send lands in the topic its message_thread_id
// names, else in that of the message it replies to, else in General; a
// closed topic refuses it with TOPIC_CLOSED, a deleted one with "message
// thread not found" (see topics.go).
//
// Webhooks work as on Telegram: after the setWebhook method (HTTPS on ports
// 443, 80, 88 or 8443, or any loopback URL; secret_token checked against
// Telegram's alphabet) queued updates are POSTed to the URL one at a time,
// in order, with the X-Telegram-Bot-Api-Secret-Token header, and repeated
// with back-off until the answer is a 2xx (see WebhookRetry and
// LoseWebhookResponses). getUpdates answers 409 Conflict while a webhook is
// set, and getWebhookInfo reports the URL, the pending count and the last
// delivery error. Deliveries go to loopback addresses only.
//
// Where it differs from Telegram it is stricter: in HTML a bare '&' that does
// not start an entity is rejected (Telegram passes it through), so a missing
// escape shows up in tests. Markdown parse modes are accepted unchecked.
package telegramtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/gateways/internal/faketest"
)

// ErrClosed is returned by the Wait methods once the server is closed.
var ErrClosed = errors.New("telegramtest: server closed")

const (
	firstUpdateID  = 1001
	maxRequestBody = 10 << 20
	// maxUploadBody bounds a multipart upload: Telegram takes documents
	// up to 50 MB.
	maxUploadBody = 60 << 20
	conflictPoll  = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
	conflictHook  = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
)

// Server is a running fake Bot API for one bot token. All methods are safe
// for concurrent use.
type Server struct {
	token     string
	srv       *httptest.Server
	done      chan struct{}
	closeOnce sync.Once
	stop      context.CancelFunc // ends webhook deliveries
	loops     sync.WaitGroup     // the delivery goroutine

	mu           sync.Mutex
	changes      faketest.Signal // notified on every state change
	bot          User
	nextUpdateID int
	queue        []queued
	confirmed    int
	allowed      []string
	poll         *poller
	chats        map[int64]*chatState
	sent         []Sent
	sentIndex    map[msgKey]int
	commands     []Command
	callbacks    map[string]bool // query id → answered
	hook         webhookState
	instantEmpty bool
	privacyOff   bool // see SetPrivacyMode
	faults       faketest.Faults[Fault]
	calls        map[string][]Call
	counts       map[string]int         // requests per method, kept or not
	keepCalls    map[string]int         // method → how many of its calls are kept
	keepUser     int                    // users' messages kept per chat; 0: all
	files        map[string]*storedFile // file_id → content
	downloads    int                    // requests to the file route
	rate         chatRate
	albums       int // media groups made by DeliverAlbum
}

// New starts a fake Bot API on 127.0.0.1 that accepts token.
func New(token string) *Server {
	s := &Server{
		token:        token,
		done:         make(chan struct{}),
		bot:          User{ID: botID(token), IsBot: true, FirstName: "Latch Test", Username: "latch_test_bot"},
		nextUpdateID: firstUpdateID,
		chats:        map[int64]*chatState{},
		sentIndex:    map[msgKey]int{},
		callbacks:    map[string]bool{},
		calls:        map[string][]Call{},
		counts:       map[string]int{},
		keepCalls:    map[string]int{},
		files:        map[string]*storedFile{},
		rate:         chatRate{speed: 1, next: map[int64]time.Time{}, posts: map[int64][]time.Time{}},
		hook:         webhookState{retry: WebhookRetry{Min: defaultRetryMin, Max: defaultRetryMax}},
	}
	s.srv = faketest.Loopback("telegramtest", http.HandlerFunc(s.serve))
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.loops.Go(func() { s.deliverLoop(ctx) })
	return s
}

// botID derives the bot's user id from the token ("<id>:<secret>") the way
// Telegram's tokens carry it.
func botID(token string) int64 {
	id, _, _ := strings.Cut(token, ":")
	if n, err := strconv.ParseInt(id, 10, 64); err == nil && n > 0 {
		return n
	}
	return 1
}

// URL is the base URL to configure as the Bot API address (api_url).
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server. Pending long polls answer at once, webhook
// deliveries stop (one under way is cancelled); Wait calls return ErrClosed.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.stop()
		s.loops.Wait()
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// notifyLocked wakes everything waiting for a state change. s.mu must be held.
func (s *Server) notifyLocked() { s.changes.Notify() }

// handlerFunc answers one API method: a result to wrap in {"ok":true}, or an
// API error.
type handlerFunc func(ctx context.Context, p params) (any, *apiError)

// handler maps a lower-cased method name to its canonical name and handler.
func (s *Server) handler(method string) (string, handlerFunc) {
	switch method {
	case "getme":
		return "getMe", s.getMe
	case "getupdates":
		return "getUpdates", s.getUpdates
	case "sendmessage":
		return "sendMessage", s.sendMessage
	case "editmessagetext":
		return "editMessageText", s.editMessageText
	case "sendchataction":
		return "sendChatAction", s.sendChatAction
	case "setmycommands":
		return "setMyCommands", s.setMyCommands
	case "getmycommands":
		return "getMyCommands", s.getMyCommands
	case "answercallbackquery":
		return "answerCallbackQuery", s.answerCallbackQuery
	case "setwebhook":
		return "setWebhook", s.setWebhook
	case "deletewebhook":
		return "deleteWebhook", s.deleteWebhook
	case "getwebhookinfo":
		return "getWebhookInfo", s.getWebhookInfo
	case "editmessagereplymarkup":
		return "editMessageReplyMarkup", s.editMessageReplyMarkup
	case "getfile":
		return "getFile", s.getFile
	case "senddocument":
		return "sendDocument", s.sendDocument
	case "sendphoto":
		return "sendPhoto", s.sendPhoto
	}
	return "", nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		s.serveFile(w, r, rest)
		return
	}
	token, method, ok := splitPath(r.URL.Path)
	if !ok {
		writeError(w, &apiError{code: http.StatusNotFound, desc: "Not Found"})
		return
	}
	key := strings.ToLower(method)
	p, uploads, perr := readParams(w, r)
	f, faulty := s.admit(key, method, p, token == s.token)
	if token != s.token {
		writeError(w, &apiError{code: http.StatusUnauthorized, desc: "Unauthorized"})
		return
	}
	if faulty && s.applyFault(w, r, f) {
		return
	}
	if aerr := s.checkChatRate(key, p); aerr != nil {
		writeError(w, aerr)
		return
	}
	_, h := s.handler(key)
	if h == nil {
		writeError(w, &apiError{code: http.StatusNotFound, desc: "Not Found"})
		return
	}
	if perr != nil {
		writeError(w, badRequest("can't parse request: %v", perr))
		return
	}
	result, aerr := h(context.WithValue(r.Context(), uploadsKey{}, uploads), p)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, apiResponse{OK: true, Result: result})
}

// splitPath splits "/bot<token>/<method>".
func splitPath(path string) (token, method string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/bot")
	if !ok {
		return "", "", false
	}
	token, method, ok = strings.Cut(rest, "/")
	if !ok || token == "" || method == "" || strings.Contains(method, "/") {
		return "", "", false
	}
	return token, method, true
}

// admit records a request and, for a valid token, takes the method's next
// fault in the same step, so faults go to requests in arrival order.
func (s *Server) admit(key, method string, p params, tokenOK bool) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[key] = append(s.calls[key], Call{Method: method, Params: p.clone(), Time: time.Now(), N: s.counts[key]})
	s.counts[key]++
	if n, ok := s.keepCalls[key]; ok && len(s.calls[key]) > 2*n {
		// Trimmed in steps, so that appending stays cheap.
		s.calls[key] = slices.Clone(s.calls[key][len(s.calls[key])-n:])
	}
	s.notifyLocked()
	if !tokenOK {
		return Fault{}, false
	}
	return s.faults.Take(key)
}

// params are a request's parameters, first value per name.
type params map[string]string

func (p params) clone() map[string]string {
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

// int returns the integer parameter key, or def when it is absent.
func (p params) int(key string, def int64) (int64, *apiError) {
	v, ok := p[key]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, badRequest("invalid %s specified", key)
	}
	return n, nil
}

func (p params) bool(key string) bool {
	b, _ := strconv.ParseBool(p[key])
	return b
}

// readParams merges the query string with a form-urlencoded, multipart or
// JSON body, as the Bot API accepts all of them. Files of a multipart body
// are returned apart, by field name.
func readParams(w http.ResponseWriter, r *http.Request) (params, map[string]upload, error) {
	p := params{}
	uploads := map[string]upload{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	limit := int64(maxRequestBody)
	if mt == "multipart/form-data" {
		limit = maxUploadBody
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	switch mt {
	case "application/json":
		var body map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			return p, uploads, fmt.Errorf("invalid JSON body: %w", err)
		}
		for k, raw := range body {
			var str string
			if json.Unmarshal(raw, &str) == nil {
				p[k] = str
			} else {
				p[k] = string(raw)
			}
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(maxRequestBody); err != nil {
			return p, uploads, fmt.Errorf("invalid multipart body: %w", err)
		}
		for k, v := range r.MultipartForm.Value {
			p[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			u, err := readUpload(fhs[0])
			if err != nil {
				return p, uploads, fmt.Errorf("invalid multipart file: %w", err)
			}
			uploads[k] = u
		}
	default:
		if err := r.ParseForm(); err != nil {
			return p, uploads, fmt.Errorf("invalid form body: %w", err)
		}
		for k, v := range r.PostForm {
			p[k] = v[0]
		}
	}
	return p, uploads, nil
}

// apiError is an error answer in Telegram's shape.
type apiError struct {
	code       int
	desc       string
	retryAfter int
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{code: http.StatusBadRequest, desc: "Bad Request: " + fmt.Sprintf(format, args...)}
}

type apiResponse struct {
	OK          bool            `json:"ok"`
	Result      any             `json:"result,omitempty"`
	ErrorCode   int             `json:"error_code,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  *responseParams `json:"parameters,omitempty"`
}

type responseParams struct {
	RetryAfter int `json:"retry_after,omitempty"`
}

func writeError(w http.ResponseWriter, e *apiError) {
	resp := apiResponse{ErrorCode: e.code, Description: e.desc}
	if e.retryAfter > 0 {
		resp.Parameters = &responseParams{RetryAfter: e.retryAfter}
	}
	writeJSON(w, e.code, resp)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"ok":false,"error_code":500,"description":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
