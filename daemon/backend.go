package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/schedule"
	"github.com/latchd/latch/store"
)

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
	// The ancestry was read by pid: it must still be the caller's.
	if err := control.CallerStillThere(ctx); err != nil {
		d.Log.Warn("refused a pairing request whose caller exited before it was checked", "peer_pid", peer.PID)
		return err
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
		return control.MintResult{}, d.unknownGateway(req.Gateway)
	}
	peer, _ := control.PeerFromContext(ctx)
	res, err := MintIn(d.db, d.pairer, req, linker(g), describePeer(int(peer.PID)), "")
	if err != nil {
		return control.MintResult{}, err
	}
	d.hub.Wake() // the announcements are queued
	return res, nil
}

// unknownGateway names the gateways there are, so the caller sees the way
// out.
func (d *Daemon) unknownGateway(name string) error {
	names := slices.Sorted(maps.Keys(d.byName))
	if len(names) == 0 {
		first := Platforms[0]
		return fmt.Errorf("%w: %q: the running daemon has no gateway configured (set [%s] token in config.toml, or %s, and restart it)",
			control.ErrUnknownGateway, name, first.Name, first.TokenEnv)
	}
	return fmt.Errorf("%w: %q is not configured in the running daemon; it has: %s", control.ErrUnknownGateway, name, strings.Join(names, ", "))
}

// mintNotice tells every latched chat that a code was minted; while is ""
// or says when no daemon ran.
func mintNotice(m pairing.Minted, gateway string, at time.Time, origin, while string) gateways.Notice {
	what := "A pairing code for the " + gateway + " bot"
	switch {
	case m.Replace:
		what += " (--replace: it moves that bot to another chat)"
	}
	text := fmt.Sprintf("🔑 %s was minted on the machine at %s%s, %s. ", what, at.Local().Format("15:04"), while, gateways.EscapeMarkdown(origin))
	if m.Approval {
		text += "Whoever redeems it waits for your approval here. "
	}
	text += fmt.Sprintf("If that was not you, run `latch unpair %s` on the machine.", gateway)
	return gateways.Notice{Text: text, Markdown: true}
}

// unpairNotice is the last thing an unpaired chat is told.
func unpairNotice(while string) gateways.Notice {
	return gateways.Notice{Text: "This chat was unpaired from latch on the machine" + while + ". It no longer controls anything there."}
}

// whileStopped qualifies a notice queued by the CLI with no daemon running.
const whileStopped = " while latch was stopped"

// offlineOrigin is what latch can tell of a mint the CLI wrote into the
// store with no daemon running: nothing about who ran it.
const offlineOrigin = "written into the database by `latch pair` while no daemon ran (latch cannot tell who ran it)"

// MintIn mints a code in db, for the daemon and for the CLI when no daemon
// runs (while is then whileStopped). Every latched chat is told, in the
// same transaction: a mint no chat hears of could be a process on the
// machine minting for a gateway nobody watches.
func MintIn(db *store.DB, p *pairing.Pairer, req control.MintRequest, link func(code string) string, origin, while string) (control.MintResult, error) {
	var res control.MintResult
	err := db.Update(func(tx *store.Tx) error {
		m, err := p.MintWith(tx, req.Gateway, req.TTL, pairing.MintOptions{Replace: req.Replace, Origin: origin})
		if err != nil {
			return mintRefusal(req.Gateway, err)
		}
		res = control.MintResult{Gateway: req.Gateway, Code: pairing.Format(m.Code), ExpiresAt: m.Expires,
			Approval: m.Approval, Replace: m.Replace}
		if link != nil {
			res.Link = link(m.Code)
		}
		return gateways.Announce(tx, mintNotice(m, req.Gateway, time.Now(), origin, while), time.Now())
	})
	return res, err
}

// MintOffline is MintIn for the CLI when no daemon runs: the announcements
// wait in the inbox for the next start.
func MintOffline(db *store.DB, p *pairing.Pairer, req control.MintRequest, link func(code string) string) (control.MintResult, error) {
	return MintIn(db, p, req, link, offlineOrigin, whileStopped)
}

