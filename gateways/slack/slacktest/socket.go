package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// User is someone who writes to the bot.
type User struct {
	ID   string
	Team string // "" is the fake's own workspace
}

func (u User) team() string {
	if u.Team == "" {
		return TeamID
	}
	return u.Team
}

// DM is the id of the bot's direct-message conversation with u.
func DM(u User) string { return "D" + strings.TrimPrefix(u.ID, "U") }

func channelType(ch string) string {
	switch {
	case strings.HasPrefix(ch, "D"):
		return "im"
	case strings.HasPrefix(ch, "G"):
		return "group"
	}
	return "channel"
}

// socket upgrades to the Socket Mode WebSocket: hello, then every envelope
// not acknowledged yet, then each new one as it comes.
func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	conn, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	wmu := &sync.Mutex{}
	s.mu.Lock()
	s.conns[conn] = wmu
	pending := s.unackedLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	write := func(v any) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		return conn.WriteJSON(v)
	}
	if write(map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": AppID}, "debug_info": map[string]any{"host": "slacktest"}}) != nil {
		return
	}
	for _, e := range pending {
		if write(s.wire(e, true)) != nil {
			return
		}
	}
	pinger := time.NewTicker(s.PingEvery)
	defer pinger.Stop()
	go func() {
		for {
			select {
			case <-pinger.C:
				wmu.Lock()
				err := conn.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
				wmu.Unlock()
				if err != nil {
					return
				}
			case <-s.done:
				return
			}
		}
	}()
	for {
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err := conn.ReadJSON(&ack); err != nil {
			return
		}
		s.mu.Lock()
		for _, e := range s.envs {
			if e.ID == ack.EnvelopeID {
				e.Acked = true
			}
		}
		s.mu.Unlock()
		s.changed.Notify()
	}
}

func (s *Server) unackedLocked() []*envelope {
	var out []*envelope
	for _, e := range s.envs {
		if !e.Acked {
			out = append(out, e)
		}
	}
	return out
}

// wire is an envelope as Slack sends it; again counts it as a retry.
func (s *Server) wire(e *envelope, again bool) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if again && e.Attempt >= 0 {
		e.Attempt++
	}
	w := map[string]any{"envelope_id": e.ID, "type": e.Type, "payload": e.Payload,
		"accepts_response_payload": e.Type != "events_api"}
	if e.Type == "events_api" {
		w["retry_attempt"], w["retry_reason"] = max(e.Attempt, 0), ""
		if e.Attempt > 0 {
			w["retry_reason"] = "timeout"
		}
	}
	return w
}

// queueLocked adds an envelope and pushes it to the open sockets.
func (s *Server) queueLocked(typ, key string, payload json.RawMessage) *envelope {
	e := &envelope{ID: fmt.Sprintf("env-%d", s.next()), Type: typ, Payload: payload, Key: key, Attempt: -1}
	s.envs = append(s.envs, e)
	go s.push(e)
	return e
}

func (s *Server) push(e *envelope) {
	s.mu.Lock()
	conns := make(map[*websocket.Conn]*sync.Mutex, len(s.conns))
	for c, m := range s.conns {
		conns[c] = m
	}
	s.mu.Unlock()
	msg := s.wire(e, true)
	// One connection gets it, as Slack does: the first that takes the
	// write. A socket just dropped stays in conns until its reader sees
	// the close, and the socket that replaced it may have sent what was
	// pending before e was queued, so a failed write tries the next one.
	for c, m := range conns {
		m.Lock()
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		err := c.WriteJSON(msg)
		m.Unlock()
		if err == nil {
			return
		}
	}
}

func (s *Server) eventPayload(ev map[string]any) json.RawMessage {
	if _, ok := ev["event_ts"]; !ok {
		ev["event_ts"] = ev["ts"]
	}
	team := TeamID
	if t, ok := ev["team"].(string); ok && t != "" {
		team = t
	}
	b, _ := json.Marshal(map[string]any{"token": "verification", "team_id": team, "api_app_id": AppID,
		"type": "event_callback", "event_id": fmt.Sprintf("Ev%06d", s.next()), "event_time": time.Now().Unix(),
		"event": ev})
	return b
}

