package daemon

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"time"

	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// notifyTimeout bounds best-effort messages sent on behalf of the CLI.
const notifyTimeout = 10 * time.Second

// errFromRun refuses operator requests that come from inside a run.
var errFromRun = fmt.Errorf("%w: this request comes from a process latch started (a chat command or an agent tool); "+
	"pairing and unpairing are only possible from your own shell on this machine", control.ErrRefused)

// operator checks that a request to mint or unpair comes from the owner's
// own shell, not from a process the daemon started: the daemon is a
// subreaper, so even a double-forked command stays its descendant. A
// prompt-injected model must not be able to hand itself a new latch.
func (d *Daemon) operator(ctx context.Context) error {
	peer, ok := control.PeerFromContext(ctx)
	if !ok {
		return fmt.Errorf("%w: caller unknown", control.ErrRefused)
	}
	if tools.DescendsFrom(int(peer.PID), os.Getpid()) {
		d.Log.Warn("refused a pairing request from a process latch started", "peer_pid", peer.PID)
		return errFromRun
	}
	return nil
}

// Mint implements control.Backend.
func (d *Daemon) Mint(ctx context.Context, req control.MintRequest) (control.MintResult, error) {
	if err := d.operator(ctx); err != nil {
		return control.MintResult{}, err
	}
	g := d.byName[req.Gateway]
	if g == nil {
		return control.MintResult{}, fmt.Errorf("%q: %w", req.Gateway, control.ErrUnknownGateway)
	}
	res, latch, err := MintIn(d.db, d.pairer, req.Gateway, req.TTL, linker(g))
	if err != nil {
		return control.MintResult{}, err
	}
	if latch != nil {
		// Whoever holds the latched chat should know a code exists: if
		// they did not mint it, something on the machine did.
		d.announce(latch, mintNotice(req.Gateway, time.Now(), ""))
	}
	return res, nil
}

// mintNotice tells a latched chat that a code was minted; while is ""
// or says when no daemon ran.
func mintNotice(gateway string, at time.Time, while string) string {
	return fmt.Sprintf("🔑 A pairing code for this bot was minted on the machine at %s%s. "+
		"If that was not you, run `latch unpair %s` on the machine.", at.Format("15:04"), while, gateway)
}

// unpairNotice is the last thing an unpaired chat is told.
func unpairNotice(while string) string {
	return "This chat was unpaired from latch on the machine" + while + ". It no longer controls anything there."
}

// whileStopped qualifies a notice queued by the CLI with no daemon running.
const whileStopped = " while latch was stopped"

// MintIn mints a code for gateway in db; it serves both the daemon and the
// CLI when no daemon runs. It also returns the current latch, if any.
func MintIn(db *store.DB, p *pairing.Pairer, gateway string, ttl time.Duration, link func(code string) string) (control.MintResult, *store.Latch, error) {
	return mintIn(db, p, gateway, ttl, link, false)
}

// MintOffline is MintIn for the CLI when no daemon runs: the announcement
// to the latched chat is queued in the inbox in the same transaction, and
// the next start sends it. Without it a command run from the chat could
// kill the daemon and mint from the orphan it left, unannounced.
func MintOffline(db *store.DB, p *pairing.Pairer, gateway string, ttl time.Duration, link func(code string) string) (control.MintResult, error) {
	res, _, err := mintIn(db, p, gateway, ttl, link, true)
	return res, err
}

func mintIn(db *store.DB, p *pairing.Pairer, gateway string, ttl time.Duration, link func(code string) string, queue bool) (control.MintResult, *store.Latch, error) {
	var res control.MintResult
	var latch *store.Latch
	err := db.Update(func(tx *store.Tx) error {
		code, expires, err := p.Mint(tx, gateway, ttl)
		if err != nil {
			return err
		}
		res = control.MintResult{Gateway: gateway, Code: pairing.Format(code), ExpiresAt: expires}
		if link != nil {
			res.Link = link(code)
		}
		if latch, err = tx.Latch(gateway); err != nil || latch == nil || !queue {
			return err
		}
		return queueNotice(tx, latch, mintNotice(gateway, time.Now(), whileStopped))
	})
	return res, latch, err
}

// UnpairOffline unpairs gateway in db for the CLI when no daemon runs, and
// queues the unpair notice to the old chat in the same transaction, for the
// next start to send. It returns the old latch (nil: none).
func UnpairOffline(db *store.DB, p *pairing.Pairer, gateway string) (*store.Latch, error) {
	var old *store.Latch
	err := db.Update(func(tx *store.Tx) (err error) {
		if old, err = p.Unpair(tx, gateway); err != nil || old == nil {
			return err
		}
		return queueNotice(tx, old, unpairNotice(whileStopped))
	})
	return old, err
}

// queueNotice stores a notice to l's chat in the inbox; the Hub sends
// notices whether or not the chat is still latched.
func queueNotice(tx *store.Tx, l *store.Latch, text string) error {
	_, err := tx.AppendInbox(store.Entry{Kind: store.KindNotice, Gateway: l.Gateway, ChatID: l.ChatID,
		UserID: l.UserID, Text: text, Received: time.Now()})
	return err
}

