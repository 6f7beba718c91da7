// Command bench measures latch's footprint and speed end to end, for the
// "Footprint and speed" budgets: it builds the real binary, runs
// `latch run` against the fake Bot API (gateways/telegram/telegramtest, in
// this process, on loopback only) and prints start-up time, memory,
// per-message latency, a stranger flood and store growth, each with PASS or
// MISS against its budget.
//
//	go run ./bench            # full: 3 runs of about 7 minutes, then a memory run of about 23
//	go run ./bench -quick     # smoke run, about a minute
//	go run ./bench -json      # machine-readable
//
// The owner's chat gets about one post a second, Telegram's per-chat rate
// and latch's own pacing, so the turns take most of the time. The memory
// run is the 1,000 turns, on a daemon of its own whose context is
// held full (see memoryBudget), so its trend shows what turns leave behind
// rather than the conversation growing.
//
// It is a program and not a test so that `go test ./...` stays fast. Every
// loop is bounded; the daemon is stopped when bench exits, also on Ctrl-C,
// and killed by the kernel (PDEATHSIG) if bench itself is killed. GOGC,
// GOMEMLIMIT and GOMAXPROCS in bench's environment reach the daemon.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/latchd/latch/agent/provider/openai/openaitest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

type options struct {
	quick, json, keep bool
	noModel           bool
	// cgroup puts the daemons in a memory cgroup of their own, after
	// evicting the binary from the page cache, and reads what it is
	// charged; dropCaches empties the page cache before the first turn
	// after the idle sample.
	cgroup, dropCaches bool
	// ratios runs the floor bot and the every-gateway daemon, for the
	// budgets stated as ratios to the floor.
	ratios bool
	// costs writes the cost table into bench/README.md (needs ratios).
	costs         bool
	runs          int
	bin, dir      string
	idle          time.Duration // start to idle RSS sample
	warmup, turns int           // quiet-chat turns
	restarts      int           // restart start-ups per run
	floodRate     int           // stranger messages a second
	floodFor      time.Duration
	strangers     int // distinct stranger chats
	// memWarmup and memTurns are the memory run's turns: its own daemon
	// with the context held at memoryBudget; memTurns 0 skips it.
	memWarmup, memTurns int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.quick, "quick", false, "smoke run: short phases, few samples, 1 run unless -runs is given")
	fs.IntVar(&o.runs, "runs", 0, "independent runs, each on a fresh LATCH_HOME and fake (default 3; 1 with -quick)")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of the table")
	fs.StringVar(&o.bin, "bin", "", "measure this latch binary (with latch-matrix beside it for Matrix) instead of building ./cmd/latch")
	fs.StringVar(&o.dir, "dir", os.TempDir(), "where to create the temporary LATCH_HOMEs; keep the path short (Unix socket)")
	fs.BoolVar(&o.noModel, "no-model", false, "configure no model: plain text gets latch's fixed hint instead of a turn with the instant fake model")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (binary, homes, daemon logs)")
	fs.BoolVar(&o.cgroup, "cgroup", false, "run the daemons in a memory cgroup of their own (binary evicted from the page cache first) and report its memory.current")
	fs.BoolVar(&o.dropCaches, "drop-caches", false, "echo 1 > /proc/sys/vm/drop_caches before the first turn after idle (root only)")
	fs.BoolVar(&o.ratios, "ratios", true, "run the floor bot (bench/floor) and a daemon with every gateway latched, each idle as long as latch, for the ratio budgets")
	fs.BoolVar(&o.costs, "costs", false, "write what each dependency and gateway costs into bench/README.md, between its costs markers")
	idle := fs.Duration("idle", 0, "start to the idle memory sample (default 10s; 3s with -quick)")
	rate := fs.Int("flood-rate", 5000, "stranger messages a second in the flood (the budget is judged at 5000)")
	memTurns := fs.Int("memory-turns", -1, "measured turns of the memory run, after 300 to fill its context (default 1000; 40 after 10 with -quick; 0 skips it)")
	turns := fs.Int("turns", 0, "measured quiet turns per run, after the warm-up turns (default 200 after 50; 20 after 4 with -quick)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %v", fs.Args())
		fmt.Fprintln(stderr, "bench:", err)
		return o, err
	}
	// The flood lasts long enough for about 50 of the owner's commands
	// (one a second, Telegram's pace), so its p99 is not just its maximum.
	o.idle, o.warmup, o.turns, o.restarts, o.floodFor = 10*time.Second, 50, 200, 5, 60*time.Second
	o.floodRate, o.strangers = *rate, 1000
	o.memWarmup, o.memTurns = 300, 1000
	if o.quick {
		o.idle, o.warmup, o.turns, o.restarts, o.floodFor = 3*time.Second, 4, 20, 2, 3*time.Second
		o.memWarmup, o.memTurns = 10, 40
	}
	if *turns != 0 {
		o.turns = *turns
	}
	if *idle != 0 {
		o.idle = *idle
	}
	if *memTurns >= 0 {
		o.memTurns = *memTurns
	}
	if o.runs == 0 {
		o.runs = 3
		if o.quick {
			o.runs = 1
		}
	}
	if o.costs && !o.ratios {
		err := errors.New("-costs needs the floor bot and the every-gateway daemon: drop -ratios=false")
		fmt.Fprintln(stderr, "bench:", err)
		return o, err
	}
	if o.runs < 1 || o.runs > 50 || o.idle < time.Second || o.idle > 24*time.Hour || o.turns < 10 || o.turns > 100_000 || o.floodRate < 1 || o.floodRate > 100_000 ||
		o.memTurns != 0 && (o.memTurns < 10 || o.memTurns > 100_000) {
		err := errors.New("-runs must be within 1…50, -idle within 1s…24h, -turns and -memory-turns (unless 0) within 10…100000 and -flood-rate within 1…100000")
		fmt.Fprintln(stderr, "bench:", err)
		return o, err
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2) // parseFlags said why
	}
	// The fake keeps every update and call in memory; collecting bench's
	// heap less often keeps its pauses out of the latencies it stamps.
	debug.SetGCPercent(400)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// runResult is everything one run measured.
