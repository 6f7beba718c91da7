package matrix_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/matrix"
	"github.com/latchd/latch/gateways/matrix/dendritetest"
)

// TestBackfillOnDendrite: on a real homeserver, 120 messages of the owner
// while latch was down (past the filter's 50) are all taken, in order,
// once: the limited timeline is back-filled with /messages from
// prev_batch to the stored next_batch.
func TestBackfillOnDendrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := dendritetest.Start(t, dendritetest.Options{})
	bu, ou := s.Register(t, "latch"), s.Register(t, "owner")
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
	g := matrix.New(matrix.Config{Homeserver: s.URL, UserID: bu.UserID, AccessToken: bu.AccessToken, DeviceID: bu.DeviceID,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, SyncTimeout: time.Second},
		slog.New(slog.NewTextHandler(t.Output(), nil)))
	running(t, g, sk)
	waitFor(t, "the owner's messages", func() bool { return len(sk.texts()) >= n })
	got := sk.texts()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("taken %d messages, want the %d in order:\n%s", len(got), n, strings.Join(got, "\n"))
	}
}
