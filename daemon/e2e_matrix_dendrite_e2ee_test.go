//go:build goolm

package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/matrix/dendritetest"
)

// The encrypted half of the Matrix end-to-end tests: the owner and the
// stranger are mautrix OlmMachines (goolm, hence the build tag; .ci/run
// runs these), every room is encrypted, and latch must read and answer
// encrypted, keep its keys across a kill -9, and decrypt what was sent
// while it was down.

// TestDendriteE2EEStory: the whole story in an encrypted DM.
func TestDendriteE2EEStory(t *testing.T) { matrixStory(t, true) }

// TestDendriteE2EEKill9: kill -9 mid-command in an encrypted DM.
func TestDendriteE2EEKill9(t *testing.T) { matrixKill9(t, true) }

// TestDendriteE2EELongAnswer: a long streamed answer in an encrypted DM,
// where Megolm's base64 makes every event a third larger.
func TestDendriteE2EELongAnswer(t *testing.T) { matrixLongAnswer(t, true) }

// TestDendriteE2EESecondDeviceAndUndecryptable: the owner signs in on a
// second device (a phone) after pairing: latch reads what the phone sends
// and answers so that the phone can read it (the server's device-list
// change reached latch). An encrypted event under a session latch never
// got is refused, not taken as a message, and latch status says so.
func TestDendriteE2EESecondDeviceAndUndecryptable(t *testing.T) {
	w := newMatrixWorld(t, true, dendritetest.Options{})
	ctx := w.ctx
	w.e.start()
	dm := w.pair()

	// A Megolm event whose session latch was never given.
	bogus := map[string]any{"algorithm": id.AlgorithmMegolmV1, "sender_key": "c2VuZGVyIGtleSBvZiBub2JvZHkgYXQgYWxsIGhlcmU",
		"device_id": w.owner.DeviceID, "session_id": "bm8gc3VjaCBzZXNzaW9uIGV2ZXIgc2hhcmVkIHdpdGggbGF0Y2g",
		"ciphertext": "AwgAEoABbm90IGEgcmVhbCBjaXBoZXJ0ZXh0IGF0IGFsbA"}
	if _, err := w.owner.SendMessageEvent(ctx, dm, event.EventEncrypted, bogus); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		return strings.Contains(w.matrixStatus().LastError, "could not be decrypted")
	})

	phone := w.s.Login(t, w.s.NewDevice(t, w.ownerUser))
	phone.EnableE2EE(ctx)
	phone.Run()
	w.owner.Say(ctx, dm, "!echo from-the-desktop")
	w.reply(dm, "from-the-desktop")
	phone.WaitFor(dm, 30*time.Second, "the phone to be in the room", func() bool { return phone.StateStore.IsInRoom(ctx, dm, phone.UserID) })
	phone.Say(ctx, dm, "!echo from-the-phone")
	m := phone.WaitMessage(dm, w.botID(), "from-the-phone")
	if !m.Encrypted {
		t.Error("latch answered the phone in the clear")
	}
	// What latch sent before the phone existed is not for it (a new device
	// has no keys of past sessions); the answer to the desktop, sent after,
	// is.
	phone.WaitMessage(dm, w.botID(), "from-the-desktop")
	if n := w.fromBot(dm, "could not be decrypted"); n > 0 {
		t.Errorf("latch told the chat about the undecryptable event %d times", n)
	}
}

// matrixStatus is the Matrix gateway's row of latch status.
func (w *matrixWorld) matrixStatus() control.GatewayStatus {
	w.e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := w.e.client().Status(ctx)
	if err != nil {
		w.e.t.Fatalf("status: %v", err)
	}
	for _, g := range st.Gateways {
		if g.Name == "matrix" {
			return g
		}
	}
	w.e.t.Fatalf("no matrix gateway in status: %+v", st)
	return control.GatewayStatus{}
}
