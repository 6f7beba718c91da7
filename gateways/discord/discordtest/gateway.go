package discordtest

import (
	"bytes"
	"compress/zlib"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatACK   = 11
)

// Gateway close codes the fake uses.
const (
	CloseUnknownError      = 4000
	CloseUnknownOpcode     = 4001
	CloseDecodeError       = 4002
	CloseNotAuthenticated  = 4003
	CloseAuthFailed        = 4004
	CloseAlreadyAuthed     = 4005
	CloseInvalidAPIVersion = 4012
	CloseInvalidIntents    = 4013
	CloseDisallowedIntents = 4014
)

// Identify is an IDENTIFY the gateway received.
type Identify struct {
	TokenOK  bool
	Intents  int
	Compress bool
	Time     time.Time
}

// Resume is a RESUME the gateway received; OK is false when it was answered
// with op 9 (Invalid Session).
type Resume struct {
	SessionID string
	Seq       int
	OK        bool
	Time      time.Time
}

type gateway struct {
	interval   time.Duration
	privileged bool // the application may use MESSAGE_CONTENT
	conns      map[*gwConn]bool
	current    *session // the session dispatches go to
	sessions   map[string]*session
	afterReady []*Message // DeliverAgain while offline
	identifies []Identify
	resumes    []Resume
	heartbeats int
	closed     bool
}

func newGateway() gateway {
	return gateway{interval: DefaultHeartbeat, privileged: true, conns: map[*gwConn]bool{}, sessions: map[string]*session{}}
}

// session is one gateway session: its sequence and every dispatch, kept
// for RESUME.
type session struct {
	id        string
	seq       int
	events    []frame
	conn      *gwConn // nil while disconnected
	resumable bool
	intents   int
	compress  bool
}

type gwConn struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	sess *session // guarded by Server.mu
}

type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int            `json:"s"`
	T  *string         `json:"t"`
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	if v := r.URL.Query().Get("v"); v != "" && v != "9" && v != "10" {
		c.close(CloseInvalidAPIVersion, "Invalid API version")
		return
	}
	if e := r.URL.Query().Get("encoding"); e != "" && e != "json" {
		c.close(CloseDecodeError, "Error while decoding payload.")
		return
	}
	s.mu.Lock()
	if s.gw.closed {
		s.mu.Unlock()
		c.close(websocket.CloseGoingAway, "")
		return
	}
	s.gw.conns[c] = true
	interval := s.gw.interval
	s.notifyLocked()
	s.mu.Unlock()
	hello, _ := json.Marshal(map[string]int64{"heartbeat_interval": interval.Milliseconds()})
	c.send(frame{Op: opHello, D: hello}, false)
	s.readLoop(c)
}

func (s *Server) readLoop(c *gwConn) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			s.connGone(c, err)
			return
		}
		var f frame
		if json.Unmarshal(data, &f) != nil {
			c.close(CloseDecodeError, "Error while decoding payload.")
			continue
		}
		switch f.Op {
		case opHeartbeat:
			s.mu.Lock()
			s.gw.heartbeats++
			s.notifyLocked()
			s.mu.Unlock()
			c.send(frame{Op: opHeartbeatACK}, false)
		case opIdentify:
			s.identify(c, f.D)
		case opResume:
			s.resume(c, f.D)
		default:
			s.mu.Lock()
			authed := c.sess != nil
			s.mu.Unlock()
			if !authed {
				c.close(CloseNotAuthenticated, "Not authenticated.")
			} else if f.Op != 3 && f.Op != 4 && f.Op != 8 { // presence, voice, members: ignored
				c.close(CloseUnknownOpcode, "Unknown opcode.")
			}
		}
	}
}

// connGone forgets a connection. A close frame 1000 or 1001 from the
// client ends its session, as on Discord; anything else leaves the session
// resumable.
func (s *Server) connGone(c *gwConn, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.gw.conns, c)
	if sess := c.sess; sess != nil && sess.conn == c {
		sess.conn = nil
		if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
			sess.resumable = false
		}
	}
	s.notifyLocked()
}

func (s *Server) tokenOK(t string) bool { return t == s.token || t == "Bot "+s.token }

func (s *Server) identify(c *gwConn, raw json.RawMessage) {
	var d struct {
		Token    string `json:"token"`
		Intents  *int   `json:"intents"`
		Compress bool   `json:"compress"`
	}
	_ = json.Unmarshal(raw, &d)
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.tokenOK(d.Token)
	intents := 0
	if d.Intents != nil {
		intents = *d.Intents
	}
	s.gw.identifies = append(s.gw.identifies, Identify{TokenOK: ok, Intents: intents, Compress: d.Compress, Time: time.Now()})
	s.notifyLocked()
	switch {
	case c.sess != nil:
		c.close(CloseAlreadyAuthed, "Already authenticated.")
		return
	case !ok:
		c.close(CloseAuthFailed, "Authentication failed.")
		return
	case d.Intents == nil:
		c.close(CloseInvalidIntents, "Invalid intent(s).")
		return
	case intents&IntentMessageContent != 0 && !s.gw.privileged:
		c.close(CloseDisallowedIntents, "Disallowed intent(s).")
		return
	}
	if old := s.gw.current; old != nil {
		old.resumable = false
	}
	sess := &session{id: randomHex(16), resumable: true, intents: intents, compress: d.Compress, conn: c}
	s.gw.sessions[sess.id] = sess
	s.gw.current = sess
	c.sess = sess
	ready, _ := json.Marshal(map[string]any{
		"v": 10, "user": s.bot.wire(), "guilds": []any{}, "private_channels": []any{},
		"session_id": sess.id, "resume_gateway_url": s.GatewayURL(), "shard": []int{0, 1},
		"application": map[string]any{"id": s.bot.ID, "flags": 0},
	})
	s.sendDispatchLocked(sess, "READY", ready)
	pending := s.gw.afterReady
	s.gw.afterReady = nil
	for _, m := range pending {
		s.dispatchMessageLocked(m)
	}
}

