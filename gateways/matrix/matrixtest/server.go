// Package matrixtest is a fake Matrix homeserver for the matrix gateway's
// tests: the few client-server API endpoints latch uses, on loopback, with
// what a real homeserver cannot be made to do on demand — M_LIMIT_EXCEEDED,
// 5xx, a /sync that hangs, a revoked token (M_UNKNOWN_TOKEN), events
// served twice, malformed events, floods of invites. It models one bot
// account (the token's) and any number of users who post into rooms;
// the real-server tests (Dendrite) cover the protocol at large.
package matrixtest

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Domain is the fake's server name.
const Domain = "fake.test"

// Bot is the bot account's user ID; BotDevice its device.
const (
	Bot       = "@latch:" + Domain
	BotDevice = "LATCHDEV"
)

// Event is one event of a room's timeline or an invite's state.
type Event struct {
	Type     string          `json:"type"`
	ID       string          `json:"event_id,omitempty"`
	Sender   string          `json:"sender"`
	StateKey *string         `json:"state_key,omitempty"`
	TS       int64           `json:"origin_server_ts,omitempty"`
	Content  json.RawMessage `json:"content"`
}

// Fault is an answer the fake gives instead of the real one.
type Fault struct {
	Status int
	// ErrCode is the Matrix errcode ("" picks one by status).
	ErrCode string
	// RetryAfterMS goes with a 429.
	RetryAfterMS int
}

// Call is one request the fake got.
type Call struct {
	Method, Path string
	Body         json.RawMessage
}

type roomState struct {
	members   map[string]bool
	encrypted bool
}

// Server is the fake homeserver.
type Server struct {
	srv    *httptest.Server
	tokens map[string]account     // by access token
	keys   map[string]*deviceKeys // by user|device

	mu       sync.Mutex
	wake     chan struct{}
	revoked  bool
	hang     bool
	stream   []streamItem // everything that happened, in order
	rooms    map[string]*roomState
	invites  map[string]streamItem // pending invites of the bot
	txns     map[string]string     // txn → event ID
	media    map[string][]byte
	faults   map[string][]Fault // by endpoint name
	calls    []Call
	next     int
	stopHang chan struct{}
}

type streamItem struct {
	room   string
	ev     Event
	invite bool
	// to-device: for the device of user
	toUser, toDevice string
}

type account struct{ user, device string }

// deviceKeys is what a device uploaded: its signed keys and its unused
// one-time keys.
type deviceKeys struct {
	device   json.RawMessage
	otks     map[string]json.RawMessage
	fallback map[string]json.RawMessage
}

// New starts a fake on loopback that takes token as the bot's.
func New(token string) *Server {
	s := &Server{tokens: map[string]account{token: {Bot, BotDevice}}, keys: map[string]*deviceKeys{}, wake: make(chan struct{}), rooms: map[string]*roomState{}, invites: map[string]streamItem{},
		txns: map[string]string{}, media: map[string][]byte{}, faults: map[string][]Fault{}, stopHang: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// AddUser lets user log in with token on device (an end-to-end
// encryption peer in the tests).
func (s *Server) AddUser(user, device, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = account{user, device}
}

// URL is the homeserver's base.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the fake.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.stopHang:
	default:
		close(s.stopHang)
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Room makes a room with members (the bot among them if listed).
func (s *Server) Room(roomID string, members ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.roomLocked(roomID)
	for _, m := range members {
		r.members[m] = true
	}
}

// Encrypt marks a room as encrypted (m.room.encryption set).
func (s *Server) Encrypt(roomID string) {
	s.mu.Lock()
	s.roomLocked(roomID).encrypted = true
	s.mu.Unlock()
	sk := ""
	s.append(roomID, Event{Type: "m.room.encryption", Sender: "@admin:" + Domain, StateKey: &sk,
		Content: json.RawMessage(`{"algorithm":"m.megolm.v1.aes-sha2"}`)})
}

func (s *Server) roomLocked(id string) *roomState {
	r := s.rooms[id]
	if r == nil {
		r = &roomState{members: map[string]bool{}}
		s.rooms[id] = r
	}
	return r
}

// Invite has from invite the bot to roomID (a DM if direct).
func (s *Server) Invite(from, roomID string, direct bool) {
	sk := Bot
	c, _ := json.Marshal(map[string]any{"membership": "invite", "is_direct": direct})
	s.mu.Lock()
	s.roomLocked(roomID).members[from] = true
	s.invites[roomID] = streamItem{room: roomID, invite: true, ev: Event{Type: "m.room.member", Sender: from, StateKey: &sk, Content: c}}
	s.stream = append(s.stream, streamItem{room: roomID, invite: true})
	s.mu.Unlock()
	s.poke()
}

// Invites is how many invites of the bot are pending.
func (s *Server) Invites() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.invites)
}

