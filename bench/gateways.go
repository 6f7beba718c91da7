package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// gatewaysRun is idle memory with Telegram and the platforms ps
// configured and latched at once, each on its fake, on a home of its own
// (name tells the homes and logs apart).
func gatewaysRun(ctx context.Context, o options, bin, root, name string, ps []config.Platform) (memory, error) {
	tg := newFake()
	defer tg.Close()
	e := &env{o: o, bin: bin, tg: tg,
		home: filepath.Join(root, "h"+name),
		log:  filepath.Join(root, "daemon-"+name+".log")}
	for _, p := range ps {
		f := startedFake{p, platformFakes[p.Name]()}
		defer f.Close()
		e.extra = append(e.extra, f)
	}
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
	for _, f := range e.extra {
		res, err := d.ctl.Mint(pctx, control.MintRequest{Gateway: f.p.Name})
		if err != nil {
			return memory{}, d.failure(fmt.Sprintf("mint for %s: %v", f.p.Name, err))
		}
		f.sendPair(res.Code)
		// A second latch waits for the approval of a latched chat
		// (pairing's rule): the owner's Telegram chat gives it.
		if err := e.approveLatch(pctx); err != nil {
			return memory{}, d.failure(fmt.Sprintf("no request to approve %s's latch on Telegram: %v", f.p.Title, err))
		}
		if err := f.waitPaired(pctx); err != nil {
			return memory{}, d.failure(fmt.Sprintf("no \"Paired\" on %s: %v", f.p.Title, err))
		}
	}
	// Idle is read on a restart, latched: the first pairing of a second
	// gateway waits for an approval (pairing's rule), and the code that
	// runs after the page-out comes back a page at a time, which idle
	// never needs again.
	d.stop()
	if d, _, err = e.start(ctx); err != nil {
		return memory{}, err
	}
	defer d.stop()
	t := time.NewTimer(time.Until(d.started.Add(o.idle)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return memory{}, ctx.Err()
	case <-d.done:
		return memory{}, d.failure("exited while idle")
	case <-t.C:
	}
	sctx, scancel := context.WithTimeout(ctx, callLimit)
	defer scancel()
	st, err := d.ctl.Status(sctx)
	if err != nil {
		return memory{}, d.failure(fmt.Sprintf("status: %v", err))
	}
	for _, g := range st.Gateways {
		if !g.Connected || g.Latch == nil {
			return memory{}, d.failure(fmt.Sprintf("idle but %s is not connected and latched: %+v", g.Name, g))
		}
	}
	if len(st.Gateways) != 1+len(ps) {
		return memory{}, d.failure(fmt.Sprintf("want %d gateways, status has %+v", 1+len(ps), st.Gateways))
	}
	return readMemory(d.pid)
}

// everyGateway says which gateways the every-gateway run has, and which
// of config.Platforms it leaves out for want of a fake.
func everyGateway() string {
	ps, missing := extraPlatforms()
	s := withTelegram(ps) + ", configured and latched at once"
	if len(missing) > 0 {
		s += "; no fake in bench for " + strings.Join(missing, ", ")
	}
	return s
}

// withTelegram names Telegram and ps: "Telegram, Discord and Slack".
func withTelegram(ps []config.Platform) string {
	return titles(append([]config.Platform{config.TelegramPlatform}, ps...))
}

// approveLatch presses Approve on the next latch request in the owner's
// Telegram chat.
func (e *env) approveLatch(ctx context.Context) error {
	var data string
	m, err := e.tg.WaitSent(ctx, func(m telegramtest.Sent) bool {
		for _, row := range m.Keyboard {
			for _, b := range row {
				if strings.HasPrefix(b.CallbackData, "latch-ok:") && !slices.Contains(e.approved, b.CallbackData) {
					data = b.CallbackData
					return m.ChatID == owner.ID
				}
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	e.approved = append(e.approved, data)
	e.tg.SendCallback(ownerChat, owner, m.MessageID, data)
	return nil
}
