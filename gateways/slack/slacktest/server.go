// Package slacktest is a fake Slack for the slack adapter's tests: the Web
// API methods latch calls (auth.test, apps.connections.open,
// chat.postMessage, chat.update, chat.postEphemeral,
// conversations.history, the external file upload and file downloads)
// and the Socket Mode WebSocket (hello, events_api, interactive and
// slash_commands envelopes, acknowledgements by envelope_id, disconnect,
// and the redelivery of what was not acknowledged, with retry_attempt and
// retry_reason), spoken on the wire to the real slack-go client. Faults
// come on demand: a 429 with Retry-After, another status or a Slack error
// per method, a dropped socket, a malformed envelope.
//
// The rules it enforces are Slack's as documented at
// https://api.slack.com/apis/socket-mode and
// https://api.slack.com/apis/socket-mode#acknowledge (an envelope that is
// not acknowledged is sent again); the bot's own messages come back as
// message events with its bot_id, as Slack sends them.
package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/latchd/latch/gateways/internal/faketest"
)

// The fake workspace's ids.
const (
	TeamID    = "T0LATCH"
	BotUserID = "U0BOT"
	BotID     = "B0BOT"
	AppID     = "A0LATCH"
)

// Message is a message in a conversation, as Slack stores it.
type Message struct {
	Channel string          `json:"-"`
	TS      string          `json:"ts"`
	User    string          `json:"user,omitempty"`
	Team    string          `json:"team,omitempty"`
	BotID   string          `json:"bot_id,omitempty"`
	Text    string          `json:"text"`
	Blocks  json.RawMessage `json:"blocks,omitempty"`
	Files   []File          `json:"files,omitempty"`
	Subtype string          `json:"subtype,omitempty"`
	// Edits counts the chat.update calls on it.
	Edits int `json:"-"`
	// Reactions are the bot's reactions on it, by name.
	Reactions []string `json:"-"`
	// Ephemeral: chat.postEphemeral, shown to User only.
	Ephemeral bool `json:"-"`
	// Unfurl: the request left link unfurling on.
	Unfurl bool `json:"-"`
}

// File is a file shared in a conversation.
type File struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Mimetype   string `json:"mimetype"`
	Size       int    `json:"size"`
	URLPrivate string `json:"url_private_download"`
	data       []byte
}

// Data is what the file holds.
func (f File) Data() []byte { return f.data }

// Call is one Web API request the fake answered.
type Call struct {
	Method string
	Params url.Values
}

// Fault makes a request to a method fail.
type Fault struct {
	Status     int    // an HTTP status; 0 with Error: 200 and ok:false
	RetryAfter int    // seconds, for a 429
	Error      string // Slack's error code, e.g. "channel_not_found"
}

type envelope struct {
	ID      string
	Type    string // events_api, interactive, slash_commands
	Payload json.RawMessage
	Attempt int
	Acked   bool
	Key     string // what the test names it by (a message's ts)
}

// Server is the fake. Its zero value is not usable; call New.
type Server struct {
	BotToken, AppToken string

	srv     *httptest.Server
	base    string // srv's URL, for the handlers
	up      websocket.Upgrader
	mu      sync.Mutex
	history map[string][]*Message // by channel, oldest first
	envs    []*envelope
	conns   map[*websocket.Conn]*sync.Mutex
	calls   []Call
	faults  faketest.Faults[Fault]
	uploads map[string]*File // by file id, until completed
	files   map[string]File
	n       int // for ids and timestamps
	refuse  bool
	revoked bool // the bot token
	changed faketest.Signal
	done    chan struct{}
	stop    sync.Once
	// Scopes is what auth.test's X-OAuth-Scopes header grants.
	Scopes string
	// PingEvery is how often the socket is pinged (Slack: every few
	// seconds); set before the first connection.
	PingEvery time.Duration
}

// New starts a fake Slack accepting the bot and app tokens.
func New(botToken, appToken string) *Server {
	s := &Server{BotToken: botToken, AppToken: appToken, history: map[string][]*Message{},
		conns: map[*websocket.Conn]*sync.Mutex{}, uploads: map[string]*File{}, files: map[string]File{},
		done: make(chan struct{}), PingEvery: 50 * time.Millisecond,
		Scopes: "app_mentions:read,channels:history,chat:write,commands,files:read,files:write,groups:history,im:history,im:read,reactions:write"}
	// slack-go dials with Slack's own origin.
	s.up.CheckOrigin = func(r *http.Request) bool { return r.Header.Get("Origin") == "https://api.slack.com" }
	srv := faketest.Loopback("slacktest", http.HandlerFunc(s.serve))
	// Under the lock the handlers read it with: a request may come from
	// another process, which orders nothing for the race detector.
	s.mu.Lock()
	s.srv, s.base = srv, srv.URL
	s.mu.Unlock()
	return s
}

