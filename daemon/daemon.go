// Package daemon wires latch together for `latch run`: the store, the Hub,
// the gateways, and the local control socket. It is a package of its own,
// not part of cmd/latch, so end-to-end tests can start the whole daemon
// in-process (Run) and stop it (cancel the context).
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/agent/mcp"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/internal/pageout"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/schedule"
	"github.com/latchd/latch/service"
	"github.com/latchd/latch/store"
)

// DefaultShutdownGrace is what a stop waits for running work; the
// systemd unit's TimeoutStopSec is longer.
const DefaultShutdownGrace = config.DefaultShutdownGrace

// ErrConfig marks errors that restarting will not fix (bad config, a token
// the platform rejects); the CLI exits with EX_CONFIG for them.
var ErrConfig = errors.New("configuration error")

// Daemon is one `latch run`.
type Daemon struct {
	Config  *config.Config
	Log     *slog.Logger
	Version string
	// Gateways replaces the gateways built from Config; nil builds them.
	Gateways []gateways.Gateway
	// Now is the clock for pairing; nil means time.Now. Tests move it to
	// expire codes.
	Now func() time.Time
	// ShutdownGrace is how long running commands and turns may finish
	// after a stop is requested; 0 means Config.Agent.ShutdownGrace, or
	// DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Clock is the scheduled jobs' time; nil means the system's (tests
	// set a fake one).
	Clock schedule.Clock
	// StopNow, closed during the shutdown grace, ends it at once (a
	// second Ctrl-C): what runs is stopped and reported as interrupted at
	// the next start, as after a crash.
	StopNow <-chan struct{}
	// Since is when the process began serving, for the uptime status
	// reports; zero means when Run starts. Supervise keeps the first
	// daemon's across reloads.
	Since time.Time
	// GiveBackStartup returns the binary's start-up pages to the kernel
	// once the daemon is ready (giveBackStartup). latch run sets it; an
	// in-process test leaves it off, as its binary is the test's.
	GiveBackStartup bool
	// MCPSidecar is the latch-mcp binary that speaks MCP for the daemon
	// (agent/mcp); "" means next to the running binary. Tests set it.
	MCPSidecar string

	ready     chan struct{}
	readyOnce sync.Once
	started   time.Time

	// Set in Run before the control socket accepts connections.
	db     *store.DB
	pairer *pairing.Pairer
	hub    *gateways.Hub
	sched  *schedule.Scheduler
	byName map[string]gateways.Gateway
	// chat runs `latch chat` turns on the same agent as the Hub.
	chat *Chat
	// bg owns best-effort notifications; serve waits for it.
	bg sync.WaitGroup
	// bgCtx ends when the daemon stops.
	bgCtx context.Context
	// notify talks to systemd; a no-op outside it.
	notify service.Notifier
	// reaper reaps the orphans the daemon adopts as a child subreaper.
	reaper *tools.Reaper
	// cgroups gives each command a cgroup of its own; nil where latch
	// cannot have them, and commands says why (control.Status.Commands).
	cgroups  *tools.Cgroups
	commands string
	// mcp runs the configured MCP servers; nil for none.
	mcp *mcp.Manager
	// marker tags the environment of every command (escaped.go).
	marker string
}

// New returns a daemon for cfg.
func New(cfg *config.Config, log *slog.Logger, version string) *Daemon {
	return &Daemon{Config: cfg, Log: log, Version: version, ready: make(chan struct{})}
}

// Ready is closed once the store is open, the control socket listens and
// every gateway has connected or reported why it could not.
func (d *Daemon) Ready() <-chan struct{} {
	d.readyOnce.Do(func() {
		if d.ready == nil {
			d.ready = make(chan struct{})
		}
	})
	return d.ready
}

// shutdownGrace is how long a stop waits for running work.
func (d *Daemon) shutdownGrace() time.Duration {
	return cmp.Or(d.ShutdownGrace, d.Config.Agent.ShutdownGrace, DefaultShutdownGrace)
}

