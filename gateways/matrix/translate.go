package matrix

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
)

// maxBody bounds the text latch takes from one event (an event is at most
// 64 KiB; a homeserver could serve more).
const maxBody = 32 << 10

// content is the part of an m.room.message or m.reaction latch reads; a
// field of the wrong JSON type makes the event nothing.
type content struct {
	MsgType   string          `json:"msgtype"`
	Body      string          `json:"body"`
	Format    string          `json:"format"`
	FileName  string          `json:"filename"`
	URL       string          `json:"url"`
	File      json.RawMessage `json:"file"`
	Info      *fileInfo       `json:"info"`
	RelatesTo *relatesTo      `json:"m.relates_to"`
}

type fileInfo struct {
	MIME     string `json:"mimetype"`
	Size     int64  `json:"size"`
	Duration int64  `json:"duration"` // ms
}

type relatesTo struct {
	Type    string     `json:"rel_type"`
	EventID id.EventID `json:"event_id"`
	Key     string     `json:"key"`
	Reply   *struct {
		EventID id.EventID `json:"event_id"`
	} `json:"m.in_reply_to"`
}

// translate turns one /sync into the messages for the Hub, noting in next
// the events it took. On the first sync (no cursor yet) the timeline is
// history: only what was sent since Start is taken (by the homeserver's
// clock), else only the rooms' state is read.
func (g *Gateway) translate(ctx context.Context, resp *mautrix.RespSync, next *cursor, first bool) []adapter.Message {
	self := g.self()
	if e := g.crypto(); e != nil {
		e.toDevice(ctx, resp.ToDevice.Events)
	}
	var msgs []adapter.Message
	for rid, jr := range resp.Rooms.Join {
		if jr == nil {
			continue
		}
		for _, evt := range jr.State.Events {
			g.noteState(rid, evt)
		}
		for _, evt := range jr.Timeline.Events {
			if evt == nil {
				continue
			}
			evt.RoomID = rid
			if evt.StateKey != nil {
				g.noteState(rid, evt)
				continue
			}
			if first && evt.Timestamp < g.startedMS || evt.Sender == self || evt.ID == "" || next.seen(evt.ID) {
				continue
			}
			next.add(evt.ID)
			if m, ok := g.message(ctx, evt); ok {
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

// noteState keeps what latch needs of a room's state: whether it is
// encrypted.
func (g *Gateway) noteState(rid id.RoomID, evt *event.Event) {
	if evt != nil && evt.Type == event.StateMember {
		if e := g.crypto(); e != nil {
			e.forgetMembers(rid)
		}
		return
	}
	if evt == nil || evt.Type != event.StateEncryption {
		return
	}
	var c struct {
		Algorithm string `json:"algorithm"`
	}
	if json.Unmarshal(evt.Content.VeryRaw, &c) != nil || c.Algorithm == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.roomLocked(rid).encrypted = true
}

// roomLocked returns what latch knows of rid, making room for it (never
// the owner's) when full. g.mu is held.
func (g *Gateway) roomLocked(rid id.RoomID) *room {
	if r := g.rooms[rid]; r != nil {
		return r
	}
	if len(g.rooms) >= maxRooms {
		for k := range g.rooms {
			if k != g.owner.Room {
				delete(g.rooms, k)
				break
			}
		}
	}
	r := &room{joinedAt: time.Now()}
	g.rooms[rid] = r
	return r
}

// message translates a timeline event: a message, or a reaction on a
// message of latch's with buttons (a press). ok is false for everything
// else: notices (bots), edits, other events, and what cannot be read.
func (g *Gateway) message(ctx context.Context, evt *event.Event) (adapter.Message, bool) {
	raw, typ := evt.Content.VeryRaw, evt.Type
	if typ == event.EventEncrypted {
		e := g.crypto()
		if e == nil {
			g.undecryptable(evt, errNoE2EE)
			return adapter.Message{}, false
		}
		var err error
		if typ, raw, err = e.decrypt(ctx, evt); err != nil {
			g.undecryptable(evt, err)
			return adapter.Message{}, false
		}
	}
	var c content
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return adapter.Message{}, false
	}
	m := adapter.Message{Gateway: g.Name(), ID: string(evt.ID), ChatID: string(evt.RoomID), UserID: string(evt.Sender),
		Time: time.UnixMilli(evt.Timestamp)}
	if evt.Timestamp <= 0 {
		m.Time = time.Now()
	}
	switch typ {
	case event.EventReaction:
		cb, ok := g.press(evt, c.RelatesTo)
		if !ok {
			return adapter.Message{}, false
		}
		m.Callback = cb
	case event.EventMessage:
		if c.RelatesTo != nil && c.RelatesTo.Type == string(event.RelReplace) {
			return adapter.Message{}, false // an edit: the original was taken
		}
		switch c.MsgType {
		case string(event.MsgText), string(event.MsgEmote):
			m.Text = c.Body
			if c.RelatesTo != nil && c.RelatesTo.Reply != nil {
				m.Text = stripReplyFallback(m.Text)
			}
			m.Text = clipBody(m.Text)
		case string(event.MsgFile), string(event.MsgImage), string(event.MsgAudio), string(event.MsgVideo):
			a, caption, ok := fileOf(c)
			if !ok {
				return adapter.Message{}, false
			}
			m.Files, m.Text = []adapter.Attachment{a}, clipBody(caption)
		default:
			return adapter.Message{}, false // m.notice (bots), m.location, …
		}
	default:
		return adapter.Message{}, false
	}
	m.ChatType = g.chatType(ctx, evt.RoomID)
	g.mu.Lock()
	g.roomLocked(evt.RoomID).lastUser = evt.Sender
	g.mu.Unlock()
	return m, true
}

// press translates a reaction: one of the emoji on a message of latch's
// with buttons, in the same room, is that button's press.
func (g *Gateway) press(evt *event.Event, rel *relatesTo) (*adapter.Callback, bool) {
	if rel == nil || rel.Type != string(event.RelAnnotation) || rel.EventID == "" {
		return nil, false
	}
	g.mu.Lock()
	msg, ok := g.buttons[rel.EventID]
	g.mu.Unlock()
	if !ok || msg.room != evt.RoomID {
		return nil, false // not latch's, or a relation into another room
	}
	data, ok := msg.payload[strings.TrimSuffix(rel.Key, "\ufe0f")]
	if !ok {
		return nil, false
	}
	return &adapter.Callback{ID: string(evt.ID), Data: data, MessageID: string(rel.EventID)}, true
}

// chatType is private for a DM: invited as direct, or two members at most.
func (g *Gateway) chatType(ctx context.Context, rid id.RoomID) adapter.ChatType {
	g.mu.Lock()
	r := g.roomLocked(rid)
	known, direct := r.known, r.direct
	g.mu.Unlock()
	if !known {
		var jm *mautrix.RespJoinedMembers
		err := g.call(ctx, func(ctx context.Context) (err error) {
			jm, err = g.cli.JoinedMembers(ctx, rid)
			return err
		})
		if err != nil {
			g.log.Warn("reading a room's members failed; taking it for a group", "chat", string(rid), "err", err)
			return adapter.ChatGroup
		}
		direct = len(jm.Joined) <= 2
		g.mu.Lock()
		r = g.roomLocked(rid)
		r.known, r.direct = true, direct
		g.mu.Unlock()
	}
	if direct {
		return adapter.ChatPrivate
	}
	return adapter.ChatGroup
}

// fileOf is a file message's attachment and caption. The id is the
// mxc URL, or for an encrypted file its "file" object (with the key),
// which Download reads back.
func fileOf(c content) (adapter.Attachment, string, bool) {
	a := adapter.Attachment{Name: c.FileName, Kind: kindOf(c.MsgType)}
	if c.Info != nil {
		a.Size, a.MIME, a.Seconds = max(c.Info.Size, 0), c.Info.MIME, int(max(c.Info.Duration, 0)/1000)
	}
	switch {
	case len(c.File) > 0 && string(c.File) != "null":
		a.ID = encPrefix + string(c.File)
	case strings.HasPrefix(c.URL, "mxc://"):
		a.ID = c.URL
	default:
		return adapter.Attachment{}, "", false
	}
	caption := ""
	if a.Name == "" {
		a.Name = c.Body
	} else if c.Body != a.Name {
		caption = c.Body
	}
	return a, caption, true
}

func kindOf(msgType string) string {
	switch msgType {
	case string(event.MsgImage):
		return "photo"
	case string(event.MsgAudio):
		return "audio"
	case string(event.MsgVideo):
		return "video"
	}
	return "document"
}

// stripReplyFallback drops the quoted "> " lines a reply's body starts
// with (the quoted message is someone's words, not the owner's).
func stripReplyFallback(body string) string {
	if !strings.HasPrefix(body, "> ") {
		return body
	}
	lines := strings.Split(body, "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], ">") {
		i++
	}
	return strings.TrimLeft(strings.Join(lines[i:], "\n"), "\n")
}

// clipBody bounds a message's text at maxBody bytes, on a rune boundary.
func clipBody(s string) string {
	if len(s) <= maxBody {
		return s
	}
	return strings.ToValidUTF8(s[:maxBody], "")
}