// Joined reports whether the bot is in roomID.
func (s *Server) Joined(roomID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[roomID]
	return r != nil && r.members[Bot]
}

// Post has sender send an event of type typ with content into roomID and
// returns its ID.
func (s *Server) Post(sender, roomID, typ string, content any) string {
	c, ok := content.(json.RawMessage)
	if !ok {
		c, _ = json.Marshal(content)
	}
	return s.append(roomID, Event{Type: typ, Sender: sender, Content: c})
}

// Text has sender send text into roomID.
func (s *Server) Text(sender, roomID, text string) string {
	return s.Post(sender, roomID, "m.room.message", map[string]any{"msgtype": "m.text", "body": text})
}

// React has sender react with key on target.
func (s *Server) React(sender, roomID, target, key string) string {
	return s.Post(sender, roomID, "m.reaction", map[string]any{"m.relates_to": map[string]any{
		"rel_type": "m.annotation", "event_id": target, "key": key}})
}

func (s *Server) append(roomID string, ev Event) string {
	s.mu.Lock()
	s.next++
	ev.ID = fmt.Sprintf("$e%d:%s", s.next, Domain)
	ev.TS = time.Now().UnixMilli()
	s.roomLocked(roomID)
	s.stream = append(s.stream, streamItem{room: roomID, ev: ev})
	s.mu.Unlock()
	s.poke()
	return ev.ID
}

// Redeliver serves the event id again in the next sync, as a homeserver
// may after a retried request.
func (s *Server) Redeliver(eventID string) {
	s.mu.Lock()
	for _, it := range s.stream {
		if it.ev.ID == eventID {
			s.stream = append(s.stream, it)
			break
		}
	}
	s.mu.Unlock()
	s.poke()
}

// Inject makes the next n requests to endpoint (n < 0: all until
// ClearFaults) answer f. Endpoints: "send", "sync", "whoami", "join",
// "leave", "typing", "upload", "download".
func (s *Server) Inject(endpoint string, f Fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 {
		s.faults[endpoint+"!"] = []Fault{f}
		return
	}
	for range n {
		s.faults[endpoint] = append(s.faults[endpoint], f)
	}
}

// ClearFaults drops the faults of endpoint.
func (s *Server) ClearFaults(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.faults, endpoint)
	delete(s.faults, endpoint+"!")
}

// Revoke makes the token unknown (M_UNKNOWN_TOKEN) from now on.
func (s *Server) Revoke() {
	s.mu.Lock()
	s.revoked = true
	s.mu.Unlock()
	s.poke()
}

// HangSync makes every /sync hang until the client gives up (or Close).
func (s *Server) HangSync(on bool) {
	s.mu.Lock()
	s.hang = on
	s.mu.Unlock()
}

// Calls returns the requests to endpoint so far.
func (s *Server) Calls(endpoint string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if endpointOf(c.Method, c.Path) == endpoint {
			out = append(out, c)
		}
	}
	return out
}

// Count counts the requests to endpoint.
func (s *Server) Count(endpoint string) int { return len(s.Calls(endpoint)) }

func (s *Server) poke() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

func (s *Server) fault(endpoint string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[endpoint]
	if len(q) == 0 {
		if f := s.faults[endpoint+"!"]; len(f) > 0 {
			return f[0], true
		}
		return Fault{}, false
	}
	s.faults[endpoint] = q[1:]
	return q[0], true
}

