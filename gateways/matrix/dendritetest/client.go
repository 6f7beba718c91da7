package dendritetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/internal/faketest"
)

// Client is a person on the server, seen through mautrix as Element would
// be: it syncs all the time (owned by the test's cleanup) and keeps every
// room's timeline, typing notices and read receipts, so a test can wait
// for what the bot did and check what it did not do.
type Client struct {
	*mautrix.Client
	t testing.TB

	mu       sync.Mutex
	timeline map[id.RoomID][]*event.Event // decrypted where E2EE is on
	invites  map[id.RoomID]bool
	typing   map[id.RoomID]map[id.UserID]bool         // ever seen typing
	receipts map[id.RoomID]map[id.UserID][]id.EventID // every receipt's event
	failures []string                                 // events that did not decrypt
	changed  faketest.Signal                          // notified after each sync
	e2ee     e2ee
}

// e2ee is the client's end-to-end encryption, when turned on (see
// EnableE2EE, in the goolm build).
type e2ee interface {
	processSync(ctx context.Context, resp *mautrix.RespSync, since string)
	encrypt(ctx context.Context, room id.RoomID, typ event.Type, content any) (any, error)
	decrypt(ctx context.Context, evt *event.Event) (*event.Event, error)
}

// Login returns u's client, syncing until t ends.
func (s *Server) Login(t testing.TB, u User) *Client {
	t.Helper()
	cli, err := mautrix.NewClient(s.URL, id.UserID(u.UserID), u.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	cli.DeviceID = id.DeviceID(u.DeviceID)
	cli.StateStore = mautrix.NewMemoryStateStore()
	return &Client{Client: cli, t: t,
		timeline: map[id.RoomID][]*event.Event{}, invites: map[id.RoomID]bool{},
		typing: map[id.RoomID]map[id.UserID]bool{}, receipts: map[id.RoomID]map[id.UserID][]id.EventID{},
	}
}

// Run starts c's sync loop; the test's cleanup stops it and waits.
func (c *Client) Run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.syncLoop(ctx)
	}()
	c.t.Cleanup(func() { cancel(); <-done })
}

func (c *Client) syncLoop(ctx context.Context) {
	since := ""
	for ctx.Err() == nil {
		resp, err := c.FullSyncRequest(ctx, mautrix.ReqSync{Since: since, Timeout: 1000})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		c.take(ctx, resp, since)
		since = resp.NextBatch
	}
}

