package discordtest

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const token = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GabcDE.secretSecretSecretSecret"

var alice = User{ID: "300000000000000001", Username: "alice"}

func newServer(t *testing.T) *Server {
	t.Helper()
	s := New(token)
	t.Cleanup(s.Close)
	return s
}

// call makes a REST request and decodes the JSON answer into out (if not nil).
func call(t *testing.T, s *Server, method, path string, body any, auth bool, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.URL()+"/api/v10/"+path, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.Header.Set("Authorization", "Bot "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.Header.Get("X-RateLimit-Limit") == "" {
		t.Errorf("%s %s: no X-RateLimit-* headers", method, path)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func TestRESTAuthAndErrors(t *testing.T) {
	s := newServer(t)
	var e apiError
	if code := call(t, s, "GET", "users/@me", nil, false, &e); code != 401 || e.Message != "401: Unauthorized" {
		t.Errorf("no token: %d %+v, want 401 Unauthorized", code, e)
	}
	var me wireUser
	if code := call(t, s, "GET", "users/@me", nil, true, &me); code != 200 || me.ID != "1234567890123456789" || !me.Bot {
		t.Errorf("users/@me = %d %+v, want the bot, its id from the token", code, me)
	}
	ch := s.DMChannel(alice)
	long := strings.Repeat("é", 2001)
	if code := call(t, s, "POST", "channels/"+ch+"/messages", map[string]any{"content": long}, true, &e); code != 400 || e.Code != 50035 || !strings.Contains(string(e.Errors), "BASE_TYPE_MAX_LENGTH") {
		t.Errorf("2001 characters: %d %+v, want 400 Invalid Form Body", code, e)
	}
	var m wireMessage
	body := map[string]any{"content": long[:4000], "allowed_mentions": map[string]any{"parse": []string{}}}
	if code := call(t, s, "POST", "channels/"+ch+"/messages", body, true, &m); code != 200 || m.Author.ID != s.Bot().ID {
		t.Errorf("2000 characters: %d %+v", code, m)
	}
	if sent := s.Sent(); len(sent) != 1 || !sent[0].NoPings() {
		t.Errorf("sent = %+v, want one message that pings no one", sent)
	}
	if code := call(t, s, "POST", "channels/"+ch+"/messages", map[string]any{"content": ""}, true, &e); code != 400 || e.Code != 50006 {
		t.Errorf("empty message: %d %+v, want 50006", code, e)
	}
	if code := call(t, s, "POST", "channels/42/messages", map[string]any{"content": "x"}, true, &e); code != 404 || e.Code != 10003 {
		t.Errorf("unknown channel: %d %+v, want 10003", code, e)
	}
	s.Inject(RouteCreateMessage, Fault{Status: 429, RetryAfter: 0.25, Global: true})
	req, _ := http.NewRequest("POST", s.URL()+"/api/v10/channels/"+ch+"/messages", strings.NewReader(`{"content":"x"}`))
	req.Header.Set("Authorization", "Bot "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rl struct {
		RetryAfter float64 `json:"retry_after"`
		Global     bool    `json:"global"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&rl)
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 429 || rl.RetryAfter != 0.25 || !rl.Global || h.Get("Retry-After") != "1" ||
		h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Reset-After") != "0.250" || h.Get("X-RateLimit-Global") != "true" {
		t.Errorf("429 = %d %+v %v", resp.StatusCode, rl, h)
	}
}

func TestHistoryPaging(t *testing.T) {
	s := newServer(t)
	var ids []string
	for _, text := range []string{"a", "b", "c", "d", "e"} {
		ids = append(ids, s.AddDMHistory(alice, text).ID)
	}
	ch := s.DMChannel(alice)
	var page []wireMessage
	call(t, s, "GET", "channels/"+ch+"/messages?after="+ids[0]+"&limit=2", nil, true, &page)
	if len(page) != 2 || page[0].Content != "c" || page[1].Content != "b" {
		t.Errorf("after a, limit 2 = %+v, want c, b (the two right after, newest first)", page)
	}
	call(t, s, "GET", "channels/"+ch+"/messages?before="+ids[4]+"&limit=2", nil, true, &page)
	if len(page) != 2 || page[0].Content != "d" || page[1].Content != "c" {
		t.Errorf("before e, limit 2 = %+v, want d, c", page)
	}
	call(t, s, "GET", "channels/"+ch+"/messages", nil, true, &page)
	if len(page) != 5 || page[0].Content != "e" || page[0].GuildID != "" {
		t.Errorf("default = %+v, want all 5, newest first", page)
	}
	var e apiError
	if code := call(t, s, "GET", "channels/"+ch+"/messages?limit=101", nil, true, &e); code != 400 || e.Code != 50035 {
		t.Errorf("limit 101: %d %+v", code, e)
	}
}

type gwClient struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, s *Server) *gwClient {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(s.GatewayURL()+"/?v=10&encoding=json", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	c := &gwClient{t: t, ws: ws}
	if f := c.read(); f.Op != opHello || !strings.Contains(string(f.D), `"heartbeat_interval":41250`) {
		t.Fatalf("first frame = %+v, want HELLO", f)
	}
	return c
}

func (c *gwClient) send(op int, d any) {
	if err := c.ws.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *gwClient) read() frame {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	kind, data, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if kind == websocket.BinaryMessage {
		z, err := zlib.NewReader(bytes.NewReader(data))
		if err != nil {
			c.t.Fatal(err)
		}
		data, _ = io.ReadAll(z)
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		c.t.Fatal(err)
	}
	return f
}

func (c *gwClient) dispatch(want string, seq int) frame {
	c.t.Helper()
	f := c.read()
	if f.Op != opDispatch || f.T == nil || *f.T != want || f.S == nil || *f.S != seq {
		c.t.Fatalf("got %+v, want %s with s=%d", f, want, seq)
	}
	return f
}

func TestGatewayIdentifyResumeAndInvalidSession(t *testing.T) {
	s := newServer(t)
	c := dial(t, s)
	c.send(opHeartbeat, nil)
	if f := c.read(); f.Op != opHeartbeatACK {
		t.Fatalf("heartbeat answered %+v", f)
	}
	c.send(opIdentify, map[string]any{"token": "Bot " + token, "intents": IntentDirectMessages, "compress": true})
	var ready struct {
		SessionID string `json:"session_id"`
		ResumeURL string `json:"resume_gateway_url"`
	}
	_ = json.Unmarshal(c.dispatch("READY", 1).D, &ready)
	if ready.SessionID == "" || ready.ResumeURL != s.GatewayURL() {
		t.Errorf("READY = %+v", ready)
	}
	s.SendDM(alice, "one")
	c.dispatch("MESSAGE_CREATE", 2)
	s.SendGuildMessage("1", "2", alice, "no GUILD_MESSAGES intent: not sent")

	s.DropConnection()
	s.SendDM(alice, "two") // kept for RESUME
	s.SendDM(alice, "three")
	c2 := dial(t, s)
	c2.send(opResume, map[string]any{"token": "Bot " + token, "session_id": ready.SessionID, "seq": 2})
	var m wireMessage
	_ = json.Unmarshal(c2.dispatch("MESSAGE_CREATE", 3).D, &m)
	if m.Content != "two" {
		t.Errorf("first replayed = %q, want two", m.Content)
	}
	c2.dispatch("MESSAGE_CREATE", 4)
	c2.dispatch("RESUMED", 5)

	s.InvalidateSession()
	s.DropConnection()
	c3 := dial(t, s)
	c3.send(opResume, map[string]any{"token": token, "session_id": ready.SessionID, "seq": 5})
	if f := c3.read(); f.Op != opInvalidSession || string(f.D) != "false" {
		t.Fatalf("RESUME of an invalid session = %+v, want op 9", f)
	}
	if r := s.Resumes(); len(r) != 2 || !r[0].OK || r[1].OK {
		t.Errorf("resumes = %+v", r)
	}

	c4 := dial(t, s)
	c4.send(opIdentify, map[string]any{"token": "wrong", "intents": 0})
	_ = c4.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := c4.ws.ReadMessage(); !websocket.IsCloseError(err, CloseAuthFailed) {
		t.Errorf("IDENTIFY with a wrong token: %v, want close 4004", err)
	}
}

func TestInteractionAnsweredOnceInTime(t *testing.T) {
	s := newServer(t)
	ch := s.DMChannel(alice)
	rows := []Row{{Type: 1, Components: []Button{{Type: 2, Style: 3, Label: "OK", CustomID: "approve:x"}}}}
	var m wireMessage
	call(t, s, "POST", "channels/"+ch+"/messages", map[string]any{"content": "ok?", "components": rows}, true, &m)
	if _, err := s.PressButton(alice, ch, m.ID, "nope"); err == nil {
		t.Error("pressed a button that does not exist")
	}
	in, err := s.PressButton(alice, ch, m.ID, "approve:x")
	if err != nil {
		t.Fatal(err)
	}
	path := "interactions/" + in.ID + "/" + in.Token + "/callback"
	update := map[string]any{"type": 7, "data": map[string]any{"content": "ok? ✓", "components": []any{}}}
	if code := call(t, s, "POST", path, update, false, nil); code != 204 {
		t.Fatalf("first answer: %d", code)
	}
	var e apiError
	if code := call(t, s, "POST", path, map[string]any{"type": 6}, false, &e); code != 400 || e.Code != 40060 {
		t.Errorf("second answer: %d %+v, want 40060", code, e)
	}
	if sent := s.Sent()[0]; sent.Text() != "ok? ✓" || len(sent.Buttons()) != 0 {
		t.Errorf("message after UPDATE_MESSAGE: %q, %d buttons", sent.Text(), len(sent.Buttons()))
	}
	if code := call(t, s, "POST", "webhooks/"+s.Bot().ID+"/"+in.Token, map[string]any{"content": "psst", "flags": FlagEphemeral}, false, nil); code != 204 {
		t.Errorf("follow-up: %d", code)
	}
	if f, err := s.WaitSent(context.Background(), func(x Sent) bool { return x.Ephemeral }); err != nil || f.Content != "psst" {
		t.Errorf("ephemeral follow-up = %+v, %v", f, err)
	}

	s.SetAckWindow(time.Nanosecond)
	call(t, s, "POST", "channels/"+ch+"/messages", map[string]any{"content": "again?", "components": rows}, true, &m)
	late, err := s.PressButton(alice, ch, m.ID, "approve:x")
	if err != nil {
		t.Fatal(err)
	}
	if code := call(t, s, "POST", "interactions/"+late.ID+"/"+late.Token+"/callback", map[string]any{"type": 6}, false, &e); code != 404 || e.Code != 10062 {
		t.Errorf("late answer: %d %+v, want 10062 Unknown interaction", code, e)
	}
}