func linker(g gateways.Gateway) func(string) string {
	if l, ok := g.(gateways.PairLinker); ok {
		return l.PairLink
	}
	return nil
}

// Unpair implements control.Backend.
func (d *Daemon) Unpair(ctx context.Context, gateway string) error {
	if err := d.operator(ctx); err != nil {
		return err
	}
	if d.byName[gateway] == nil {
		return fmt.Errorf("%q: %w", gateway, control.ErrUnknownGateway)
	}
	var old *store.Latch
	err := d.db.Update(func(tx *store.Tx) (err error) {
		old, err = d.pairer.Unpair(tx, gateway)
		return err
	})
	if err != nil {
		return err
	}
	if old == nil {
		return fmt.Errorf("%q: %w", gateway, control.ErrNotLatched)
	}
	d.Log.Info("gateway unpaired", "gateway", gateway, "chat", old.ChatID)
	// The chat no longer controls anything: what it set going stops too,
	// the running job and what waits behind it.
	d.hub.Unlatched(gateway)
	d.announce(old, unpairNotice(""))
	return nil
}

// announce tells a latched chat something, best effort, without holding up
// the caller.
func (d *Daemon) announce(l *store.Latch, text string) {
	d.bg.Go(func() {
		ctx, cancel := context.WithTimeout(d.bgCtx, notifyTimeout)
		defer cancel()
		if err := d.hub.Notify(ctx, l.Gateway, l.ChatID, text); err != nil {
			d.Log.Warn("could not notify chat", "gateway", l.Gateway, "err", err)
		}
	})
}

// Status implements control.Backend.
func (d *Daemon) Status(ctx context.Context) (control.Status, error) {
	st := control.Status{PID: os.Getpid(), Version: d.Version, StartedAt: d.started, Home: d.Config.Home, Memory: memoryInfo(),
		Commands: d.commands, Endpoints: d.endpoints()}
	err := d.db.View(func(tx *store.Tx) error {
		for name, g := range d.byName {
			gs, err := GatewayStatus(tx, name, time.Now())
			if err != nil {
				return err
			}
			info := g.Info()
			gs.Configured, gs.Connected, gs.LastError = true, info.Connected, info.LastError
			if info.BotName != "" {
				gs.BotName = info.BotName
			}
			gs.Running = d.hub.Running(name)
			gs.StrangersDropped += d.hub.HeldStrangers(name)
			st.Gateways = append(st.Gateways, gs)
		}
		return nil
	})
	return st, err
}

// GatewayStatus reads what the store knows of a gateway.
func GatewayStatus(tx *store.Tx, name string, now time.Time) (control.GatewayStatus, error) {
	gs := control.GatewayStatus{Name: name}
	l, err := tx.Latch(name)
	if err != nil {
		return gs, err
	}
	if l != nil {
		gs.Latch = &control.LatchInfo{ChatID: l.ChatID, ChatName: l.ChatName, ChatType: l.ChatType,
			UserID: l.UserID, UserName: l.UserName, Since: l.Since}
	}
	p, err := tx.Pending(name)
	if err != nil {
		return gs, err
	}
	if p != nil && (p.Burned || now.Before(p.ExpiresAt)) {
		gs.Pending = &control.PendingInfo{ExpiresAt: p.ExpiresAt, Burned: p.Burned, Attempts: p.Attempts}
	}
	if gs.BotName, err = tx.BotName(name); err != nil {
		return gs, err
	}
	for _, c := range []struct {
		name string
		dst  *uint64
	}{{gateways.CounterHandled, &gs.Handled}, {gateways.CounterStrangers, &gs.StrangersDropped}, {gateways.CounterFailed, &gs.FailedAttempts}} {
		if *c.dst, err = tx.Counter(name, c.name); err != nil {
			return gs, err
		}
	}
	return gs, nil
}

// memoryInfo reads the Go runtime's memory metrics.
func memoryInfo() *control.MemoryInfo {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/sched/goroutines:goroutines"},
		{Name: "/memory/classes/heap/stacks:bytes"},
	}
	metrics.Read(samples)
	v := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	return &control.MemoryInfo{HeapLive: v(0), Held: v(1) - v(2), GCs: v(3), Goroutines: v(4), Stacks: v(5)}
}

// endpoints lists the API roots the daemon talks to (control.Status).
func (d *Daemon) endpoints() map[string]string {
	out := make(map[string]string)
	if _, ok := d.byName["telegram"]; ok {
		out[control.EndpointTelegram] = d.Config.Telegram.APIURL
	}
	if _, ok := d.byName["discord"]; ok {
		out[control.EndpointDiscord] = d.Config.Discord.APIURL
	}
	if u := d.Config.Agent.ModelURL(); u != "" {
		out[control.EndpointModel] = u
	}
	return out
}
