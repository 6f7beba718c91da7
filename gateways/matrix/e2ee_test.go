package matrix_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/gateways/matrix"
	"github.com/latchd/latch/gateways/matrix/matrixtest"
)

// memVault is a Vault in memory; saves counts the Save calls.
type memVault struct {
	mu    sync.Mutex
	data  map[string]map[string][]byte
	saves int
}

func (v *memVault) Load(_ context.Context, gw string) (map[string][]byte, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.data[gw]), nil
}

func (v *memVault) Save(_ context.Context, gw string, put map[string][]byte, del []string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.data == nil {
		v.data = map[string]map[string][]byte{}
	}
	if v.data[gw] == nil {
		v.data[gw] = map[string][]byte{}
	}
	for _, k := range del {
		delete(v.data[gw], k)
	}
	for k, val := range put {
		v.data[gw][k] = val
	}
	v.saves++
	return nil
}

// sink collects what a gateway ingests and keeps its cursor.
type sink struct {
	mu     sync.Mutex
	cursor string
	msgs   []adapter.Message
}

func (s *sink) Cursor(context.Context, string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor, nil
}

func (s *sink) Ingest(_ context.Context, _, cursor string, msgs []adapter.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursor = cursor
	s.msgs = append(s.msgs, msgs...)
	return nil
}

func (s *sink) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.msgs {
		out = append(out, m.UserID+": "+m.Text)
	}
	return out
}

const ownerToken = "syt_owner_token_for_the_e2ee_peer"

// peer runs a gateway (the bot, or the owner's device as a second latch
// gateway) against srv until the test ends or stop is called.
type peer struct {
	g    *matrix.Gateway
	sink *sink
	stop func()
}