type runResult struct {
	ColdStart time.Duration   `json:"cold_start_ns"`
	Restarts  []time.Duration `json:"restart_ns"`
	Idle      memory          `json:"idle_memory"`
	// IdlePeak is the highest VmRSS read while idle (every idlePoll).
	IdlePeak int64 `json:"idle_peak_rss_kib"`
	// IdleCgroup and TurnsCgroup are the daemon's cgroup's charge at the
	// idle sample and after the quiet turns (-cgroup; else 0).
	IdleCgroup  int64         `json:"idle_cgroup_bytes"`
	TurnsCgroup int64         `json:"turns_cgroup_bytes"`
	IdleCPU     time.Duration `json:"idle_cpu_ns"`
	IdleWindow  time.Duration `json:"idle_window_ns"`
	Turns       turnsResult   `json:"turns"`
	// Floor is the floor bot's run just before latch's (bench/floor).
	Floor floorResult `json:"floor"`
	// AllIdle is idle memory with every gateway the bench has a fake of
	// configured and latched (extraPlatforms).
	AllIdle memory `json:"all_gateways_idle_memory"`
	// With is idle memory with Telegram and one more platform, by its
	// name, and with Telegram alone, by Telegram's, each after a restart
	// as AllIdle is (-costs only).
	With  map[string]memory `json:"with_one_more_idle_memory,omitempty"`
	Flood floodResult       `json:"flood"`
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	root, err := os.MkdirTemp(o.dir, "lb")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(stderr, "bench: keeping", root)
	} else {
		defer os.RemoveAll(root)
	}
	bin := o.bin
	if bin == "" {
		fmt.Fprintln(stderr, "bench: go build ./cmd/latch ./cmd/latch-matrix")
		if bin, err = build(ctx, root); err != nil {
			return err
		}
	}
	fmt.Fprintln(stderr, "bench: go build ./bench/floor")
	floor, err := buildFloor(ctx, root)
	if err != nil {
		return err
	}
	m, err := newMeta(o, bin, root)
	if err != nil {
		return err
	}
	var runs []runResult
	for i := 1; i <= o.runs; i++ {
		r, err := oneRun(ctx, o, bin, floor, root, i, stderr)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		runs = append(runs, r)
	}
	var mem *turnsResult
	if o.memTurns > 0 && !o.noModel {
		r, err := memoryRun(ctx, o, bin, root, stderr)
		if err != nil {
			return fmt.Errorf("memory run: %w", err)
		}
		mem = &r
	}
	if o.costs {
		if err := refreshCosts(ctx, m, root, runs); err != nil {
			return fmt.Errorf("-costs: %w", err)
		}
		fmt.Fprintln(stderr, "bench: wrote the cost table into bench/README.md")
	}
	rep := report{Meta: m, Rows: buildRows(o, m, runs, mem), Runs: runs, Memory: mem}
	if o.json {
		return rep.writeJSON(stdout)
	}
	return rep.writeTable(stdout)
}