// Run runs the daemon until ctx ends. It returns nil after a clean stop.
func (d *Daemon) Run(ctx context.Context) error {
	d.Ready()
	if d.started = d.Since; d.started.IsZero() {
		d.started = time.Now()
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if err := CheckLinked(d.Config); err != nil {
		return err
	}
	home := d.Config.Home
	if err := config.CheckHome(home); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	secret, err := config.LoadSecret(home)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	pairer, err := pairing.New(secret)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if d.Now != nil {
		pairer.Now = d.Now
	}
	db, err := OpenStore(home)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := os.MkdirAll(d.Config.Agent.Workspace, 0o700); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	d.db, d.pairer = db, pairer
	// As a subreaper, every process a chat or the agent starts stays our
	// descendant, even double-forked, so the control socket can tell a
	// command run from the chat apart from the owner's own shell.
	if err := tools.BecomeSubreaper(); err != nil {
		return fmt.Errorf("become subreaper: %w", err)
	}
	d.reaper = tools.NewReaper()
	if d.marker, err = markEnvironment(); err != nil {
		return fmt.Errorf("mark the environment: %w", err)
	}
	// Removed after serve, which returns once the last command has ended.
	cgroups, err := tools.OpenCgroups()
	d.commands = control.CommandsInCgroups
	if err != nil {
		d.commands = err.Error()
		d.Log.Info("commands are not put in cgroups of their own; ending one walks /proc, which a process replacing itself fast can outrun", "why", err)
	} else {
		defer func() {
			if err := cgroups.Close(); err != nil {
				d.Log.Warn("cgroups", logkey.Err, err)
			}
		}()
	}
	d.cgroups = cgroups
	ws, err := tools.OpenWorkspace(d.Config.Agent.Workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer ws.Close()
	ws.LimitInbox(int64(d.Config.Agent.InboxMaxMB) << 20)
	if err := ws.CleanInbox(); err != nil { // no download runs yet
		d.Log.Warn("removing the part files of cut-short downloads from the inbox", logkey.Err, err)
	}
	// Stopped in serve, before the reaper, which waits for them.
	mcpOpts := MCPOptions(d.Config, d.reaper, d.cgroups, d.Log.With("part", "mcp"))
	mcpOpts.Sidecar = d.MCPSidecar
	d.mcp = mcp.New(mcpOpts)
	checkSidecar(d.mcp, mcpOpts, d.Log)
	d.mcp.Start(context.WithoutCancel(ctx))
	defer d.mcp.Close() // a failed start; serve has closed it otherwise
	d.sched = d.newScheduler(db)
	ag, err := newAgent(d.Config, db, ws, d.Log, d.reaper, d.cgroups, d.mcp, agentScheduler{d.sched})
	if err != nil {
		return err
	}
	d.chat = NewChat(ag, ws.Dir())
	gws := d.Gateways
	if gws == nil {
		gws = d.buildGateways()
	}
	if len(gws) == 0 {
		first := Platforms[0]
		d.Log.Warn(fmt.Sprintf("no gateway is configured; set [%s] token in config.toml or %s", first.Name, first.TokenEnv))
	}
	d.byName = make(map[string]gateways.Gateway)
	for _, g := range gws {
		d.byName[g.Name()] = g
	}
	d.hub = gateways.NewHub(gateways.Config{
		Store: db, Pairer: pairer, Gateways: gws, Log: d.Log,
		AllowGroups: allowGroups(d.Config),
		Shell:       d.shell,
		Agent:       chatAgent(d.Config, ag, db, d.Log, d.reaper, d.cgroups),
		Files:       ws,
		Jobs:        d.sched,
		Transcribe:  d.transcription(),
		Heartbeat:   d.heartbeat,
		Escaped:     func() []string { return escapedLines(escaped(d.marker)) },
		// Without a systemd watchdog the beat still refreshes STATUS=.
		HeartbeatEvery: cmp.Or(watchdogEvery(), 30*time.Second),
		ShutdownGrace:  d.shutdownGrace(),
		StopNow:        d.StopNow,
	})
	ctl, err := control.Listen(config.SocketPath(home), d, d.Log)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	return d.serve(ctx, ctl, gws)
}

// OpenStore opens the database of home with a message that says what to do
// when another daemon holds it.
func OpenStore(home string) (*store.DB, error) {
	db, err := store.Open(config.DBPath(home), store.Options{})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("another latch is already running with LATCH_HOME=%s (its database is locked); stop it first, or use `latch status`", home)
	}
	return db, err
}

// serve starts every owned goroutine and waits for all of them after ctx
// ends.
func (d *Daemon) serve(ctx context.Context, ctl *control.Server, gws []gateways.Gateway) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.bgCtx = ctx
	// The reaper outlives everything else, the shutdown grace included:
	// a command that an agent turn starts in the grace leaves orphans
	// too. It stops last, after the background work.
	reapCtx, stopReaping := context.WithCancel(context.WithoutCancel(ctx))
	var reaping sync.WaitGroup
	reaping.Go(func() { d.reaper.Run(reapCtx) })
	defer reaping.Wait()
	defer stopReaping()
	defer d.bg.Wait()
	// Once every turn has ended: each server with all it started.
	defer d.mcp.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ctl.Serve(ctx); err != nil {
			d.Log.Error("control socket stopped", logkey.Err, err)
		}
	})
	fatal := make(chan error, len(gws))
	var started sync.WaitGroup
	for _, g := range gws {
		started.Add(1)
		wg.Go(func() { d.runGateway(ctx, g, &started, fatal) })
	}
	started.Wait()
	select {
	case err := <-fatal:
		// A gateway failed for good (a rejected token) before the start
		// completed: systemd must see a start that failed, not a service
		// that was ready and then stopped.
		cancel()
		wg.Wait()
		return err
	default:
	}
	d.notify.Ready()
	d.notify.Status(d.statusLine())
	// The dispatcher starts once the gateways could connect, so replies
	// recovered from the inbox (interrupted notices) have somewhere to go.
	wg.Go(func() {
		if err := d.hub.Run(ctx); err != nil {
			d.Log.Error("dispatcher stopped", logkey.Err, err)
			cancel()
		}
	})
	// Its first round fires, or reports missed, what fell due while
	// latch was down.
	wg.Go(func() { d.sched.Run(ctx) })
	wg.Go(func() { d.expireLatchRequests(ctx) })
	close(d.ready)
	d.Log.Info("latch is running", "home", d.Config.Home, "gateways", len(gws), "version", d.Version)
	if d.GiveBackStartup {
		pageout.Log(d.Log, pageout.GiveBackStartup())
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-fatal:
		cancel()
	}
	if !errors.Is(context.Cause(ctx), errReloading) {
		d.notify.Stopping()
	}
	wg.Wait()
	d.Log.Info("latch stopped")
	return err
}

