//go:build goolm

package matrix_test

import (
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/matrix"
)

// TestCheckCrossSigningOnDendrite: once the bot's account has
// cross-signing keys and its device is signed by them (done from another
// device of the account, as the owner would in Element), latch doctor's
// check reads both from the real server.
func TestCheckCrossSigningOnDendrite(t *testing.T) {
	ctx, s, u, cfg := checkServer(t)
	startWithKeys(ctx, t, cfg)

	other := s.Login(t, s.NewDevice(t, u))
	other.EnableE2EE(ctx)
	other.CrossSign(ctx, u.Password, id.DeviceID(u.DeviceID))
	rep, err := matrix.Check(ctx, cfg)
	if err != nil || !rep.CrossSigning || !rep.DeviceSigned {
		t.Errorf("after cross-signing: %+v, %v; want cross-signing and latch's device signed", rep, err)
	}
}
