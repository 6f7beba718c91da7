package discord_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
	"github.com/latchd/latch/turn"
)

const token = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GabcDE.sEcReT-hmacValue_0123456789abcdefghijkl"

// newHubDeps is what a test that runs the adapter under the real Hub
// needs: a fake Discord, a store, and a pairer whose key is made of key.
// All are closed when the test ends.
func newHubDeps(t *testing.T, key byte) (*discordtest.Server, *store.DB, *pairing.Pairer) {
	t.Helper()
	srv := discordtest.New(token)
	t.Cleanup(srv.Close)
	db, err := store.Open(filepath.Join(t.TempDir(), "latch.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	pairer, _ := pairing.New(bytes.Repeat([]byte{key}, pairing.KeyLen))
	return srv, db, pairer
}

// TestPressAnsweredInTimeWithHub: under the real Hub and store, a button
// press is answered within Discord's three seconds, by a deferred update,
// and the Hub's notice is ephemeral. (Pairing, commands, strangers, what is
// sent while latch is down and presses answered once are the conformance
// suite's: TestConformance.)
func TestPressAnsweredInTimeWithHub(t *testing.T) {
	srv, db, pairer := newHubDeps(t, 1)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	owner := discordtest.User{ID: "300000000000000001", Username: "owner"}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	// start runs a gateway and a Hub over a store, as the daemon does.
	start := func() (g *discord.Gateway, stop func()) {
		g = discord.New(discord.Config{Token: token, APIURL: srv.URL()}, log)
		if err := g.Start(ctx); err != nil {
			t.Fatal(err)
		}
		hub := gateways.NewHub(gateways.Config{Store: db, Pairer: pairer, Gateways: []gateways.Gateway{g}, Log: log,
			Shell: func(_ context.Context, cmd string) string { return "ran " + cmd }})
		runCtx, cancelRun := context.WithCancel(ctx)
		done := make(chan struct{}, 2)
		go func() { _ = g.Run(runCtx, hub); done <- struct{}{} }()
		go func() { _ = hub.Run(runCtx); done <- struct{}{} }()
		return g, func() { cancelRun(); <-done; <-done; _ = g.Close() }
	}
	waitText := func(want string) discordtest.Sent {
		t.Helper()
		s, err := srv.WaitSent(ctx, func(s discordtest.Sent) bool { return strings.Contains(s.Text(), want) })
		if err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		return s
	}

	g, stop := start()
	defer stop()
	var code string
	if err := db.Update(func(tx *store.Tx) (err error) {
		code, _, err = pairer.Mint(tx, "discord", 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	dm := srv.DMChannel(owner)
	srv.SendDM(owner, "/pair "+code)
	if s := waitText("Paired."); s.ChannelID != dm || !s.NoPings() {
		t.Errorf("pairing reply = %+v", s)
	}
	// A button press reaches the Hub and is answered in time (no agent:
	// the request has expired).
	ev := g.RenderTurn(ctx, dm, "")
	ev.Approval(turn.Approval{ID: "k1", Tool: "bash", Summary: "ls"})
	ev.(interface{ End() }).End()
	req := waitText("Allow")
	press, err := srv.PressButton(owner, dm, req.ID, "approve:k1")
	if err != nil {
		t.Fatal(err)
	}
	notice := waitText("This request has expired.")
	if in, _ := srv.Interaction(press.ID); in.ResponseType != discordtest.ResponseDeferredUpdate || !notice.Ephemeral {
		t.Errorf("press answered %+v with %+v, want a deferred update and an ephemeral notice", in, notice)
	}
}