// memoryBudget is the memory run's agent.context_budget in tokens (the
// least latch accepts). A model turn adds about 20 tokens; the model gets
// the newest budget's worth, and the store (and the tail kept in memory)
// at most four budgets, cut back to three when they pass four. With the
// bench's turns that point comes after some 200 turns: from then on the
// conversation stops growing, and memory that still grows is what turns
// leave behind. Under the default budget (100,000 tokens) the bench's
// short turns would take some 20,000 turns to get there; the quiet turns
// of each run measure that filling instead.
const memoryBudget = 1000

// newFake starts the fake Bot API. It keeps only what the bench looks at of
// a flood's 300,000 messages and some 50,000 getUpdates calls: kept whole,
// they grew the bench's heap to 350 MB in a 60 s flood, with collections
// of up to 64 ms on the two cores the daemon runs on too.
func newFake() *telegramtest.Server {
	tg := telegramtest.New(token)
	tg.KeepCalls("getUpdates", 1000)
	tg.KeepUserMessages(10)
	return tg
}

// memoryRun is the 1,000 turns: a fresh home and daemon whose
// context is held at memoryBudget, o.memWarmup turns to fill it, then
// o.memTurns measured turns with RSS read before each and the live heap
// twenty times.
func memoryRun(ctx context.Context, o options, bin, root string, stderr io.Writer) (turnsResult, error) {
	tg := newFake()
	defer tg.Close()
	ai := openaitest.New("")
	defer ai.Close()
	e := &env{o: o, bin: bin, tg: tg, ai: ai, contextBudget: memoryBudget,
		home: filepath.Join(root, "hmem"), log: filepath.Join(root, "daemon-memory.log")}
	if err := e.initHome(ctx); err != nil {
		return turnsResult{}, err
	}
	d, _, err := e.start(ctx)
	if err != nil {
		return turnsResult{}, err
	}
	defer d.stop()
	if err := e.pair(ctx, d); err != nil {
		return turnsResult{}, err
	}
	fmt.Fprintf(stderr, "bench: memory run: %d turns, context_budget %d\n", o.memWarmup+o.memTurns, memoryBudget)
	return e.turns(ctx, d, o.memWarmup, o.memTurns, 20)
}