// URL is the Web API's base, for slack.OptionAPIURL.
func (s *Server) URL() string { return s.srv.URL + "/api/" }

// Close drops every socket and stops the server.
func (s *Server) Close() {
	s.stop.Do(func() {
		close(s.done)
		s.DropSockets()
		s.srv.Close()
	})
}

func (s *Server) next() int {
	s.n++
	return s.n
}

// ts is a new message timestamp, later than every one before.
func (s *Server) tsLocked() string {
	return fmt.Sprintf("1700000000.%06d", s.next())
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/ws":
		s.socket(w, r)
	case strings.HasPrefix(r.URL.Path, "/upload/"):
		s.upload(w, r)
	case strings.HasPrefix(r.URL.Path, "/files/"):
		s.download(w, r)
	case strings.HasPrefix(r.URL.Path, "/api/"):
		s.api(w, r, strings.TrimPrefix(r.URL.Path, "/api/"))
	default:
		http.NotFound(w, r)
	}
}

// params reads a request's parameters: the form slack-go posts, or the
// JSON body of the methods it posts as JSON.
func params(r *http.Request) url.Values {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		var m map[string]any
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m)
		v := url.Values{}
		for k, x := range m {
			if str, ok := x.(string); ok {
				v.Set(k, str)
			} else {
				b, _ := json.Marshal(x)
				v.Set(k, string(b))
			}
		}
		v.Set("_json", "1")
		return v
	}
	_ = r.ParseForm()
	v := url.Values{}
	for k, x := range r.Form {
		v[k] = x
	}
	return v
}

func token(r *http.Request, p url.Values) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return t
	}
	return p.Get("token")
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code string) {
	writeJSON(w, map[string]any{"ok": false, "error": code})
}

func (s *Server) api(w http.ResponseWriter, r *http.Request, method string) {
	p := params(r)
	tok := token(r, p)
	p.Del("token")
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: p})
	f, faulted := s.faults.Take(method)
	revoked, base := s.revoked, s.base
	s.mu.Unlock()
	defer s.changed.Notify()
	want := s.BotToken
	if method == "apps.connections.open" {
		want, revoked = s.AppToken, false
	}
	if tok != want || revoked {
		fail(w, "invalid_auth")
		return
	}
	if faulted {
		switch {
		case f.Status == http.StatusTooManyRequests:
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
			w.WriteHeader(f.Status)
			return
		case f.Status != 0:
			w.WriteHeader(f.Status)
			return
		default:
			fail(w, f.Error)
			return
		}
	}
	switch method {
	case "auth.test":
		w.Header().Set("X-OAuth-Scopes", s.Scopes)
		writeJSON(w, map[string]any{"ok": true, "url": "https://latch.slack.com/", "team": "Latch",
			"user": "latch", "team_id": TeamID, "user_id": BotUserID, "bot_id": BotID})
	case "apps.connections.open":
		s.mu.Lock()
		refuse := s.refuse
		s.mu.Unlock()
		if refuse {
			fail(w, "invalid_auth")
			return
		}
		writeJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(base, "http") + "/ws"})
	case "chat.postMessage", "chat.postEphemeral":
		s.post(w, method, p)
	case "chat.update":
		s.update(w, p)
	case "conversations.history":
		s.historyAPI(w, p)
	case "files.getUploadURLExternal":
		s.mu.Lock()
		id := fmt.Sprintf("F%04d", s.next())
		size, _ := strconv.Atoi(p.Get("length"))
		s.uploads[id] = &File{ID: id, Name: p.Get("filename"), Size: size}
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": true, "upload_url": base + "/upload/" + id, "file_id": id})
	case "files.completeUploadExternal":
		s.complete(w, p)
	case "reactions.add", "reactions.remove":
		s.react(w, method == "reactions.add", p)
	default:
		fail(w, "unknown_method")
	}
}

