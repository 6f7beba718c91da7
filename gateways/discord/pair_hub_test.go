package discord_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/gateways/internal/adaptertest"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// syncBuffer collects log output from concurrent goroutines.
type syncBuffer = adaptertest.LogBuffer

// TestPairCommandWithHub pairs through the /pair command under the real Hub
// and store: a wrong code gets the Hub's uniform failure and the right one
// latches the DM, each reply in place of the command's ephemeral response;
// neither code shows up in any log line. Then an answer streams into the
// paired DM as a reply to the owner's message, completed by an edit.
func TestPairCommandWithHub(t *testing.T) {
	srv, db, pairer := newHubDeps(t, 2)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	owner := discordtest.User{ID: "300000000000000001", Username: "owner"}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	answer := "Here is what I found: " + strings.Repeat("all fine, ", 30) + "done."

	g := discord.New(discord.Config{Token: token, APIURL: srv.URL(), EditInterval: 10 * time.Millisecond}, log)
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hub := gateways.NewHub(gateways.Config{Store: db, Pairer: pairer, Gateways: []gateways.Gateway{g}, Log: log})
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Run(runCtx, hub) })
	wg.Go(func() { _ = hub.Run(runCtx) })
	defer func() { stopRun(); wg.Wait(); _ = g.Close() }()

	var code string
	if err := db.Update(func(tx *store.Tx) (err error) {
		code, _, err = pairer.Mint(tx, "discord", 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const wrong = "WXYZ-2345"
	pair := func(c, reply string) {
		t.Helper()
		in, err := srv.InvokeCommand(discordtest.CommandUse{User: owner, Name: "pair", Options: map[string]string{"code": c}})
		if err != nil {
			t.Fatal(err)
		}
		err = srv.Wait(ctx, func() bool {
			r, ok := srv.Response(in.ID)
			return ok && r.Text() == reply
		})
		if err != nil {
			t.Fatalf("waiting for %q in place of /pair's response: %v", reply, err)
		}
		if r, _ := srv.Response(in.ID); !r.Ephemeral {
			t.Errorf("the response to /pair is not ephemeral: %+v", r)
		}
	}
	pair(wrong, gateways.MsgPairFailed)
	pair(pairing.Format(code), gateways.MsgPaired)
	dm := srv.DMChannel(owner)
	var l *store.Latch
	if err := db.View(func(tx *store.Tx) (err error) { l, err = tx.Latch("discord"); return err }); err != nil || l == nil ||
		l.ChatID != dm || l.UserID != owner.ID {
		t.Fatalf("latch = %+v, %v; want the owner's DM %s", l, err, dm)
	}

	// A stranger's /pair on the latched gateway: dropped by the Hub, and
	// never answered — not even "thinking…".
	stranger := discordtest.User{ID: "300000000000000009", Username: "stranger"}
	in, err := srv.InvokeCommand(discordtest.CommandUse{User: stranger, Name: "pair", Options: map[string]string{"code": wrong}})
	if err != nil {
		t.Fatal(err)
	}
	for dropped := uint64(0); dropped != 1; time.Sleep(5 * time.Millisecond) {
		if ctx.Err() != nil {
			t.Fatal("the Hub did not drop the stranger's /pair")
		}
		db.View(func(tx *store.Tx) (err error) {
			dropped, err = tx.Counter("discord", gateways.CounterStrangers)
			return err
		})
	}
	if got, _ := srv.Interaction(in.ID); got.ResponseType != 0 {
		t.Errorf("a stranger's /pair on a latched gateway was answered (type %d)", got.ResponseType)
	}

	// An answer in two halves: the second only once the channel shows the
	// first, so it must arrive by an edit of that message.
	q := srv.AddDMHistory(owner, "how is the server?") // for the Hub, no model would answer it
	ev := g.RenderTurn(ctx, dm, q.ID)
	rs := []rune(answer)
	first := string(rs[:len(rs)/2])
	ev.Text(first)
	if _, err := srv.WaitSent(ctx, func(s discordtest.Sent) bool { return s.ChannelID == dm && s.Text() == first }); err != nil {
		t.Fatalf("waiting for the first half: %v", err)
	}
	ev.Text(string(rs[len(rs)/2:]))
	ev.Final(answer)
	var a discordtest.Sent
	for _, s := range srv.SentTo(dm) {
		if s.Content == first {
			a = s
		}
	}
	if a.Text() != answer || a.ReplyTo != q.ID || a.Content != first || len(a.Edits) == 0 || !a.NoPings() {
		t.Errorf("answer %+v: want a reply to %s edited from the first half to the whole", a, q.ID)
	}

	all := logs.String()
	for _, secret := range []string{code, pairing.Format(code), strings.ToLower(code), wrong} {
		if strings.Contains(all, secret) {
			t.Errorf("a pairing code (%s) is in the logs:\n%s", secret, all)
		}
	}
	if !strings.Contains(all, "gateway latched") || !strings.Contains(all, "pairing attempt failed") {
		t.Errorf("the logs do not show both attempts, so they prove nothing:\n%s", all)
	}
}