// oneRun measures one fresh home: a first start, pairing, idle memory, the
// quiet turns, the flood, then restarts on the now well-used home.
func oneRun(ctx context.Context, o options, bin, floor, root string, n int, stderr io.Writer) (runResult, error) {
	tg := newFake()
	defer tg.Close()
	var ai *openaitest.Server
	if !o.noModel {
		ai = openaitest.New("")
		defer ai.Close()
	}
	e := &env{o: o, bin: bin, tg: tg, ai: ai,
		home: filepath.Join(root, fmt.Sprintf("h%d", n)),
		log:  filepath.Join(root, fmt.Sprintf("daemon%d.log", n))}
	say := func(format string, args ...any) {
		fmt.Fprintf(stderr, "bench: run %d/%d: "+format+"\n", append([]any{n, o.runs}, args...)...)
	}
	var r runResult
	if o.ratios {
		say("floor bot: idle until %v after start, then %d plain texts", o.idle, o.warmup/2+o.turns/2)
		var err error
		if r.Floor, err = floorRun(ctx, o, floor, filepath.Join(root, fmt.Sprintf("floor%d.log", n))); err != nil {
			return r, err
		}
	}
	if err := e.initHome(ctx); err != nil {
		return r, err
	}
	if o.cgroup {
		cg, err := newMemCgroup()
		if err != nil {
			return r, fmt.Errorf("-cgroup: %w", err)
		}
		defer cg.remove()
		if err := evict(bin); err != nil {
			return r, fmt.Errorf("-cgroup: evict the binary from the page cache: %w", err)
		}
		e.cgroup = cg
	}
	d, took, err := e.start(ctx)
	if err != nil {
		return r, err
	}
	defer d.stop()
	r.ColdStart = took
	say("ready in %v; pairing, then idle until %v after start", took.Round(10*time.Microsecond), o.idle)
	if err := e.pair(ctx, d); err != nil {
		return r, err
	}
	idleFrom := time.Now()
	if r.Idle, r.IdlePeak, r.IdleCPU, err = e.idle(ctx, d); err != nil {
		return r, err
	}
	r.IdleWindow = time.Since(idleFrom)
	r.IdleCgroup = e.cgroupBytes()
	if o.dropCaches {
		if err := dropCaches(); err != nil {
			return r, fmt.Errorf("-drop-caches: %w", err)
		}
	}
	say("%d quiet turns (plain text and !true, about one post a second in the chat)", o.warmup+o.turns)
	if r.Turns, err = e.turns(ctx, d, o.warmup, o.turns, 10); err != nil {
		return r, err
	}
	r.TurnsCgroup = e.cgroupBytes()
	say("stranger flood: %d msg/s from %d chats for %v", o.floodRate, o.strangers, o.floodFor)
	if r.Flood, err = e.flood(ctx, d); err != nil {
		return r, err
	}
	d.stop()
	if o.ratios {
		ps, _ := extraPlatforms()
		say("%s latched at once, idle until %v after start", withTelegram(ps), o.idle)
		if r.AllIdle, err = gatewaysRun(ctx, o, bin, root, fmt.Sprint("all", n), ps); err != nil {
			return r, fmt.Errorf("every gateway: %w", err)
		}
		if o.costs {
			// The base of the gateway rows, measured as they are.
			say("Telegram alone latched, idle until %v after a restart (-costs)", o.idle)
			m, err := gatewaysRun(ctx, o, bin, root, fmt.Sprint("tg", n), nil)
			if err != nil {
				return r, fmt.Errorf("Telegram alone: %w", err)
			}
			r.With = map[string]memory{config.TelegramPlatform.Name: m}
		}
		for _, p := range ps {
			if !o.costs || len(ps) == 1 {
				break
			}
			say("Telegram and %s latched, idle until %v after start (-costs)", p.Title, o.idle)
			m, err := gatewaysRun(ctx, o, bin, root, fmt.Sprint(p.Name, n), []config.Platform{p})
			if err != nil {
				return r, fmt.Errorf("Telegram and %s: %w", p.Title, err)
			}
			r.With[p.Name] = m
		}
	}
	say("%d restarts", o.restarts)
	for range o.restarts {
		d, took, err := e.start(ctx)
		if err != nil {
			return r, err
		}
		d.stop()
		r.Restarts = append(r.Restarts, took)
	}
	return r, nil
}
