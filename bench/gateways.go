package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

// discordToken is the bot token the Discord fake accepts; like token, it
// only opens the fake on loopback.
const discordToken = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GbenCH.benchDISCORDnotAsecret-hmacValue_012345"

var discordOwner = discordtest.User{ID: "300000000000000001", Username: "owner"}

// allGatewaysRun is idle memory with every gateway latch has configured
// and latched at once (Telegram and Discord), on a home of its own.
func allGatewaysRun(ctx context.Context, o options, bin, root string, n int) (memory, error) {
	tg := newFake()
	defer tg.Close()
	dc := discordtest.New(discordToken)
	defer dc.Close()
	e := &env{o: o, bin: bin, tg: tg, dc: dc,
		home: filepath.Join(root, fmt.Sprintf("hall%d", n)),
		log:  filepath.Join(root, fmt.Sprintf("daemon-all%d.log", n))}
	if err := e.initHome(ctx); err != nil {
		return memory{}, err
	}
	d, _, err := e.start(ctx)
	if err != nil {
		return memory{}, err
	}
	defer d.stop()
	if err := e.pair(ctx, d); err != nil {
		return memory{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, callLimit)
	defer cancel()
	res, err := d.ctl.Mint(pctx, control.MintRequest{Gateway: "discord"})
	if err != nil {
		return memory{}, d.failure(fmt.Sprintf("mint for discord: %v", err))
	}
	dc.SendDM(discordOwner, "/pair "+res.Code)
	dm := dc.DMChannel(discordOwner)
	if _, err := dc.WaitSent(pctx, func(s discordtest.Sent) bool {
		return s.ChannelID == dm && strings.HasPrefix(s.Content, "Paired")
	}); err != nil {
		return memory{}, d.failure(fmt.Sprintf("no \"Paired\" on Discord: %v", err))
	}
	t := time.NewTimer(time.Until(d.started.Add(o.idle)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return memory{}, ctx.Err()
	case <-d.done:
		return memory{}, d.failure("exited while idle")
	case <-t.C:
	}
	st, err := d.ctl.Status(pctx)
	if err != nil {
		return memory{}, d.failure(fmt.Sprintf("status: %v", err))
	}
	for _, g := range st.Gateways {
		if !g.Connected || g.Latch == nil {
			return memory{}, d.failure(fmt.Sprintf("idle but %s is not connected and latched: %+v", g.Name, g))
		}
	}
	if len(st.Gateways) != 2 {
		return memory{}, d.failure(fmt.Sprintf("want 2 gateways, status has %+v", st.Gateways))
	}
	return readMemory(d.pid)
}

// discordEnviron is what points the daemon at the Discord fake.
func discordEnviron(dc *discordtest.Server) []string {
	return []string{config.EnvDiscordToken + "=" + discordToken, config.EnvDiscordAPIURL + "=" + dc.URL()}
}
