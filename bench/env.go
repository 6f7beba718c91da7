package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/latchd/latch/agent/provider/openai/openaitest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// token is the bot token the fake accepts. It is not a secret: it only
// opens the fake on loopback.
const token = "7012345678:AAF-benchTOKENnotAsecret_x1"

const (
	readyTimeout = 15 * time.Second
	// readyPoll is how often start-up readiness is checked; it bounds the
	// measurement's resolution, and polling faster would steal CPU from the
	// daemon starting on the same two cores.
	readyPoll = 250 * time.Microsecond
	callLimit = 10 * time.Second
)

var (
	owner     = telegramtest.User{ID: 1001, FirstName: "Owner", Username: "owner"}
	ownerChat = telegramtest.Private(owner)
	ownerID   = strconv.FormatInt(owner.ID, 10)
)

// env is one run: a fresh LATCH_HOME, a fake Bot API, an instant fake
// model (unless -no-model), and the daemons started on them one after the
// other.
type env struct {
	o    options
	bin  string
	home string
	log  string
	tg   *telegramtest.Server
	ai   *openaitest.Server // nil with -no-model
	// extra are the platforms beyond Telegram configured, on their fakes.
	extra []startedFake
	// approved are the latch requests approved so far (their buttons'
	// data).
	approved []string
	// contextBudget is agent.context_budget; 0 keeps latch's default.
	contextBudget int
	// cgroup is the memory cgroup the daemons start in (-cgroup), or nil.
	cgroup *memCgroup
}

// cgroupBytes is what the daemons' cgroup is charged for, or 0 without one.
func (e *env) cgroupBytes() int64 {
	if e.cgroup == nil {
		return 0
	}
	n, _ := e.cgroup.bytes()
	return n
}

// daemon is a started `latch run` and a control client for its socket.
type daemon struct {
	*process
	ctl *control.Client
}

// passEnv lists what the daemon inherits from bench's environment: enough
// to run bash, and the Go runtime's knobs so their effect can be measured.
// Nothing else passes, so no provider key or base URL in the environment
// can make the daemon leave loopback.
var passEnv = []string{"PATH", "HOME", "USER", "LANG", "TMPDIR", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "LATCH_NO_PAGEOUT"}

// environ is the daemon's environment: passEnv, the home and the fake.
func (e *env) environ() ([]string, error) {
	var out []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			out = append(out, k+"="+v)
		}
	}
	for _, f := range e.extra {
		env, err := f.environ()
		if err != nil {
			return nil, err
		}
		out = append(out, env...)
	}
	return append(out,
		config.EnvHome+"="+e.home,
		config.EnvTelegramToken+"="+token,
		config.EnvTelegramAPIURL+"="+e.tg.URL()), nil
}

// initHome creates the home (0700) and runs `latch init` in it.
func (e *env) initHome(ctx context.Context) error {
	if err := os.Mkdir(e.home, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(e.home, 0o700); err != nil { // whatever the umask
		return err
	}
	environ, err := e.environ()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, e.bin, "init")
	cmd.Env = environ
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("latch init: %w\n%s", err, out)
	}
	if e.ai == nil {
		return nil
	}
	// Replace the commented template with the one setting that differs:
	// plain text goes to the fake model, an OpenAI-compatible server on
	// loopback that needs no key.
	toml := fmt.Sprintf("[agent]\nprovider = %q\nbase_url = %q\n", config.ProviderOpenAI, e.ai.URL())
	if e.contextBudget != 0 {
		toml += fmt.Sprintf("context_budget = %d\n", e.contextBudget)
	}
	return os.WriteFile(filepath.Join(e.home, config.ConfigFile), []byte(toml), 0o600)
}

// start runs `latch run` and returns it with the time from exec to ready:
// the control socket answers status AND the fake has seen the first
// getUpdates of this process.
func (e *env) start(ctx context.Context) (*daemon, time.Duration, error) {
	polls := e.tg.Count("getUpdates")
	bin, args := e.bin, []string{"run"}
	if e.cgroup != nil {
		// Into the cgroup before exec, so its first fault is charged there.
		bin, args = "/bin/sh", []string{"-c", `echo $$ >"$0/cgroup.procs" && exec "$1" run`, e.cgroup.dir, e.bin}
	}
	environ, err := e.environ()
	if err != nil {
		return nil, 0, err
	}
	p, err := spawn(bin, args, environ, e.log)
	if err != nil {
		return nil, 0, err
	}
	d := &daemon{process: p, ctl: control.NewClient(config.SocketPath(e.home))}
	took, err := e.waitReady(ctx, d, polls)
	if err != nil {
		d.stop()
		return nil, 0, err
	}
	return d, took, nil
}

