package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

const drainTimeout = 60 * time.Second

// floodResult is the stranger-flood phase.
type floodResult struct {
	Target int           `json:"target_per_s"`
	Pushed int           `json:"pushed"`
	Window time.Duration `json:"window_ns"` // flood start to the last push
	// Absorbed is the confirmed-offset progress during the window: updates
	// stored or dropped in a committed transaction and confirmed back to
	// the fake.
	Absorbed  int           `json:"absorbed_in_window"`
	PerSecond []int         `json:"absorbed_per_second"`
	Polls     int           `json:"polls"`    // getUpdates calls, flood start to drained
	Drain     time.Duration `json:"drain_ns"` // last push to nothing pending
	Wall      time.Duration `json:"wall_ns"`  // flood start to nothing pending
	CPU       time.Duration `json:"daemon_cpu_ns"`
	// HarnessCPU is what bench itself (the fake, the pusher) used meanwhile,
	// on the same two cores.
	HarnessCPU time.Duration `json:"harness_cpu_ns"`
	Dropped    uint64        `json:"strangers_dropped"`
	DBGrowth   int64         `json:"db_growth_bytes"`
	After      memory        `json:"memory_after"`
	Cmd        []sample      `json:"-"` // the owner's `!true` during the flood
}

// pushed is what the flooder did.
type pushed struct {
	n         int
	end       time.Time
	confirmed int   // the fake's confirmed offset at end
	perSecond []int // confirmed-offset progress in each whole second
}

// flood pushes o.floodRate messages a second from o.strangers distinct
// private chats for o.floodFor, while the owner keeps sending `!true`.
func (e *env) flood(ctx context.Context, d *daemon) (floodResult, error) {
	r := floodResult{Target: e.o.floodRate}
	db0 := fileSize(e.dbPath())
	cpu0, err := cpuTime(d.pid)
	if err != nil {
		return r, err
	}
	self0, _ := cpuTime(os.Getpid())
	c0, polls0 := e.tg.ConfirmedOffset(), e.tg.Count("getUpdates")
	start := time.Now()

	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan pushed, 1)
	go func() { done <- e.push(fctx, start, c0) }()
	ownerDone := make(chan error, 1)
	stop := make(chan struct{})
	go func() { ownerDone <- e.ownerDuringFlood(fctx, d, stop, &r.Cmd) }()
	p := <-done
	close(stop)
	if err := <-ownerDone; err != nil {
		return r, err
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	r.Pushed, r.Window, r.PerSecond = p.n, p.end.Sub(start), p.perSecond
	r.Absorbed = p.confirmed - c0

	dctx, dcancel := context.WithTimeout(ctx, drainTimeout)
	defer dcancel()
	if err := e.tg.Wait(dctx, func() bool { return e.tg.Pending() == 0 }); err != nil {
		return r, d.failure(fmt.Sprintf("%d updates still pending %v after the flood", e.tg.Pending(), drainTimeout))
	}
	drained := time.Now()
	r.Polls = e.tg.Count("getUpdates") - polls0
	cpu1, err := cpuTime(d.pid)
	if err != nil {
		return r, err
	}
	self1, _ := cpuTime(os.Getpid())
	r.Drain, r.Wall = drained.Sub(p.end), drained.Sub(start)
	r.CPU, r.HarnessCPU = cpu1-cpu0, self1-self0
	r.DBGrowth = fileSize(e.dbPath()) - db0
	r.After, _ = readMemory(d.pid)
	st, err := e.status(ctx, d)
	if err != nil {
		return r, err
	}
	r.Dropped = st.StrangersDropped
	return r, nil
}

// push feeds the fake at o.floodRate from a 1 ms tick, catching up on late
// ticks, and samples the confirmed offset once a second. It stops after
// o.floodRate × o.floodFor messages, or at 10 × o.floodFor whatever it
// pushed by then.
func (e *env) push(ctx context.Context, start time.Time, c0 int) pushed {
	rate := float64(e.o.floodRate)
	total := int(rate * e.o.floodFor.Seconds())
	users := make([]telegramtest.User, e.o.strangers)
	for i := range users {
		users[i] = telegramtest.User{ID: int64(500_000 + i), FirstName: fmt.Sprintf("s%d", i)}
	}
	texts := []string{"hi", "!id", "/pair ABCD-2345", "/start", "what is this bot?"}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	p := pushed{}
	last, nextSecond, hardStop := c0, start.Add(time.Second), start.Add(10*e.o.floodFor)
	for p.n < total && ctx.Err() == nil && time.Now().Before(hardStop) {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		now := time.Now()
		due := min(total, int(rate*now.Sub(start).Seconds()))
		for ; p.n < due; p.n++ {
			u := users[p.n%len(users)]
			e.tg.SendText(telegramtest.Private(u), u, texts[p.n%len(texts)])
		}
		if !now.Before(nextSecond) {
			c := e.tg.ConfirmedOffset()
			p.perSecond = append(p.perSecond, c-last)
			last, nextSecond = c, nextSecond.Add(time.Second)
		}
	}
	p.end, p.confirmed = time.Now(), e.tg.ConfirmedOffset()
	return p
}

// ownerDuringFlood sends `!true` from the latched chat, paced as in the
// quiet phase, until stop closes.
func (e *env) ownerDuringFlood(ctx context.Context, d *daemon, stop <-chan struct{}, out *[]sample) error {
	p := &pacer{}
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if err := p.wait(ctx); err != nil {
			return err
		}
		s, err := e.turn(ctx, d, cmdTurn)
		if err != nil {
			return err
		}
		p.done(s)
		*out = append(*out, s)
	}
}