func runPeer(t *testing.T, srv *matrixtest.Server, user, tok string, v adapter.Vault, s *sink, log *slog.Logger) *peer {
	t.Helper()
	g := matrix.New(matrix.Config{Homeserver: srv.URL(), UserID: user, AccessToken: tok, Vault: v,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, EditInterval: 10 * time.Millisecond,
		SyncTimeout: 2 * time.Second}, log)
	if err := g.Start(t.Context()); err != nil {
		t.Fatalf("Start %s: %v", user, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx, s) }()
	p := &peer{g: g, sink: s}
	p.stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(p.stop)
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func has(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

// TestEncryptedRoundTripAndRestart: in an encrypted DM the owner's
// device and latch read each other's messages; nothing goes over the
// wire in the clear; after latch restarts on the same Vault it still
// reads the owner's session and its answers still decrypt, without new
// device keys.
func TestEncryptedRoundTripAndRestart(t *testing.T) {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	srv.AddUser(owner, "OWNERDEV", ownerToken)
	srv.Room(dm, matrixtest.Bot, owner)
	srv.Encrypt(dm)
	logs := &adaptertest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	botVault, ownerVault := &memVault{}, &memVault{}
	bot := runPeer(t, srv, matrixtest.Bot, token, botVault, &sink{}, log)
	own := runPeer(t, srv, owner, ownerToken, ownerVault, &sink{}, log)

	if _, err := own.g.Send(t.Context(), dm, adapter.Reply{Text: "secret hello"}); err != nil {
		t.Fatalf("owner Send: %v", err)
	}
	waitFor(t, "latch to read the owner's message", func() bool { return has(bot.sink.texts(), owner+": secret hello") })
	if _, err := bot.g.Send(t.Context(), dm, adapter.Reply{Text: "secret answer"}); err != nil {
		t.Fatalf("latch Send: %v", err)
	}
	waitFor(t, "the owner to read latch's answer", func() bool { return has(own.sink.texts(), matrixtest.Bot+": secret answer") })

	uploads := srv.Count("upload-keys")
	bot.stop()
	cur := bot.sink.cursor
	bot = runPeer(t, srv, matrixtest.Bot, token, botVault, &sink{cursor: cur}, log)
	if n := srv.Count("upload-keys"); n != uploads {
		t.Errorf("the restart uploaded keys again (%d uploads, was %d): a device must keep its keys", n, uploads)
	}
	if _, err := own.g.Send(t.Context(), dm, adapter.Reply{Text: "after the restart"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "latch to read the owner after its restart", func() bool { return has(bot.sink.texts(), owner+": after the restart") })
	if _, err := bot.g.Send(t.Context(), dm, adapter.Reply{Text: "still encrypted"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the owner to read latch after its restart", func() bool { return has(own.sink.texts(), matrixtest.Bot+": still encrypted") })

	for _, c := range srv.Calls("send") {
		for _, s := range []string{"secret hello", "secret answer", "after the restart", "still encrypted"} {
			if strings.Contains(string(c.Body), s) {
				t.Errorf("%q went to the homeserver in the clear: %s", s, c.Body)
			}
		}
		if !strings.Contains(c.Path, "m.room.encrypted") {
			t.Errorf("a send into the encrypted room was not encrypted: %s", c.Path)
		}
	}
}

// TestUndecryptableRefused: an encrypted event latch has no key for, or
// whose session someone else shared, is not a message; the log and Info
// (latch status) say so.
func TestUndecryptableRefused(t *testing.T) {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	srv.AddUser(owner, "OWNERDEV", ownerToken)
	srv.AddUser(stranger, "STRDEV", "syt_stranger_token")
	srv.Room(dm, matrixtest.Bot, owner)
	srv.Room(group, matrixtest.Bot, stranger)
	srv.Encrypt(dm)
	srv.Encrypt(group)
	logs := &adaptertest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	bot := runPeer(t, srv, matrixtest.Bot, token, &memVault{}, &sink{}, log)
	str := runPeer(t, srv, stranger, "syt_stranger_token", &memVault{}, &sink{}, log)

	// The stranger's message in their room decrypts (their session, their room).
	if _, err := str.g.Send(t.Context(), group, adapter.Reply{Text: "from the stranger"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stranger's message", func() bool { return has(bot.sink.texts(), stranger+": from the stranger") })
	var stolen json.RawMessage
	for _, c := range srv.Calls("send") {
		if strings.Contains(c.Path, group[1:]) {
			stolen = c.Body
		}
	}
	// Replayed into the owner's DM, in the owner's name: another room, and
	// a session the owner did not share.
	srv.Post(owner, dm, "m.room.encrypted", stolen)
	// A session nobody shared.
	srv.Post(owner, dm, "m.room.encrypted", json.RawMessage(`{"algorithm":"m.megolm.v1.aes-sha2","session_id":"nope","ciphertext":"AwgAEhAAAA"}`))
	srv.Text(owner, dm, "!echo marker")
	waitFor(t, "the marker", func() bool { return has(bot.sink.texts(), owner+": !echo marker") })
	for _, m := range bot.sink.texts() {
		if strings.HasPrefix(m, owner+": ") && m != owner+": !echo marker" {
			t.Errorf("an event that must not decrypt was taken: %q", m)
		}
	}
	if n := strings.Count(logs.String(), "could not be decrypted"); n != 2 {
		t.Errorf("%d undecryptable events in the log, want 2:\n%s", n, logs)
	}
	if info := bot.g.Info(); !strings.Contains(info.LastError, "2 encrypted event(s) could not be decrypted") {
		t.Errorf("Info().LastError = %q, want the count of undecryptable events", info.LastError)
	}
}

// failingVault refuses every Save.
type failingVault struct{ memVault }

func (*failingVault) Save(context.Context, string, map[string][]byte, []string) error {
	return errors.New("disk full")
}

// TestKeysStoredBeforeUpload: an account that cannot be stored is never
// uploaded (keys on the homeserver that latch lost would need a new
// device).
func TestKeysStoredBeforeUpload(t *testing.T) {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	g := matrix.New(matrix.Config{Homeserver: srv.URL(), UserID: matrixtest.Bot, AccessToken: token, Vault: &failingVault{}}, nil)
	if err := g.Start(t.Context()); err == nil {
		t.Fatal("Start with a Vault that cannot store the account succeeded")
	}
	if n := srv.Count("upload-keys"); n != 0 {
		t.Errorf("%d key uploads of an account that was not stored", n)
	}
}