func endpointOf(method, path string) string {
	p := strings.TrimPrefix(path, "/_matrix/")
	switch {
	case strings.HasSuffix(p, "/account/whoami"):
		return "whoami"
	case strings.HasSuffix(p, "/sync"):
		return "sync"
	case strings.Contains(p, "/send/"):
		return "send"
	case strings.HasSuffix(p, "/join"):
		return "join"
	case strings.HasSuffix(p, "/leave"):
		return "leave"
	case strings.Contains(p, "/typing/"):
		return "typing"
	case strings.HasSuffix(p, "/keys/upload"):
		return "upload-keys"
	case strings.HasSuffix(p, "/keys/query"):
		return "query-keys"
	case strings.HasSuffix(p, "/keys/claim"):
		return "claim-keys"
	case strings.Contains(p, "/upload"):
		return "upload"
	case strings.Contains(p, "/media/download/"):
		return "download"
	case strings.HasSuffix(p, "/joined_members"):
		return "members"
	case strings.Contains(p, "/state/"):
		return "state"
	case strings.Contains(p, "/sendToDevice/"):
		return "to-device"
	}
	return method + " " + p
}

func writeErr(w http.ResponseWriter, f Fault) {
	code := f.ErrCode
	if code == "" {
		switch {
		case f.Status == 429:
			code = "M_LIMIT_EXCEEDED"
		case f.Status == 401:
			code = "M_UNKNOWN_TOKEN"
		case f.Status == 404:
			code = "M_NOT_FOUND"
		case f.Status >= 500:
			code = "M_UNKNOWN"
		default:
			code = "M_FORBIDDEN"
		}
	}
	body := map[string]any{"errcode": code, "error": "fake: " + code}
	if f.RetryAfterMS > 0 {
		body["retry_after_ms"] = f.RetryAfterMS
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	ep := endpointOf(r.Method, r.URL.Path)
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Body: json.RawMessage(body)})
	revoked := s.revoked
	s.mu.Unlock()
	if r.URL.Path == "/_matrix/client/versions" {
		writeJSON(w, map[string]any{"versions": []string{"v1.11"}})
		return
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	who, known := s.who(tok)
	if revoked && who.user == Bot || !known {
		writeErr(w, Fault{Status: 401, ErrCode: "M_UNKNOWN_TOKEN"})
		return
	}
	if f, ok := s.fault(ep); ok {
		writeErr(w, f)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/_matrix/client/v3/"), "/")
	switch ep {
	case "whoami":
		writeJSON(w, map[string]any{"user_id": who.user, "device_id": who.device})
	case "sync":
		s.sync(w, r, who)
	case "upload-keys":
		s.uploadKeys(w, who, body)
	case "query-keys":
		s.queryKeys(w, body)
	case "claim-keys":
		s.claimKeys(w, body)
	case "to-device":
		s.sendToDevice(w, who, parts[1], body)
	case "join":
		s.member(parts[1], who.user, true)
		writeJSON(w, map[string]any{"room_id": parts[1]})
	case "leave":
		s.member(parts[1], who.user, false)
		writeJSON(w, map[string]any{})
	case "send":
		s.send(w, who.user, parts[1], parts[3], parts[4], body)
	case "typing":
		writeJSON(w, map[string]any{})
	case "members":
		s.members(w, parts[1])
	case "state":
		s.mu.Lock()
		rs := s.rooms[parts[1]]
		enc := rs != nil && rs.encrypted
		s.mu.Unlock()
		if !enc {
			writeErr(w, Fault{Status: 404})
			return
		}
		writeJSON(w, map[string]any{"algorithm": "m.megolm.v1.aes-sha2"})
	case "upload":
		s.mu.Lock()
		s.next++
		mid := "m" + strconv.Itoa(s.next)
		s.media[mid] = body
		s.mu.Unlock()
		writeJSON(w, map[string]any{"content_uri": "mxc://" + Domain + "/" + mid})
	case "download":
		s.mu.Lock()
		data, ok := s.media[r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]]
		s.mu.Unlock()
		if !ok {
			writeErr(w, Fault{Status: 404})
			return
		}
		w.Write(data)
	default:
		writeErr(w, Fault{Status: 404, ErrCode: "M_UNRECOGNIZED"})
	}
}

// Upload stores data in the media repository and returns its mxc URL.
func (s *Server) Upload(data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	mid := "m" + strconv.Itoa(s.next)
	s.media[mid] = data
	return "mxc://" + Domain + "/" + mid
}

func (s *Server) member(roomID, user string, join bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if user == Bot {
		delete(s.invites, roomID)
	}
	r := s.roomLocked(roomID)
	if join {
		r.members[user] = true
	} else {
		delete(r.members, user)
	}
}

