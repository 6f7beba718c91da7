//go:build goolm

package dendritetest_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"

	"github.com/latchd/latch/gateways/matrix/dendritetest"
)

// TestEncryptedExchange proves the encrypted half of the harness on the
// real server: two Clients with Olm machines open an encrypted DM, and a
// message, a reaction and a file each way arrive encrypted and decrypt.
func TestEncryptedExchange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := dendritetest.Shared(t)
	alice := s.Login(t, s.Register(t, "e2ee-alice"))
	bob := s.Login(t, s.Register(t, "e2ee-bob"))
	alice.EnableE2EE(ctx)
	bob.EnableE2EE(ctx)
	alice.Run()
	bob.Run()

	room := alice.CreateDM(ctx, bob.UserID, true)
	bob.WaitFor(room, 30*time.Second, "the invite", func() bool { return bob.Invited(room) })
	if _, err := bob.JoinRoomByID(ctx, room); err != nil {
		t.Fatal(err)
	}
	alice.WaitFor(room, 30*time.Second, "bob's join", func() bool { return alice.StateStore.IsInRoom(ctx, room, bob.UserID) })

	alice.Say(ctx, room, "secret hello")
	got := bob.WaitMessage(room, alice.UserID, "secret hello")
	if !got.Encrypted {
		t.Errorf("alice's message reached bob unencrypted")
	}
	reply := bob.Say(ctx, room, "secret answer")
	if m := alice.WaitMessage(room, bob.UserID, "secret answer"); !m.Encrypted {
		t.Errorf("bob's answer reached alice unencrypted")
	}
	alice.React(ctx, room, reply, "✅")
	bob.WaitFor(room, 30*time.Second, "alice's reaction", func() bool {
		r := bob.Reactions(room, reply)[alice.UserID]
		return len(r) == 1 && r[0] == "✅"
	})

	data := []byte("attached secret bytes")
	bob.SendFile(ctx, room, "notes.txt", "text/plain", data)
	f := alice.WaitMessage(room, bob.UserID, "notes.txt")
	if f.Content.MsgType != event.MsgFile || f.Content.File == nil || f.Content.URL != "" {
		t.Fatalf("the file came as %+v, not an encrypted attachment", f.Content)
	}
	back, err := alice.Download(ctx, f)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("download = %q, %v; want %q", back, err, data)
	}
	if u := append(alice.Undecrypted(), bob.Undecrypted()...); len(u) > 0 {
		t.Errorf("undecryptable events: %v", u)
	}
}
