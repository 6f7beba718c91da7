package discord_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord"
	"github.com/latchd/latch/gateways/discord/discordtest"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// TestLatchedChannelOutlastsStrangers: the chat latch is paired to keeps
// its place in the cursor from the moment it is latched, before any turn
// was rendered there. Strangers who were told their code was wrong (so
// latch "answered" them too), then keep writing, and more strangers after
// them, fill the cursor several times over; what the owner sends while
// latch is down is still fetched after the restart. With the /pair command
// the DM is in no message latch handled, so only the pairing itself can
// put it in the cursor.
func TestLatchedChannelOutlastsStrangers(t *testing.T) {
	for _, slash := range []bool{false, true} {
		t.Run(map[bool]string{false: "typed", true: "command"}[slash], func(t *testing.T) {
			testLatchedChannelOutlastsStrangers(t, slash)
		})
	}
}

func testLatchedChannelOutlastsStrangers(t *testing.T, slash bool) {
	d := newDaemon(t)
	owner := discordtest.User{ID: "300000000000000001", Username: "owner"}
	stranger := func(i int) discordtest.User {
		return discordtest.User{ID: fmt.Sprint(310000000000000000 + i), Username: fmt.Sprint("stranger", i)}
	}
	const answered, more = 7, 8 // together with the owner's, each fills the cursor (8 channels)

	d.start()
	for i := range answered {
		d.srv.SendDM(stranger(i), "/pair WXYZ-2345")
	}
	err := d.srv.Wait(d.ctx, func() bool {
		n := 0
		for _, s := range d.srv.Sent() {
			if s.Text() == gateways.MsgPairFailed {
				n++
			}
		}
		return n == answered
	})
	if err != nil {
		t.Fatalf("waiting for the strangers' failures: %v", err)
	}
	d.pair(owner, slash)
	for i := range answered + more {
		d.srv.SendDM(stranger(i), "hello?")
	}
	d.waitStrangers(answered + more)

	d.stop()
	d.srv.AddDMHistory(owner, "!echo while down")
	d.start()
	d.srv.SendDM(owner, "!echo after")
	d.waitText("ran echo after")
	var ran []string
	for _, s := range d.srv.SentTo(d.srv.DMChannel(owner)) {
		if strings.Contains(s.Text(), "ran echo") {
			ran = append(ran, s.Text())
		}
	}
	if len(ran) != 2 || !strings.Contains(ran[0], "ran echo while down") || !strings.Contains(ran[1], "ran echo after") {
		t.Errorf("the owner's DM got %q; want the command sent while latch was down, then the one after", ran)
	}
	for i := range answered + more {
		for _, s := range d.srv.SentTo(d.srv.DMChannel(stranger(i))) {
			if s.Text() != gateways.MsgPairFailed {
				t.Errorf("stranger %d got %q", i, s.Text())
			}
		}
	}
}

// daemon runs a Discord gateway and a Hub over one store against a fake
// Discord, as latch run does, and can restart them.
type daemon struct {
	t      *testing.T
	ctx    context.Context
	srv    *discordtest.Server
	db     *store.DB
	pairer *pairing.Pairer
	log    *slog.Logger
	hub    *gateways.Hub
	stop   func()
	// files keeps the files the chat sends; nil refuses them.
	files gateways.FileStore
}

func newDaemon(t *testing.T) *daemon {
	srv, db, pairer := newHubDeps(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return &daemon{t: t, ctx: ctx, srv: srv, db: db, pairer: pairer,
		log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// start starts the gateway and the Hub; stop, set by it, stops both.
func (d *daemon) start() {
	g := discord.New(discord.Config{Token: token, APIURL: d.srv.URL()}, d.log)
	if err := g.Start(d.ctx); err != nil {
		d.t.Fatal(err)
	}
	d.hub = gateways.NewHub(gateways.Config{Store: d.db, Pairer: d.pairer, Gateways: []gateways.Gateway{g}, Log: d.log,
		Files: d.files, Shell: func(_ context.Context, cmd string) string { return "ran " + cmd }})
	runCtx, cancel := context.WithCancel(d.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = g.Run(runCtx, d.hub) })
	wg.Go(func() { _ = d.hub.Run(runCtx) })
	stop := func() { cancel(); wg.Wait(); _ = g.Close() }
	d.stop = stop
	d.t.Cleanup(stop)
}

// pair mints a code and sends it from u's DM, typed or as the /pair
// command, and waits for the Hub's answer.
func (d *daemon) pair(u discordtest.User, slash bool) {
	d.t.Helper()
	var code string
	if err := d.db.Update(func(tx *store.Tx) (err error) {
		code, _, err = d.pairer.Mint(tx, "discord", 0)
		return err
	}); err != nil {
		d.t.Fatal(err)
	}
	if !slash {
		d.srv.SendDM(u, "/pair "+code)
		d.waitText(gateways.MsgPaired)
		return
	}
	in, err := d.srv.InvokeCommand(discordtest.CommandUse{User: u, Name: "pair", Options: map[string]string{"code": code}})
	if err != nil {
		d.t.Fatal(err)
	}
	err = d.srv.Wait(d.ctx, func() bool {
		r, ok := d.srv.Response(in.ID)
		return ok && r.Text() == gateways.MsgPaired
	})
	if err != nil {
		d.t.Fatalf("waiting for the /pair command's answer: %v", err)
	}
}

func (d *daemon) waitText(want string) {
	d.t.Helper()
	if _, err := d.srv.WaitSent(d.ctx, func(s discordtest.Sent) bool { return strings.Contains(s.Text(), want) }); err != nil {
		d.t.Fatalf("waiting for %q: %v", want, err)
	}
}

// waitStrangers waits until the Hub has dropped n strangers' messages.
func (d *daemon) waitStrangers(n uint64) {
	d.t.Helper()
	d.until(func() bool { return d.strangers() >= n }, func() string {
		return fmt.Sprintf("the Hub dropped %d strangers' messages, want %d", d.strangers(), n)
	})
}

// strangers is how many strangers' messages the Hub has dropped.
func (d *daemon) strangers() uint64 {
	var stored uint64
	_ = d.db.View(func(tx *store.Tx) (err error) {
		stored, err = tx.Counter("discord", gateways.CounterStrangers)
		return err
	})
	return stored + d.hub.HeldStrangers("discord")
}

// until waits for cond, failing with what() once the test's time is up.
// The store has no change notification: cond is polled.
func (d *daemon) until(cond func() bool, what func() string) {
	d.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-d.ctx.Done():
			d.t.Fatal(what())
		}
	}
}