func (s *Server) members(w http.ResponseWriter, roomID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	joined := map[string]any{}
	if r := s.rooms[roomID]; r != nil {
		for m := range r.members {
			joined[m] = map[string]any{}
		}
	}
	writeJSON(w, map[string]any{"joined": joined})
}

func (s *Server) send(w http.ResponseWriter, sender, roomID, typ, txn string, body []byte) {
	s.mu.Lock()
	txn = sender + "|" + txn
	if id, ok := s.txns[txn]; ok {
		s.mu.Unlock()
		writeJSON(w, map[string]any{"event_id": id})
		return
	}
	if r := s.rooms[roomID]; r == nil || !r.members[sender] {
		s.mu.Unlock()
		writeErr(w, Fault{Status: 403})
		return
	}
	s.mu.Unlock()
	id := s.append(roomID, Event{Type: typ, Sender: sender, Content: json.RawMessage(body)})
	s.mu.Lock()
	s.txns[txn] = id
	s.mu.Unlock()
	writeJSON(w, map[string]any{"event_id": id})
}

// sync serves what happened after since (a position in the stream) in the
// rooms the bot is in, and the pending invites, waiting up to timeout.
func (s *Server) sync(w http.ResponseWriter, r *http.Request, who account) {
	since, _ := strconv.Atoi(r.URL.Query().Get("since"))
	timeout, _ := strconv.Atoi(r.URL.Query().Get("timeout"))
	deadline := time.After(time.Duration(timeout) * time.Millisecond)
	for {
		s.mu.Lock()
		hang, wake, n := s.hang, s.wake, len(s.stream)
		s.mu.Unlock()
		if hang && who.user == Bot {
			select {
			case <-r.Context().Done():
			case <-s.stopHang:
			}
			return
		}
		if n > since || timeout == 0 {
			break
		}
		select {
		case <-wake:
		case <-deadline:
			writeJSON(w, map[string]any{"next_batch": strconv.Itoa(n)})
			return
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	join := map[string]any{}
	invite := map[string]any{}
	toDevice := []Event{}
	for _, it := range s.stream[min(since, len(s.stream)):] {
		if it.toUser != "" {
			if it.toUser == who.user && it.toDevice == who.device {
				toDevice = append(toDevice, it.ev)
			}
			continue
		}
		if it.invite {
			if who.user != Bot {
				continue
			}
			if inv, ok := s.invites[it.room]; ok {
				invite[it.room] = map[string]any{"invite_state": map[string]any{"events": []Event{inv.ev}}}
			}
			continue
		}
		rs := s.rooms[it.room]
		if rs == nil || !rs.members[who.user] {
			continue
		}
		jr, _ := join[it.room].(map[string]any)
		if jr == nil {
			jr = map[string]any{"timeline": map[string]any{"events": []Event{}}}
			join[it.room] = jr
		}
		tl := jr["timeline"].(map[string]any)
		tl["events"] = append(tl["events"].([]Event), it.ev)
	}
	otks := 0
	if k := s.keys[who.user+"|"+who.device]; k != nil {
		otks = len(k.otks)
	}
	writeJSON(w, map[string]any{"next_batch": strconv.Itoa(len(s.stream)), "rooms": map[string]any{"join": join, "invite": invite},
		"to_device": map[string]any{"events": toDevice}, "device_one_time_keys_count": map[string]any{"signed_curve25519": otks}})
}

// Sent is one message the bot sent, as a client shows it: its last edit.
type Sent struct {
	ID      string
	Type    string // msgtype
	Body    string
	HTML    string
	Content map[string]any // the original content
	Edits   int
}

// Sent returns the bot's messages in roomID, edits applied, in order.
func (s *Server) Sent(roomID string) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	idx := map[string]int{}
	for _, it := range s.stream {
		if it.invite || it.room != roomID || it.ev.Sender != Bot || it.ev.Type != "m.room.message" {
			continue
		}
		var c map[string]any
		if json.Unmarshal(it.ev.Content, &c) != nil {
			continue
		}
		if rel, _ := c["m.relates_to"].(map[string]any); rel != nil && rel["rel_type"] == "m.replace" {
			i, ok := idx[fmt.Sprint(rel["event_id"])]
			nc, _ := c["m.new_content"].(map[string]any)
			if ok && nc != nil {
				out[i].Body, _ = nc["body"].(string)
				out[i].HTML, _ = nc["formatted_body"].(string)
				out[i].Edits++
			}
			continue
		}
		m := Sent{ID: it.ev.ID, Content: c}
		m.Type, _ = c["msgtype"].(string)
		m.Body, _ = c["body"].(string)
		m.HTML, _ = c["formatted_body"].(string)
		idx[it.ev.ID] = len(out)
		out = append(out, m)
	}
	return out
}

// Media returns an upload's bytes.
func (s *Server) Media(mxc string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.media[mxc[strings.LastIndex(mxc, "/")+1:]]
}

// who is the account of an access token.
func (s *Server) who(tok string) (account, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, a := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(t)) == 1 {
			return a, true
		}
	}
	return account{}, false
}