// take records one sync response.
func (c *Client) take(ctx context.Context, resp *mautrix.RespSync, since string) {
	for room, joined := range resp.Rooms.Join {
		for _, evt := range append(joined.State.Events, joined.Timeline.Events...) {
			evt.RoomID = room
			_ = evt.Content.ParseRaw(evt.Type)
			if evt.StateKey != nil {
				mautrix.UpdateStateStore(ctx, c.StateStore, evt)
			}
		}
	}
	if c.e2ee != nil {
		c.e2ee.processSync(ctx, resp, since)
	}
	var failures []string
	timeline := map[id.RoomID][]*event.Event{}
	for room, joined := range resp.Rooms.Join {
		for _, evt := range joined.Timeline.Events {
			if evt.Type == event.EventEncrypted && c.e2ee != nil {
				if dec, err := c.e2ee.decrypt(ctx, evt); err != nil {
					failures = append(failures, fmt.Sprintf("%s from %s: %v", evt.ID, evt.Sender, err))
				} else {
					evt = dec
				}
			}
			timeline[room] = append(timeline[room], evt)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, failures...)
	for room := range resp.Rooms.Invite {
		c.invites[room] = true
	}
	for room, joined := range resp.Rooms.Join {
		c.timeline[room] = append(c.timeline[room], timeline[room]...)
		for _, evt := range joined.Ephemeral.Events {
			_ = evt.Content.ParseRaw(evt.Type)
			switch evt.Type {
			case event.EphemeralEventTyping:
				for _, u := range evt.Content.AsTyping().UserIDs {
					mark(c.typing, room, u)
				}
			case event.EphemeralEventReceipt:
				for target, byType := range *evt.Content.AsReceipt() {
					for _, users := range byType {
						for u := range users {
							if c.receipts[room] == nil {
								c.receipts[room] = map[id.UserID][]id.EventID{}
							}
							c.receipts[room][u] = append(c.receipts[room][u], target)
						}
					}
				}
			}
		}
	}
	c.changed.Notify()
}

func mark(m map[id.RoomID]map[id.UserID]bool, room id.RoomID, u id.UserID) {
	if m[room] == nil {
		m[room] = map[id.UserID]bool{}
	}
	m[room][u] = true
}

// CreateDM opens a direct chat with peer as Element does
// (trusted_private_chat, is_direct), encrypted with Megolm when asked.
func (c *Client) CreateDM(ctx context.Context, peer id.UserID, encrypted bool) id.RoomID {
	c.t.Helper()
	req := &mautrix.ReqCreateRoom{Preset: "trusted_private_chat", IsDirect: true, Invite: []id.UserID{peer}}
	if encrypted {
		req.InitialState = []*event.Event{{
			Type: event.StateEncryption, StateKey: new(""),
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
		}}
	}
	resp, err := c.CreateRoom(ctx, req)
	if err != nil {
		c.t.Fatalf("%s creates a DM with %s: %v", c.UserID, peer, err)
	}
	return resp.RoomID
}

// Send sends content of type typ to room, encrypted when the room is.
func (c *Client) Send(ctx context.Context, room id.RoomID, typ event.Type, content any) id.EventID {
	c.t.Helper()
	if enc, err := c.StateStore.IsEncrypted(ctx, room); err == nil && enc {
		if c.e2ee == nil {
			c.t.Fatalf("%s cannot send to the encrypted room %s: E2EE is off (build with -tags goolm)", c.UserID, room)
		}
		var err error
		if content, err = c.e2ee.encrypt(ctx, room, typ, content); err != nil {
			c.t.Fatalf("%s encrypts for %s: %v", c.UserID, room, err)
		}
		typ = event.EventEncrypted
	}
	resp, err := c.SendMessageEvent(ctx, room, typ, content)
	if err != nil {
		c.t.Fatalf("%s sends %s to %s: %v", c.UserID, typ.Type, room, err)
	}
	return resp.EventID
}

// Say sends a plain text message.
func (c *Client) Say(ctx context.Context, room id.RoomID, text string) id.EventID {
	c.t.Helper()
	return c.Send(ctx, room, event.EventMessage, &event.MessageEventContent{MsgType: event.MsgText, Body: text})
}

// React puts key (an emoji) on target; encrypted in an encrypted room, as
// Element sends it (m.relates_to stays in the clear beside the ciphertext).
func (c *Client) React(ctx context.Context, room id.RoomID, target id.EventID, key string) id.EventID {
	c.t.Helper()
	return c.Send(ctx, room, event.EventReaction, &event.ReactionEventContent{
		RelatesTo: event.RelatesTo{Type: event.RelAnnotation, EventID: target, Key: key}})
}

// SendFile uploads data and sends it as an m.file, as an encrypted
// attachment in an encrypted room.
func (c *Client) SendFile(ctx context.Context, room id.RoomID, name, mime string, data []byte) id.EventID {
	c.t.Helper()
	content := &event.MessageEventContent{MsgType: event.MsgFile, Body: name, FileName: name,
		Info: &event.FileInfo{MimeType: mime, Size: len(data)}}
	upload := data
	enc, _ := c.StateStore.IsEncrypted(ctx, room)
	var file *attachment.EncryptedFile
	if enc {
		file = attachment.NewEncryptedFile()
		upload = file.Encrypt(data)
	}
	up, err := c.UploadBytes(ctx, upload, "application/octet-stream")
	if err != nil {
		c.t.Fatalf("%s uploads %s: %v", c.UserID, name, err)
	}
	if file != nil {
		content.File = &event.EncryptedFileInfo{EncryptedFile: *file, URL: up.ContentURI.CUString()}
	} else {
		content.URL = up.ContentURI.CUString()
	}
	return c.Send(ctx, room, event.EventMessage, content)
}

// Download fetches the file of a message, decrypting an encrypted
// attachment.
func (c *Client) Download(ctx context.Context, m Message) ([]byte, error) {
	content := m.Content
	uri := content.URL
	if content.File != nil {
		uri = content.File.URL
	}
	parsed, err := uri.Parse()
	if err != nil {
		return nil, fmt.Errorf("file URL %q: %w", uri, err)
	}
	data, err := c.DownloadBytes(ctx, parsed)
	if err != nil || content.File == nil {
		return data, err
	}
	if err := content.File.PrepareForDecryption(); err != nil {
		return nil, err
	}
	return content.File.Decrypt(data)
}

// Message is one m.room.message as a reader sees it: the latest m.replace
// edit applied.
type Message struct {
	ID      id.EventID
	Sender  id.UserID
	Content *event.MessageEventContent
	// Edits is how many m.replace edits it had; Encrypted whether it (its
	// original event) came encrypted.
	Edits     int
	Encrypted bool
}

// Text is the message's plain body and its formatted body, for matching.
func (m Message) Text() string {
	return m.Content.Body + "\n" + m.Content.FormattedBody
}

// Messages are room's messages by sender ("" for everyone), in order, with
// edits applied (an edit counts only from the original's sender).
func (c *Client) Messages(room id.RoomID, sender id.UserID) []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Message
	at := map[id.EventID]int{}
	for _, evt := range c.timeline[room] {
		if evt.Type != event.EventMessage {
			continue
		}
		content := evt.Content.AsMessage()
		if rel := content.RelatesTo; rel != nil && rel.Type == event.RelReplace {
			if i, ok := at[rel.EventID]; ok && out[i].Sender == evt.Sender && content.NewContent != nil {
				out[i].Content = content.NewContent
				out[i].Edits++
			}
			continue
		}
		if sender != "" && evt.Sender != sender {
			continue
		}
		at[evt.ID] = len(out)
		out = append(out, Message{ID: evt.ID, Sender: evt.Sender, Content: content, Encrypted: evt.Mautrix.WasEncrypted})
	}
	return out
}