// pings reports whether text would notify someone: a special mention, a
// user or a user group.
func pings(text string) bool {
	for _, m := range []string{"<!channel", "<!here", "<!everyone", "<@", "<!subteam"} {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// Pings: the message would notify someone.
func (m Message) Pings() bool { return pings(m.Text) || pings(string(m.Blocks)) }

// Shown is the text as its reader sees it: Slack's three escapes undone.
func (m Message) Shown() string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(m.Text)
}

// HasButtons: its blocks hold buttons.
func (m Message) HasButtons() bool { return strings.Contains(string(m.Blocks), `"button"`) }

// Limits the fake enforces, as latch relies on them: a message's text
// (Slack truncates past 40,000 characters and asks for at most 4,000,
// https://api.slack.com/methods/chat.postMessage#truncating) and a
// section block's text (3,000, else invalid_blocks,
// https://api.slack.com/reference/block-kit/blocks#section).
const (
	MaxText    = 4000
	MaxSection = 3000
)

// tooLong names the limit p's message breaks, "" none.
func tooLong(p url.Values) string {
	if utf8.RuneCountInString(p.Get("text")) > MaxText {
		return "msg_too_long"
	}
	var bl []struct {
		Type string `json:"type"`
		Text struct {
			Text string `json:"text"`
		} `json:"text"`
	}
	_ = json.Unmarshal([]byte(p.Get("blocks")), &bl)
	for _, b := range bl {
		if b.Type == "section" && utf8.RuneCountInString(b.Text.Text) > MaxSection {
			return "invalid_blocks"
		}
	}
	return ""
}

func (s *Server) post(w http.ResponseWriter, method string, p url.Values) {
	ch := p.Get("channel")
	if ch == "" || p.Get("text") == "" && p.Get("blocks") == "" {
		fail(w, "no_text")
		return
	}
	if e := tooLong(p); e != "" {
		fail(w, e)
		return
	}
	s.mu.Lock()
	m := &Message{Channel: ch, TS: s.tsLocked(), User: BotUserID, BotID: BotID, Text: p.Get("text"),
		Blocks: blocks(p), Ephemeral: method == "chat.postEphemeral", Unfurl: p.Get("unfurl_links") != "false"}
	if m.Ephemeral {
		m.User = p.Get("user")
	}
	s.history[ch] = append(s.history[ch], m)
	if !m.Ephemeral {
		// Slack sends the bot its own message, with its bot_id.
		s.queueLocked("events_api", "", s.eventPayload(map[string]any{"type": "message", "channel": ch,
			"user": BotUserID, "bot_id": BotID, "text": m.Text, "ts": m.TS, "channel_type": channelType(ch)}))
	}
	s.mu.Unlock()
	if m.Ephemeral {
		writeJSON(w, map[string]any{"ok": true, "message_ts": m.TS})
		return
	}
	writeJSON(w, map[string]any{"ok": true, "channel": ch, "ts": m.TS, "message": m})
}

func blocks(p url.Values) json.RawMessage {
	if b := p.Get("blocks"); b != "" && b != "null" {
		return json.RawMessage(b)
	}
	return nil
}

func (s *Server) update(w http.ResponseWriter, p url.Values) {
	ch, ts := p.Get("channel"), p.Get("ts")
	if e := tooLong(p); e != "" {
		fail(w, e)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.history[ch] {
		if m.TS == ts && !m.Ephemeral {
			if m.User != BotUserID {
				fail(w, "cant_update_message")
				return
			}
			m.Text, m.Blocks = p.Get("text"), blocks(p)
			m.Edits++
			writeJSON(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "text": m.Text})
			return
		}
	}
	fail(w, "message_not_found")
}

func (s *Server) historyAPI(w http.ResponseWriter, p url.Values) {
	ch, oldest := p.Get("channel"), p.Get("oldest")
	limit, _ := strconv.Atoi(p.Get("limit"))
	if limit <= 0 || limit > 999 {
		limit = 100
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	// Newest first, as Slack answers.
	list := s.history[ch]
	for i := len(list) - 1; i >= 0; i-- {
		m := list[i]
		if m.Ephemeral || oldest != "" && m.TS <= oldest {
			continue
		}
		out = append(out, *m)
	}
	more := false
	if len(out) > limit {
		// oldest given: Slack pages from the oldest end.
		out, more = out[len(out)-limit:], true
	}
	writeJSON(w, map[string]any{"ok": true, "messages": out, "has_more": more})
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/")
	var data []byte
	if mr, err := r.MultipartReader(); err == nil {
		part, err := mr.NextPart()
		if err == nil {
			data, _ = io.ReadAll(io.LimitReader(part, 64<<20))
		}
	} else {
		data, _ = io.ReadAll(io.LimitReader(r.Body, 64<<20))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.uploads[id]
	if !ok {
		http.Error(w, "no such upload", http.StatusNotFound)
		return
	}
	f.data = data
	_, _ = io.WriteString(w, "OK - "+strconv.Itoa(len(data)))
}

func (s *Server) complete(w http.ResponseWriter, p url.Values) {
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	_ = json.Unmarshal([]byte(p.Get("files")), &files)
	ch := p.Get("channel_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(files) != 1 || s.uploads[files[0].ID] == nil || ch == "" {
		fail(w, "invalid_arguments")
		return
	}
	f := s.uploads[files[0].ID]
	delete(s.uploads, f.ID)
	if f.Size != len(f.data) {
		fail(w, "file_size_mismatch")
		return
	}
	f.URLPrivate = s.base + "/files/" + f.ID
	s.files[f.ID] = *f
	s.history[ch] = append(s.history[ch], &Message{Channel: ch, TS: s.tsLocked(), User: BotUserID, BotID: BotID,
		Text: p.Get("initial_comment"), Files: []File{*f}, Subtype: "file_share"})
	writeJSON(w, map[string]any{"ok": true, "files": []map[string]string{{"id": f.ID, "title": f.Name}}})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	if tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); tok != s.BotToken {
		// Slack sends a sign-in page to a request without the token.
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>sign in</html>")
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/files/")
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: "files.download", Params: url.Values{"file": {id}}})
	f, ok := s.files[id]
	s.mu.Unlock()
	defer s.changed.Notify()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(f.data)
}

// AddFile stores a file a user shares, and returns it for SendDM's files.
func (s *Server) AddFile(name, mimetype string, data []byte) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := File{ID: fmt.Sprintf("F%04d", s.next()), Name: name, Mimetype: mimetype, Size: len(data), data: data}
	f.URLPrivate = s.base + "/files/" + f.ID
	s.files[f.ID] = f
	return f
}