// mintRefusal says what to do instead of a refused mint.
func mintRefusal(gateway string, err error) error {
	if le, ok := errors.AsType[*pairing.LatchedError](err); ok {
		return refusal{control.ErrLatched, fmt.Sprintf("%s. To move it to another chat run `latch pair %s --replace`: the chat paired now approves the move. "+
			"If you lost that phone, run `latch unpair %s` first", le, gateway, gateway)}
	}
	if ce, ok := errors.AsType[*pairing.CoolingOffError](err); ok {
		return refusal{control.ErrRefused, ce.Error() + ". (An unpair must not make the next latch free for whatever ran it; see SECURITY.md.)"}
	}
	return err
}

// refusal is an error the control API shows as msg and callers match as
// sentinel.
type refusal struct {
	sentinel error
	msg      string
}

func (r refusal) Error() string { return r.msg }
func (r refusal) Unwrap() error { return r.sentinel }

// unpaired queues what an unpair owes: the old chat's last notice, and a
// word to every chat still latched.
func unpaired(tx *store.Tx, old *store.Latch, while string) error {
	now := time.Now()
	// Its scheduled jobs pause with it: pairing again resumes none of them
	// without /jobs resume.
	jobs, err := schedule.PauseIn(tx, old.Gateway)
	if err != nil {
		return err
	}
	notice := unpairNotice(while)
	notice.Text += pausedJobs(jobs)
	if err := gateways.QueueNotice(tx, *old, notice, now); err != nil {
		return err
	}
	text := fmt.Sprintf("The %s bot was unpaired on the machine at %s%s; %s no longer controls anything.",
		old.Gateway, now.Local().Format("15:04"), while, gateways.EscapeMarkdown(pairing.ChatLabel(*old)))
	return gateways.Announce(tx, gateways.Notice{Text: text, Markdown: true}, now, *old)
}

// UnpairOffline unpairs gateway in db for the CLI when no daemon runs, and
// queues the notices in the same transaction, for the next start to send.
// It returns the old latch (nil: none).
func UnpairOffline(db *store.DB, p *pairing.Pairer, gateway string) (*store.Latch, error) {
	var old *store.Latch
	err := db.Update(func(tx *store.Tx) (err error) {
		if old, err = p.Unpair(tx, gateway); err != nil || old == nil {
			return err
		}
		return unpaired(tx, old, whileStopped)
	})
	return old, err
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
		return d.unknownGateway(gateway)
	}
	var old *store.Latch
	err := d.db.Update(func(tx *store.Tx) (err error) {
		if old, err = d.pairer.Unpair(tx, gateway); err != nil || old == nil {
			return err
		}
		return unpaired(tx, old, "")
	})
	if err != nil {
		return err
	}
	if old == nil {
		return fmt.Errorf("%q: %w", gateway, control.ErrNotLatched)
	}
	d.Log.Info("gateway unpaired", logkey.Gateway, gateway, logkey.Chat, old.ChatID)
	// The chat no longer controls anything: what it set going stops too,
	// the running job and what waits behind it.
	d.hub.Unlatched(gateway)
	d.hub.Wake()
	return nil
}

// Status implements control.Backend.
func (d *Daemon) Status(ctx context.Context) (control.Status, error) {
	st := control.Status{PID: os.Getpid(), Version: d.Version, StartedAt: d.started, Home: d.Config.Home, Memory: memoryInfo(),
		Commands: d.commands, Endpoints: d.endpoints(), MCP: d.mcp.StatusLines(), Escaped: escaped(d.marker)}
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
		gs.Pending = &control.PendingInfo{ExpiresAt: p.ExpiresAt, Burned: p.Burned, Attempts: p.Attempts,
			Approval: p.Approval, Replace: p.Replace}
	}
	reqs, err := tx.LatchRequests()
	if err != nil {
		return gs, err
	}
	for _, r := range reqs {
		if r.Gateway == name && now.Before(r.ExpiresAt) {
			gs.Waiting = append(gs.Waiting, control.WaitingLatch{ChatID: r.Chat.ChatID, ChatName: r.Chat.ChatName,
				ChatType: r.Chat.ChatType, UserID: r.Chat.UserID, ExpiresAt: r.ExpiresAt})
		}
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
	for _, p := range Platforms {
		if _, ok := d.byName[p.Name]; ok {
			out[p.Name] = p.Settings(d.Config).APIURL
		}
	}
	if u := d.Config.Agent.ModelURL(); u != "" {
		out[control.EndpointModel] = u
	}
	return out
}