func (s *Server) resume(c *gwConn, raw json.RawMessage) {
	var d struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int    `json:"seq"`
	}
	_ = json.Unmarshal(raw, &d)
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.gw.sessions[d.SessionID]
	tokenOK := s.tokenOK(d.Token)
	ok := tokenOK && sess != nil && sess == s.gw.current && sess.resumable && d.Seq <= sess.seq
	s.gw.resumes = append(s.gw.resumes, Resume{SessionID: d.SessionID, Seq: d.Seq, OK: ok, Time: time.Now()})
	s.notifyLocked()
	switch {
	case !tokenOK:
		c.close(CloseAuthFailed, "Authentication failed.")
		return
	case !ok:
		// The client is to IDENTIFY again on this connection.
		c.send(frame{Op: opInvalidSession, D: json.RawMessage("false")}, false)
		return
	}
	if old := sess.conn; old != nil && old != c {
		old.drop()
	}
	sess.conn, c.sess = c, sess
	for _, ev := range sess.events {
		if *ev.S > d.Seq {
			c.send(ev, false)
		}
	}
	s.sendDispatchLocked(sess, "RESUMED", json.RawMessage("{}"))
}

// dispatchLocked sends a dispatch to the current session if its intents
// let it through (intent 0: always). It reports false when no session can
// receive it: none was identified, or its connection is gone and it cannot
// be resumed. build makes the payload for the session's intents.
func (s *Server) dispatchLocked(t string, intent int, build func(intents int) any) bool {
	sess := s.gw.current
	if sess == nil || sess.conn == nil && !sess.resumable {
		return false
	}
	if intent != 0 && sess.intents&intent == 0 {
		return true
	}
	d, _ := json.Marshal(build(sess.intents))
	s.sendDispatchLocked(sess, t, d)
	return true
}

// sendDispatchLocked numbers a dispatch, keeps it for RESUME and sends it
// if the session is connected (READY compressed when asked for).
func (s *Server) sendDispatchLocked(sess *session, t string, d json.RawMessage) {
	sess.seq++
	seq := sess.seq
	f := frame{Op: opDispatch, D: d, S: &seq, T: &t}
	sess.events = append(sess.events, f)
	if sess.conn != nil {
		sess.conn.send(f, sess.compress && t == "READY")
	}
	s.notifyLocked()
}

// send writes one frame; zlib-compressed as a binary message if asked.
func (c *gwConn) send(f frame, compress bool) {
	data, _ := json.Marshal(f)
	kind := websocket.TextMessage
	if compress {
		var b bytes.Buffer
		z := zlib.NewWriter(&b)
		_, _ = z.Write(data)
		_ = z.Close()
		data, kind = b.Bytes(), websocket.BinaryMessage
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if c.ws.WriteMessage(kind, data) != nil {
		_ = c.ws.NetConn().Close()
	}
}

// close sends a close frame with code and closes the connection.
func (c *gwConn) close(code int, text string) {
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.ws.NetConn().Close()
}

// drop closes the connection without a close frame, like a network failure.
func (c *gwConn) drop() { _ = c.ws.NetConn().Close() }

// DropConnection cuts every gateway connection without a close frame, like
// a network failure. The session stays resumable: dispatches meanwhile are
// kept for RESUME. It reports how many connections it cut.
func (s *Server) DropConnection() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.gw.conns {
		if c.sess != nil && c.sess.conn == c {
			c.sess.conn = nil
		}
		delete(s.gw.conns, c)
		c.drop()
		n++
	}
	s.notifyLocked()
	return n
}

// CloseGateway closes every gateway connection with a close code, e.g.
// CloseUnknownError (the client may resume) or CloseAuthFailed.
func (s *Server) CloseGateway(code int, text string) {
	s.mu.Lock()
	conns := make([]*gwConn, 0, len(s.gw.conns))
	for c := range s.gw.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close(code, text)
	}
}

// SendRaw writes payload as a text frame to every gateway connection: a
// fault, for payloads a client does not expect (an unknown opcode, broken
// JSON).
func (s *Server) SendRaw(payload string) {
	s.mu.Lock()
	conns := make([]*gwConn, 0, len(s.gw.conns))
	for c := range s.gw.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.wmu.Lock()
		_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_ = c.ws.WriteMessage(websocket.TextMessage, []byte(payload))
		c.wmu.Unlock()
	}
}

// InvalidateSession makes the current session impossible to resume: a
// RESUME gets op 9 and the client must IDENTIFY again (and so start a new
// session, with READY). While its connection lasts it still receives
// dispatches.
func (s *Server) InvalidateSession() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gw.current != nil {
		s.gw.current.resumable = false
	}
	s.notifyLocked()
}

// SetPrivilegedIntents says whether the application may use the Message
// Content intent (true by default). When false, an IDENTIFY asking for it
// is closed with 4014 Disallowed intent(s).
func (s *Server) SetPrivilegedIntents(allowed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.privileged = allowed
}

// SetHeartbeatInterval changes the heartbeat_interval that later HELLOs
// announce.
func (s *Server) SetHeartbeatInterval(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.interval = d
}

func (s *Server) closeGateway() {
	s.mu.Lock()
	s.gw.closed = true
	conns := make([]*gwConn, 0, len(s.gw.conns))
	for c := range s.gw.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.close(websocket.CloseGoingAway, "")
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(errors.New("discordtest: no randomness"))
	}
	return hex.EncodeToString(b)
}