// Inject makes the next times requests to method fail with f (times < 0:
// until ClearFaults).
func (s *Server) Inject(method string, f Fault, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Add(method, f, times)
}

// ClearFaults drops the faults queued for method.
func (s *Server) ClearFaults(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Clear(method)
}

// RefuseSockets makes apps.connections.open answer invalid_auth (the app
// token was revoked) while on.
func (s *Server) RefuseSockets(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = on
}

// RefuseBotToken makes every Web API call with the bot token answer
// invalid_auth (the token was revoked or rotated) while on.
func (s *Server) RefuseBotToken(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = on
}

// Calls returns the requests to method so far (a file download with the
// bot token is "files.download").
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Count counts the requests to method ("": to any method).
func (s *Server) Count(method string) int {
	if method != "" {
		return len(s.Calls(method))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// History returns a channel's messages, oldest first (ephemeral ones too).
func (s *Server) History(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.history[channel] {
		out = append(out, *m)
	}
	return out
}

// Sent returns what the bot posted to a channel, oldest first.
func (s *Server) Sent(channel string) []Message {
	var out []Message
	for _, m := range s.History(channel) {
		if m.BotID == BotID || m.Ephemeral {
			out = append(out, m)
		}
	}
	return out
}

// Changed is closed at the next request the fake answers or envelope it
// acknowledges, for tests to wait on.
func (s *Server) Changed() <-chan struct{} { return s.changed.C() }

func (s *Server) react(w http.ResponseWriter, add bool, p url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.history[p.Get("channel")] {
		if m.TS != p.Get("timestamp") {
			continue
		}
		i := slices.Index(m.Reactions, p.Get("name"))
		switch {
		case add && i >= 0:
			fail(w, "already_reacted")
		case add:
			m.Reactions = append(m.Reactions, p.Get("name"))
			writeJSON(w, map[string]any{"ok": true})
		case i < 0:
			fail(w, "no_reaction")
		default:
			m.Reactions = slices.Delete(m.Reactions, i, i+1)
			writeJSON(w, map[string]any{"ok": true})
		}
		return
	}
	fail(w, "message_not_found")
}
