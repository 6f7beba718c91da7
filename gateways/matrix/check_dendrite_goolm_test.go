//go:build goolm

package matrix_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/matrix"
	"github.com/latchd/latch/gateways/matrix/dendritetest"
)

// TestCheckCrossSigningOnDendrite: once the bot's account has
// cross-signing keys and its device is signed by them (done from another
// device of the account, as the owner would in Element), latch doctor's
// check reads both from the real server.
func TestCheckCrossSigningOnDendrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dendritetest.Start(t, dendritetest.Options{})
	u := s.Register(t, "latch")
	cfg := matrix.Config{Homeserver: s.URL, UserID: u.UserID, AccessToken: u.AccessToken, DeviceID: u.DeviceID, Vault: &memVault{}}
	g := matrix.New(cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err := g.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	defer g.Close()
	cfg.Vault = nil
	if rep, err := matrix.Check(ctx, cfg); err != nil || !rep.KeysUploaded || rep.CrossSigning || rep.DeviceSigned {
		t.Fatalf("before cross-signing: %+v, %v", rep, err)
	}

	other := s.Login(t, s.NewDevice(t, u))
	other.EnableE2EE(ctx)
	other.CrossSign(ctx, u.Password, id.DeviceID(u.DeviceID))
	rep, err := matrix.Check(ctx, cfg)
	if err != nil || !rep.CrossSigning || !rep.DeviceSigned {
		t.Errorf("after cross-signing: %+v, %v; want cross-signing and latch's device signed", rep, err)
	}
}