func (s *Server) uploadKeys(w http.ResponseWriter, who account, body []byte) {
	var req struct {
		DeviceKeys json.RawMessage            `json:"device_keys"`
		OTKs       map[string]json.RawMessage `json:"one_time_keys"`
		Fallback   map[string]json.RawMessage `json:"fallback_keys"`
	}
	if json.Unmarshal(body, &req) != nil {
		writeErr(w, Fault{Status: 400, ErrCode: "M_BAD_JSON"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[who.user+"|"+who.device]
	if k == nil {
		k = &deviceKeys{otks: map[string]json.RawMessage{}, fallback: map[string]json.RawMessage{}}
		s.keys[who.user+"|"+who.device] = k
	}
	if len(req.DeviceKeys) > 0 && string(req.DeviceKeys) != "null" {
		if k.device != nil && !jsonEqual(k.device, req.DeviceKeys) {
			writeErr(w, Fault{Status: 400, ErrCode: "M_INVALID_PARAM"})
			return
		}
		k.device = req.DeviceKeys
	}
	for id, v := range req.OTKs {
		k.otks[id] = v
	}
	for id, v := range req.Fallback {
		k.fallback[id] = v
	}
	writeJSON(w, map[string]any{"one_time_key_counts": map[string]any{"signed_curve25519": len(k.otks)}})
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal(b, &y)
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func (s *Server) queryKeys(w http.ResponseWriter, body []byte) {
	var req struct {
		DeviceKeys map[string][]string `json:"device_keys"`
	}
	json.Unmarshal(body, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]json.RawMessage{}
	for user := range req.DeviceKeys {
		out[user] = map[string]json.RawMessage{}
		for key, k := range s.keys {
			u, dev, _ := strings.Cut(key, "|")
			if u == user && k.device != nil {
				out[user][dev] = k.device
			}
		}
	}
	writeJSON(w, map[string]any{"device_keys": out})
}

func (s *Server) claimKeys(w http.ResponseWriter, body []byte) {
	var req struct {
		OTKs map[string]map[string]string `json:"one_time_keys"`
	}
	json.Unmarshal(body, &req)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]map[string]json.RawMessage{}
	for user, devs := range req.OTKs {
		out[user] = map[string]map[string]json.RawMessage{}
		for dev := range devs {
			k := s.keys[user+"|"+dev]
			if k == nil {
				continue
			}
			ids := make([]string, 0, len(k.otks))
			for id := range k.otks {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			switch {
			case len(ids) > 0:
				out[user][dev] = map[string]json.RawMessage{ids[0]: k.otks[ids[0]]}
				delete(k.otks, ids[0])
			case len(k.fallback) > 0:
				out[user][dev] = k.fallback
			}
		}
	}
	writeJSON(w, map[string]any{"one_time_keys": out})
}

func (s *Server) sendToDevice(w http.ResponseWriter, who account, typ string, body []byte) {
	var req struct {
		Messages map[string]map[string]json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		writeErr(w, Fault{Status: 400, ErrCode: "M_BAD_JSON"})
		return
	}
	s.mu.Lock()
	for user, devs := range req.Messages {
		for dev, c := range devs {
			s.stream = append(s.stream, streamItem{toUser: user, toDevice: dev, ev: Event{Type: typ, Sender: who.user, Content: c}})
		}
	}
	s.mu.Unlock()
	s.poke()
	writeJSON(w, map[string]any{})
}
