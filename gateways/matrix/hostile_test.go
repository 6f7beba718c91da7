package matrix_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/matrix"
	"github.com/latchd/latch/gateways/matrix/matrixtest"
	"github.com/latchd/latch/turn"
)

func newTestGateway(srv *matrixtest.Server, allowGroups bool) *matrix.Gateway {
	return matrix.New(matrix.Config{Homeserver: srv.URL(), UserID: matrixtest.Bot, AccessToken: token, AllowGroups: allowGroups,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, EditInterval: 10 * time.Millisecond,
		SyncTimeout: time.Second, RequestTimeout: 2 * time.Second}, slog.New(slog.DiscardHandler))
}

// running starts g on s; the returned channel gives Run's error.
func running(t *testing.T, g *matrix.Gateway, s *sink) (<-chan error, context.CancelFunc) {
	t.Helper()
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() { defer close(finished); done <- g.Run(ctx, s) }()
	t.Cleanup(func() { cancel(); <-finished })
	return done, cancel
}

// TestRevokedTokenEndsRun: M_UNKNOWN_TOKEN while running ends Run with
// ErrUnauthorized (the daemon exits 78) and says what to do.
func TestRevokedTokenEndsRun(t *testing.T) {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	done, _ := running(t, newTestGateway(srv, false), &sink{})
	srv.Revoke()
	select {
	case err := <-done:
		if !errors.Is(err, adapter.ErrUnauthorized) || !strings.Contains(err.Error(), "M_UNKNOWN_TOKEN") ||
			!strings.Contains(err.Error(), "access_token") {
			t.Errorf("Run after a revoked token = %v, want ErrUnauthorized saying what to fix", err)
		}
		if strings.Contains(err.Error(), token) {
			t.Error("the token is in the error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run goes on with a revoked token")
	}
}

// TestSyncFaultsRetried: 5xx, M_LIMIT_EXCEEDED and a /sync that hangs
// past the request timeout are retried; the message after them arrives
// once.
func TestSyncFaultsRetried(t *testing.T) {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	srv.Room(dm, matrixtest.Bot, owner)
	s := &sink{}
	running(t, newTestGateway(srv, false), s)
	waitFor(t, "the first sync", func() bool { return srv.Count("sync") > 1 })
	srv.Inject("sync", matrixtest.Fault{Status: 502}, 2)
	srv.Inject("sync", matrixtest.Fault{Status: 429, RetryAfterMS: 50}, 1)
	srv.Text(owner, dm, "after the faults")
	waitFor(t, "the message after the faults", func() bool { return has(s.texts(), owner+": after the faults") })
	srv.HangSync(true)
	hung := srv.Count("sync")
	waitFor(t, "a hung sync to be given up and tried again", func() bool { return srv.Count("sync") > hung+1 })
	srv.HangSync(false)
	srv.Text(owner, dm, "after the hang")
	waitFor(t, "the message after the hang", func() bool { return has(s.texts(), owner+": after the hang") })
	n := 0
	for _, m := range s.texts() {
		if m == owner+": after the faults" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the message after the faults came %d times", n)
	}
}

// TestHostileEvents: malformed content is nothing, a huge body is
// clipped, formatted_body is never read, a reaction on an approval
// message counts only in that message's room and names its reactor, and
// an event served again is taken once.
func TestHostileEvents(t *testing.T) {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	srv.Room(dm, matrixtest.Bot, owner, other)
	srv.Room(group, matrixtest.Bot, owner)
	g := newTestGateway(srv, true)
	s := &sink{}
	running(t, g, s)
	waitFor(t, "the first sync", func() bool { return srv.Count("sync") > 1 })

	srv.Post(owner, dm, "m.room.message", json.RawMessage(`{"msgtype":"m.text","body":12}`))
	srv.Post(owner, dm, "m.room.message", json.RawMessage(`["not","an","object"]`))
	srv.Post(owner, dm, "m.room.message", json.RawMessage(`{"msgtype":"m.text","body":"shown","format":"org.matrix.custom.html","formatted_body":"<script>alert(1)</script><b>hidden`+"\xff"+`"}`))
	srv.Post(owner, dm, "m.room.message", map[string]any{"msgtype": "m.text", "body": strings.Repeat("x", 1<<20)})
	id, err := g.Send(t.Context(), dm, adapter.Reply{Text: "approve?", Buttons: []adapter.Button{{Label: "Approve", Data: turn.Payload(turn.KindApprove, "k1")}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.React(owner, group, id, "✅") // from another room
	srv.React(other, dm, id, "✅")    // another user
	srv.React(owner, dm, id, "🍕")    // not a button
	replayed := srv.Text(owner, dm, "!echo once")
	srv.Redeliver(replayed)
	srv.Text(owner, dm, "last")
	waitFor(t, "the last message", func() bool { return has(s.texts(), owner+": last") })

	s.mu.Lock()
	defer s.mu.Unlock()
	var texts []string
	presses := 0
	for _, m := range s.msgs {
		if m.Callback != nil {
			presses++
			if m.UserID != other || m.ChatID != dm || m.Callback.Data != turn.Payload(turn.KindApprove, "k1") {
				t.Errorf("a press %+v %+v, want the other user's in the DM", m, *m.Callback)
			}
			continue
		}
		texts = append(texts, m.Text)
		if len(m.Text) > 32<<10 {
			t.Errorf("a body of %d bytes was taken whole", len(m.Text))
		}
	}
	if presses != 1 {
		t.Errorf("%d presses, want only the one in the message's room with a button's emoji", presses)
	}
	want := []string{"shown", strings.Repeat("x", 32<<10), "!echo once", "last"}
	if len(texts) != len(want) {
		t.Fatalf("took %d messages, want %d: %.80q", len(texts), len(want), texts)
	}
	for i := range want {
		if texts[i] != want[i] {
			t.Errorf("message %d = %.40q…, want %.40q…", i, texts[i], want[i])
		}
	}
}

// TestInviteFlood: 10,000 invites from strangers cost at most a few
// joined rooms, are all answered (none left pending), and leave the
// gateway's memory and cursor bounded; nothing is sent.
func TestInviteFlood(t *testing.T) {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	g := newTestGateway(srv, false)
	s := &sink{}
	running(t, g, s)
	waitFor(t, "the first sync", func() bool { return srv.Count("sync") > 1 })
	for i := range 10000 {
		srv.Invite(stranger, fmt.Sprintf("!flood%05d:%s", i, matrixtest.Domain), i%2 == 0)
	}
	waitFor(t, "every invite answered", func() bool { return srv.Invites() == 0 })
	if n := srv.Count("join"); n > 64 {
		t.Errorf("%d rooms joined for a flood of invites", n)
	}
	if n := g.Rooms(); n > 256 {
		t.Errorf("the gateway remembers %d rooms", n)
	}
	s.mu.Lock()
	if len(s.cursor) > 64<<10 {
		t.Errorf("the cursor grew to %d bytes", len(s.cursor))
	}
	s.mu.Unlock()
	if n := srv.Count("send"); n != 0 {
		t.Errorf("%d messages sent during the flood", n)
	}
}

// TestDenseMarkupFitsAnEvent: text that escapes to several times its
// length (HTML entities, then JSON's \u003c) is cut so that every event,
// an edit of it included, stays under Matrix's 64 KiB.
func TestDenseMarkupFitsAnEvent(t *testing.T) {
	srv := matrixtest.New(token)
	t.Cleanup(srv.Close)
	srv.Room(dm, matrixtest.Bot, owner)
	g := newTestGateway(srv, false)
	running(t, g, &sink{})
	text := strings.Repeat("<&> **b** ", 20000)
	if _, err := g.Send(t.Context(), dm, adapter.Reply{Text: text, Markdown: true}); err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("send")
	if len(calls) < 2 {
		t.Fatalf("%d events for %d bytes of dense markup", len(calls), len(text))
	}
	for _, c := range calls {
		// The edit of it carries it twice; Megolm adds a third.
		if n := len(c.Body) * 2 * 4 / 3; n > 64<<10 {
			t.Errorf("an event whose edit, encrypted, would take %d bytes", n)
		}
	}
}