// Reactions are the reaction keys on target, by sender.
func (c *Client) Reactions(room id.RoomID, target id.EventID) map[id.UserID][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[id.UserID][]string{}
	for _, evt := range c.timeline[room] {
		if evt.Type != event.EventReaction {
			continue
		}
		if rel := evt.Content.AsReaction().RelatesTo; rel.EventID == target {
			out[evt.Sender] = append(out[evt.Sender], rel.Key)
		}
	}
	return out
}

// Invited reports whether c was ever invited to room.
func (c *Client) Invited(room id.RoomID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.invites[room]
}

// Typed reports whether u was ever seen typing in room.
func (c *Client) Typed(room id.RoomID, u id.UserID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.typing[room][u]
}

// Receipts are the events u sent a read receipt for in room.
func (c *Client) Receipts(room id.RoomID, u id.UserID) []id.EventID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]id.EventID(nil), c.receipts[room][u]...)
}

// Undecrypted lists the events c could not decrypt.
func (c *Client) Undecrypted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.failures...)
}

// WaitFor waits until cond holds, now or after a sync, failing the test
// after limit with what the room holds.
func (c *Client) WaitFor(room id.RoomID, limit time.Duration, what string, cond func() bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := c.changed.Wait(ctx, nil, nil, cond); err != nil {
		c.t.Fatalf("%s: %v waiting for %s; the room holds:\n%s", c.UserID, err, what, c.Describe(room))
	}
}

// WaitMessage waits for a message from sender in room whose text contains
// want, and returns it.
func (c *Client) WaitMessage(room id.RoomID, sender id.UserID, want string) Message {
	c.t.Helper()
	var found Message
	c.WaitFor(room, 30*time.Second, fmt.Sprintf("a message of %s containing %q", sender, want), func() bool {
		for _, m := range c.Messages(room, sender) {
			if strings.Contains(m.Text(), want) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// Count is how many messages of sender in room contain want.
func (c *Client) Count(room id.RoomID, sender id.UserID, want string) int {
	n := 0
	for _, m := range c.Messages(room, sender) {
		if strings.Contains(m.Text(), want) {
			n++
		}
	}
	return n
}

// Describe lists room's messages for a failure message.
func (c *Client) Describe(room id.RoomID) string {
	var b strings.Builder
	for _, m := range c.Messages(room, "") {
		fmt.Fprintf(&b, "  %s %s (edits %d, encrypted %v): %q\n", m.ID, m.Sender, m.Edits, m.Encrypted, m.Text())
	}
	if f := c.Undecrypted(); len(f) > 0 {
		fmt.Fprintf(&b, "  undecrypted: %v\n", f)
	}
	return b.String()
}