func (e *env) waitReady(ctx context.Context, d *daemon, polls int) (time.Duration, error) {
	var statusAt, pollAt time.Time
	deadline := d.started.Add(readyTimeout)
	for time.Now().Before(deadline) {
		if statusAt.IsZero() {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := d.ctl.Status(sctx)
			cancel()
			if err == nil {
				statusAt = time.Now()
			}
		}
		if pollAt.IsZero() && e.tg.Count("getUpdates") > polls {
			// The fake stamps a call when it arrives: exact, unlike
			// noticing it here up to one readyPoll later.
			pollAt = firstCall(e.tg.Calls("getUpdates"), polls).Time
		}
		if !statusAt.IsZero() && !pollAt.IsZero() {
			return max(statusAt.Sub(d.started), pollAt.Sub(d.started)), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-d.done:
			return 0, d.failure("exited before it was ready")
		case <-time.After(readyPoll):
		}
	}
	return 0, d.failure(fmt.Sprintf("not ready within %v", readyTimeout))
}

// pair latches the owner's chat: a code minted on the control socket, sent
// as /pair from the chat, answered with "Paired".
func (e *env) pair(ctx context.Context, d *daemon) error {
	ctx, cancel := context.WithTimeout(ctx, callLimit)
	defer cancel()
	res, err := d.ctl.Mint(ctx, control.MintRequest{Gateway: "telegram"})
	if err != nil {
		return d.failure(fmt.Sprintf("mint: %v", err))
	}
	e.tg.SendText(ownerChat, owner, "/pair "+res.Code)
	_, err = e.tg.WaitSent(ctx, func(m telegramtest.Sent) bool {
		return m.ChatID == owner.ID && strings.HasPrefix(m.Plain, "Paired")
	})
	if err != nil {
		return d.failure(fmt.Sprintf("no \"Paired\" reply: %v", err))
	}
	return nil
}

// status is the daemon's view of its Telegram gateway.
func (e *env) status(ctx context.Context, d *daemon) (control.GatewayStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, callLimit)
	defer cancel()
	st, err := d.ctl.Status(ctx)
	if err != nil || len(st.Gateways) != 1 {
		return control.GatewayStatus{}, d.failure(fmt.Sprintf("status: %+v, %v", st, err))
	}
	return st.Gateways[0], nil
}

// idlePoll is how often idle reads VmRSS for its peak.
const idlePoll = 10 * time.Second

// idle waits until o.idle after the daemon started, reading VmRSS every
// idlePoll for the peak, and then reads its memory, and the CPU it used
// since it was ready.
func (e *env) idle(ctx context.Context, d *daemon) (m memory, peak int64, cpu time.Duration, err error) {
	cpu0, err := cpuTime(d.pid)
	if err != nil {
		return m, 0, 0, err
	}
	t := time.NewTimer(time.Until(d.started.Add(e.o.idle)))
	defer t.Stop()
	tick := time.NewTicker(idlePoll)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return m, 0, 0, ctx.Err()
		case <-d.done:
			return m, 0, 0, d.failure("exited while idle")
		case <-tick.C:
			if now, err := readMemory(d.pid); err == nil {
				peak = max(peak, now.RSS)
			}
		case <-t.C:
			waiting = false
		}
	}
	st, err := e.status(ctx, d)
	if err != nil {
		return m, 0, 0, err
	}
	if !st.Connected || st.Latch == nil {
		return m, 0, 0, d.failure(fmt.Sprintf("idle but not connected and latched: %+v", st))
	}
	if m, err = readMemory(d.pid); err != nil {
		return m, 0, 0, err
	}
	if full, err := d.ctl.Status(ctx); err == nil && full.Memory != nil {
		m.Goroutines, m.Stacks = int64(full.Memory.Goroutines), int64(full.Memory.Stacks)
	}
	cpu1, err := cpuTime(d.pid)
	return m, max(peak, m.RSS), cpu1 - cpu0, err
}

func (e *env) dbPath() string { return config.DBPath(e.home) }

// firstCall is the first of calls numbered n or later (the fake keeps only
// the newest getUpdates calls; see newFake); calls must have one.
func firstCall(calls []telegramtest.Call, n int) telegramtest.Call {
	for _, c := range calls {
		if c.N >= n {
			return c
		}
	}
	return calls[len(calls)-1]
}