// expireEvery is how often waiting latch requests are checked for expiry.
const expireEvery = 30 * time.Second

// expireLatchRequests drops the latch requests nobody answered in time
// (and tells the chats) until ctx ends.
func (d *Daemon) expireLatchRequests(ctx context.Context) {
	t := time.NewTicker(expireEvery)
	defer t.Stop()
	for {
		if err := d.hub.ExpireLatchRequests(); err != nil {
			d.Log.Warn("expiring latch requests", logkey.Err, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runGateway starts g, retrying transient failures, then reads from it
// until ctx ends. A rejected credential, at the start or later, is fatal:
// restarting cannot fix it.
func (d *Daemon) runGateway(ctx context.Context, g gateways.Gateway, started *sync.WaitGroup, fatal chan<- error) {
	once := sync.OnceFunc(started.Done)
	defer once()
	for delay := time.Second; ; delay = min(delay*2, time.Minute) {
		err := g.Start(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, gateways.ErrUnauthorized) {
			fatal <- fmt.Errorf("%w: %w", ErrConfig, err)
			return
		}
		d.Log.Warn("gateway could not connect; retrying", logkey.Gateway, g.Name(), logkey.Err, err, "in", delay)
		once()
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	d.Log.Info("gateway connected", logkey.Gateway, g.Name(), "bot", g.Info().BotName)
	// Beside the first poll, not before it: only an offline `latch pair`
	// reads the stored name (status asks the gateway), and a commit's two
	// disk syncs would hold up every start.
	var naming sync.WaitGroup
	naming.Go(func() { d.recordBotName(g) })
	defer naming.Wait()
	if r, ok := g.(restorer); ok {
		// Before the Hub dispatches: a notice recovered from the inbox
		// must not be posted before what decides where it goes is read.
		if err := r.Restore(ctx, d.hub); err != nil {
			d.Log.Warn("reading the gateway's stored state failed; its Run reads it again", logkey.Gateway, g.Name(), logkey.Err, err)
		}
	}
	once()
	err := g.Run(ctx, d.hub)
	if errors.Is(err, gateways.ErrUnauthorized) && ctx.Err() == nil {
		// Revoked while running: as fatal as at the start.
		fatal <- fmt.Errorf("%w: %w", ErrConfig, err)
		return
	}
	if err != nil {
		d.Log.Error("gateway stopped", logkey.Gateway, g.Name(), logkey.Err, err)
	}
}

// recordBotName stores g's bot user name for `latch pair` to print while
// no daemon runs; an unchanged one is not written again.
func (d *Daemon) recordBotName(g gateways.Gateway) {
	name := g.Info().BotName
	if name == "" {
		return
	}
	var stored string
	if err := d.db.View(func(tx *store.Tx) (err error) { stored, err = tx.BotName(g.Name()); return err }); err == nil && stored == name {
		return
	}
	if err := d.db.Update(func(tx *store.Tx) error { return tx.SetBotName(g.Name(), name) }); err != nil {
		d.Log.Warn("recording bot name", logkey.Err, err)
	}
}

// restorer is a gateway that keeps state of its own in the cursor it
// stores through the Sink (Telegram: the forum topic it last answered in,
// per chat), and reads it back with Restore. Its Run reads it too, but
// the Hub may post before Run has got that far.
type restorer interface {
	Restore(ctx context.Context, sink gateways.Sink) error
}

func (d *Daemon) buildGateways() []gateways.Gateway {
	var gws []gateways.Gateway
	for _, p := range Platforms {
		if p.Settings(d.Config).Enabled() {
			g := p.New(d.Config, d.Log.With(logkey.Gateway, p.Name))
			if u, ok := g.(gateways.VaultUser); ok {
				u.UseVault(vault{d.db})
			}
			gws = append(gws, g)
		}
	}
	return gws
}

// shell is the command-mode runner: bash in the workspace, in a session of
// its own, bounded in time and output.
func (d *Daemon) shell(ctx context.Context, command string) string {
	return Shell(ctx, tools.BashOptions{
		Dir: d.Config.Agent.Workspace, Timeout: d.Config.Agent.BashTimeout, Reaper: d.reaper, Cgroups: d.cgroups,
	}, command)
}

// Shell runs a !command and returns what the chat is shown: its output
// and a summary line ("[exit 0 · 12ms]"). `latch chat` runs the terminal's
// !commands with it too.
func Shell(ctx context.Context, opts tools.BashOptions, command string) string {
	res, err := tools.RunBash(ctx, opts, command)
	if err != nil {
		return "could not start the command: " + err.Error()
	}
	out := res.Output
	if out != "" && out[len(out)-1] != '\n' {
		out += "\n"
	}
	return out + "[" + res.Summary() + "]"
}

// watchdogEvery is how often the dispatch loop must ping systemd, or 0.
func watchdogEvery() time.Duration {
	every, _ := service.Notifier{}.WatchdogInterval()
	return every
}

// heartbeat runs on the dispatch loop: it pings systemd's watchdog (so a
// wedged loop gets the daemon restarted) and refreshes the status line.
func (d *Daemon) heartbeat() {
	d.notify.Watchdog()
	d.notify.Status(d.statusLine())
}

// statusLine is one line of state for systemd ("telegram: latched to Ada ·
// 1 running").
func (d *Daemon) statusLine() string {
	var parts []string
	for name, g := range d.byName {
		var l *store.Latch
		d.db.View(func(tx *store.Tx) (err error) { l, err = tx.Latch(name); return err })
		s := name + ": "
		switch {
		case !g.Info().Connected:
			s += "not connected"
		case l != nil:
			s += "latched to " + cmp.Or(l.ChatName, l.ChatID)
		default:
			s += "not paired"
		}
		if n := d.hub.Running(name); n > 0 {
			s += fmt.Sprintf(" · %d running", n)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no gateway configured"
	}
	return strings.Join(parts, "; ")
}
