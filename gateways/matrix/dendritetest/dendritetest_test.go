package dendritetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/matrix/dendritetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dendritetest.StopShared()
	os.Exit(code)
}

func client(t *testing.T, s *dendritetest.Server, u dendritetest.User) *mautrix.Client {
	t.Helper()
	c, err := mautrix.NewClient(s.URL, id.UserID(u.UserID), u.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	c.DeviceID = id.DeviceID(u.DeviceID)
	return c
}

// TestEncryptedDMInviteReachesBot proves the harness before any adapter:
// on a real Dendrite, an owner opens an encrypted DM with the bot the way
// Element does (trusted_private_chat, is_direct, m.room.encryption in the
// initial state), and the bot's /sync sees the invite as a DM, then, joined,
// the room's encryption and the owner's message.
func TestEncryptedDMInviteReachesBot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dendritetest.Shared(t)
	owner := client(t, s, s.Register(t, "smoke-owner"))
	bot := client(t, s, s.Register(t, "smoke-bot"))

	who, err := bot.Whoami(ctx)
	if err != nil || who.UserID != bot.UserID || who.DeviceID != bot.DeviceID {
		t.Fatalf("bot whoami = %+v, %v; want %s on device %s", who, err, bot.UserID, bot.DeviceID)
	}
	first, err := bot.FullSyncRequest(ctx, mautrix.ReqSync{})
	if err != nil {
		t.Fatalf("bot's first sync: %v", err)
	}

	room, err := owner.CreateRoom(ctx, &mautrix.ReqCreateRoom{
		Preset:   "trusted_private_chat",
		IsDirect: true,
		Invite:   []id.UserID{bot.UserID},
		InitialState: []*event.Event{{
			Type:     event.StateEncryption,
			StateKey: new(""),
			Content:  event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
		}},
	})
	if err != nil {
		t.Fatalf("owner creates the DM: %v", err)
	}

	invited, next := syncUntil(ctx, t, bot, first.NextBatch, func(r *mautrix.RespSync) bool {
		_, ok := r.Rooms.Invite[room.RoomID]
		return ok
	})
	var direct bool
	for _, ev := range invited.Rooms.Invite[room.RoomID].State.Events {
		if ev.Type == event.StateMember && ev.GetStateKey() == bot.UserID.String() {
			_ = ev.Content.ParseRaw(ev.Type)
			direct = ev.Content.AsMember().IsDirect
		}
	}
	if !direct {
		t.Errorf("the bot's invite to %s is not marked is_direct", room.RoomID)
	}

	if _, err := bot.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatalf("bot joins: %v", err)
	}
	sent, err := owner.SendText(ctx, room.RoomID, "hello bot")
	if err != nil {
		t.Fatalf("owner sends: %v", err)
	}
	var encrypted, message bool
	syncUntil(ctx, t, bot, next, func(r *mautrix.RespSync) bool {
		joined := r.Rooms.Join[room.RoomID]
		if joined == nil {
			return false
		}
		for _, ev := range append(joined.State.Events, joined.Timeline.Events...) {
			encrypted = encrypted || ev.Type == event.StateEncryption
			message = message || ev.ID == sent.EventID
		}
		return message
	})
	if !encrypted {
		t.Errorf("the bot's sync of %s carries no m.room.encryption state", room.RoomID)
	}
}

// syncUntil syncs as c from since until done holds for a response, and
// returns that response and the cursor after it.
func syncUntil(ctx context.Context, t *testing.T, c *mautrix.Client, since string, done func(*mautrix.RespSync) bool) (*mautrix.RespSync, string) {
	t.Helper()
	for {
		r, err := c.FullSyncRequest(ctx, mautrix.ReqSync{Since: since, Timeout: 5000})
		if err != nil {
			t.Fatalf("sync as %s: %v", c.UserID, err)
		}
		since = r.NextBatch
		if done(r) {
			return r, since
		}
	}
}

// TestRateLimitAnswers429 proves Options.RateLimit reaches the server: past
// the threshold, typing notifications are refused with M_LIMIT_EXCEEDED and
// retry_after_ms, the answer the adapter's pacing must honour. (Dendrite
// v0.13.8 limits typing, receipts, read markers, joins and invites per
// device, not /send: messages and edits are never refused.)
func TestRateLimitAnswers429(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dendritetest.Start(t, dendritetest.Options{RateLimit: true, Threshold: 2, CooloffMS: 10000})
	u := s.Register(t, "busy")
	room, err := client(t, s, u).CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat"})
	if err != nil {
		t.Fatalf("create room: %v", err)
	}
	for i := 0; i < 10; i++ {
		body, _ := json.Marshal(map[string]any{"typing": true, "timeout": 1000})
		url := fmt.Sprintf("%s/_matrix/client/v3/rooms/%s/typing/%s", s.URL, room.RoomID, u.UserID)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+u.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			ErrCode    string `json:"errcode"`
			RetryAfter int    `json:"retry_after_ms"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			if e.ErrCode != "M_LIMIT_EXCEEDED" || e.RetryAfter <= 0 {
				t.Fatalf("429 carries errcode %q retry_after_ms %d; want M_LIMIT_EXCEEDED and a positive wait", e.ErrCode, e.RetryAfter)
			}
			return
		}
	}
	t.Fatal("10 typing notifications in a row with a threshold of 2 were never limited")
}

// TestCloseStopsServer proves the server has an owner: after Close nothing
// answers on its port.
func TestCloseStopsServer(t *testing.T) {
	s := dendritetest.Start(t, dendritetest.Options{})
	if resp, err := http.Get(s.URL + "/_matrix/client/versions"); err != nil {
		t.Fatalf("running server does not answer: %v", err)
	} else {
		resp.Body.Close()
	}
	s.Close()
	if resp, err := http.Get(s.URL + "/_matrix/client/versions"); err == nil {
		resp.Body.Close()
		t.Fatalf("closed server still answers: %s", resp.Status)
	}
}