// Post sends a message from u to channel: stored in its history and, when
// deliver is set, sent as an events_api envelope (a message event in a
// DM, an app_mention in a channel when the text mentions the bot). It
// returns the message's ts.
func (s *Server) Post(u User, channel, text string, deliver bool, files ...File) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{Channel: channel, TS: s.tsLocked(), User: u.ID, Team: u.team(), Text: text, Files: files}
	if len(files) > 0 {
		m.Subtype = "file_share"
	}
	s.history[channel] = append(s.history[channel], m)
	if deliver {
		typ := "message"
		if channelType(channel) != "im" {
			if !strings.Contains(text, "<@"+BotUserID+">") {
				return m.TS // the bot hears mentions only
			}
			typ = "app_mention"
		}
		ev := map[string]any{"type": typ, "channel": channel, "user": u.ID, "text": text, "ts": m.TS,
			"team": u.team(), "client_msg_id": fmt.Sprintf("c-%s", m.TS), "channel_type": channelType(channel)}
		if len(files) > 0 {
			ev["subtype"], ev["files"] = "file_share", files
		}
		s.queueLocked("events_api", m.TS, s.eventPayload(ev))
	}
	return m.TS
}

// SendDM is u writing to the bot in their DM.
func (s *Server) SendDM(u User, text string, files ...File) string {
	return s.Post(u, DM(u), text, true, files...)
}

// Event sends any inner event (a message_changed, a bot's message) as an
// events_api envelope.
func (s *Server) Event(ev map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queueLocked("events_api", "", s.eventPayload(ev))
}

// Redeliver sends the envelope of the message with ts again, as Slack
// does when an acknowledgement did not reach it in time.
func (s *Server) Redeliver(ts string) {
	s.mu.Lock()
	var e *envelope
	for _, x := range s.envs {
		if x.Key == ts {
			e = x
		}
	}
	s.mu.Unlock()
	if e != nil {
		go s.push(e)
	}
}

// Unacked counts the envelopes not acknowledged yet.
func (s *Server) Unacked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.unackedLocked())
}

// Press is u pressing the button with value on the bot's message ts in
// channel (a block_actions interactive envelope).
func (s *Server) Press(u User, channel, ts, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"type": "block_actions",
		"user": map[string]any{"id": u.ID, "team_id": u.team(), "username": u.ID}, "team": map[string]any{"id": u.team()},
		"api_app_id": AppID, "channel": map[string]any{"id": channel}, "trigger_id": fmt.Sprintf("tr-%s-%s", ts, value),
		"container":    map[string]any{"type": "message", "message_ts": ts, "channel_id": channel},
		"response_url": s.base + "/response", "actions": []map[string]any{{"type": "button", "action_id": value,
			"block_id": "approval", "value": value, "action_ts": ts}}})
	s.queueLocked("interactive", "", b)
}

// Command is u running a slash command in channel.
func (s *Server) Command(u User, channel, command, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"command": command, "text": text, "user_id": u.ID, "team_id": u.team(),
		"channel_id": channel, "api_app_id": AppID, "trigger_id": fmt.Sprintf("tr-%d", s.next())})
	s.queueLocked("slash_commands", "", b)
}

// Raw writes text as a frame on the open sockets (a malformed envelope).
func (s *Server) Raw(text string) {
	s.each(func(c *websocket.Conn) { _ = c.WriteMessage(websocket.TextMessage, []byte(text)) })
}

// Disconnect sends the disconnect envelope (reason: "refresh_requested",
// "link_disabled", "warning").
func (s *Server) Disconnect(reason string) {
	s.each(func(c *websocket.Conn) { _ = c.WriteJSON(map[string]any{"type": "disconnect", "reason": reason}) })
}

// DropSockets closes every open socket without a word.
func (s *Server) DropSockets() {
	s.each(func(c *websocket.Conn) { c.Close() })
}

// Sockets counts the open sockets.
func (s *Server) Sockets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) each(f func(*websocket.Conn)) {
	s.mu.Lock()
	conns := make(map[*websocket.Conn]*sync.Mutex, len(s.conns))
	for c, m := range s.conns {
		conns[c] = m
	}
	s.mu.Unlock()
	for c, m := range conns {
		m.Lock()
		f(c)
		m.Unlock()
	}
}
