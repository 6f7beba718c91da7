package matrix_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/matrix"
	"github.com/latchd/latch/gateways/matrix/dendritetest"
)

// TestCheckOnDendrite runs latch doctor's Matrix check against a real
// homeserver: a fresh device has no keys, a started gateway has uploaded
// them, a token of another user and a token logged out are each refused,
// and no error shows the token.
func TestCheckOnDendrite(t *testing.T) {
	ctx, s, u, cfg := checkServer(t)

	rep, err := matrix.Check(ctx, cfg)
	if err != nil || rep.User != u.UserID || rep.Device != u.DeviceID || rep.KeysUploaded || rep.CrossSigning {
		t.Fatalf("fresh device: %+v, %v; want %s on %s, no keys, no cross-signing", rep, err, u.UserID, u.DeviceID)
	}
	startWithKeys(ctx, t, cfg)

	other := cfg
	other.UserID = "@someone-else:" + s.Name
	if _, err := matrix.Check(ctx, other); err == nil || !strings.Contains(err.Error(), u.UserID) {
		t.Errorf("another user's token: %v; want it refused, naming whose it is", err)
	}

	cli, err := mautrix.NewClient(s.URL, id.UserID(u.UserID), u.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = matrix.Check(ctx, cfg)
	if !errors.Is(err, adapter.ErrUnauthorized) {
		t.Errorf("logged-out token: %v; want ErrUnauthorized", err)
	}
	if err != nil && strings.Contains(err.Error(), u.AccessToken) {
		t.Errorf("the error shows the token: %v", err)
	}
}

// startWithKeys starts a gateway on cfg with a vault, which uploads the
// device's keys, and checks that Check sees them.
func startWithKeys(ctx context.Context, t *testing.T, cfg matrix.Config) {
	t.Helper()
	withVault := cfg
	withVault.Vault = &memVault{}
	g := matrix.New(withVault, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err := g.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	if rep, err := matrix.Check(ctx, cfg); err != nil || !rep.KeysUploaded || rep.CrossSigning || rep.DeviceSigned {
		t.Fatalf("after Start: %+v, %v; want the device's keys uploaded, no cross-signing", rep, err)
	}
}

// checkServer is a Dendrite with latch's account and the gateway's
// configuration for it.
func checkServer(t *testing.T) (context.Context, *dendritetest.Server, dendritetest.User, matrix.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s := dendritetest.Start(t, dendritetest.Options{})
	u := s.Register(t, "latch")
	return ctx, s, u, matrix.Config{Homeserver: s.URL, UserID: u.UserID, AccessToken: u.AccessToken, DeviceID: u.DeviceID}
}

// TestBackfillOnDendrite: on a real homeserver, 120 messages of the owner
// while latch was down (past the filter's 50) are all taken, in order,
// once: the limited timeline is back-filled with /messages from
// prev_batch to the stored next_batch.
func TestBackfillOnDendrite(t *testing.T) {
	ctx, s, bu, cfg := checkServer(t)
	ou := s.Register(t, "owner")
	own := s.Login(t, ou)
	room := own.CreateDM(ctx, id.UserID(bu.UserID), false)
	bot, err := mautrix.NewClient(s.URL, id.UserID(bu.UserID), bu.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bot.JoinRoomByID(ctx, room); err != nil {
		t.Fatal(err)
	}
	before, err := bot.SyncRequest(ctx, 0, "", "", false, "")
	if err != nil {
		t.Fatal(err)
	}
	const n = 120
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("%s: m%d", ou.UserID, i))
		own.Say(ctx, room, fmt.Sprintf("m%d", i))
	}
	sk := &sink{cursor: `{"b":"` + before.NextBatch + `","o":{"r":"` + string(room) + `","u":"` + ou.UserID + `"}}`}
	cfg.MinBackoff, cfg.MaxBackoff, cfg.SyncTimeout = 10*time.Millisecond, 100*time.Millisecond, time.Second
	g := matrix.New(cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	running(t, g, sk)
	waitFor(t, "the owner's messages", func() bool { return len(sk.texts()) >= n })
	got := sk.texts()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("taken %d messages, want the %d in order:\n%s", len(got), n, strings.Join(got, "\n"))
	}
}
