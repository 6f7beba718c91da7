package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// floorResult is the floor bot's run (bench/floor): a bare long-poll Go
// echo bot on the same fake, the same machine and the same pacing, so
// latch's figures can be read as ratios to what any Go bot costs.
type floorResult struct {
	Start time.Duration `json:"start_ns"`
	Idle  memory        `json:"idle_memory"`
	Turns []sample      `json:"-"`
}

// buildFloor compiles bench/floor with the release flags latch is built with.
func buildFloor(ctx context.Context, dir string) (string, error) {
	return goBuild(ctx, filepath.Join(dir, "floor"), "./bench/floor", "-s -w")
}

// floorRun starts the floor bot on a fake of its own, reads its memory at
// o.idle after start, then sends it as many plain texts as latch gets.
func floorRun(ctx context.Context, o options, bin, logPath string) (floorResult, error) {
	tg := newFake()
	defer tg.Close()
	var env []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "FLOOR_API_URL="+tg.URL(), "FLOOR_TOKEN="+token)
	p, err := spawn(bin, nil, env, logPath)
	if err != nil {
		return floorResult{}, err
	}
	defer p.stop()
	var r floorResult
	turnsCtx := ctx // the texts are paced: they take longer than the idle
	ctx, cancel := context.WithTimeout(ctx, o.idle+readyTimeout)
	defer cancel()
	if err := tg.Wait(ctx, func() bool { return tg.Count("getUpdates") > 0 }); err != nil {
		return r, p.failure("floor bot: no getUpdates")
	}
	r.Start = tg.Calls("getUpdates")[0].Time.Sub(p.started)
	t := time.NewTimer(time.Until(p.started.Add(o.idle)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-p.done:
		return r, p.failure("floor bot exited while idle")
	case <-t.C:
	}
	if r.Idle, err = readMemory(p.pid); err != nil {
		return r, err
	}
	ctx = turnsCtx
	pc := &pacer{}
	for i := range o.warmup/2 + o.turns/2 {
		if err := pc.wait(ctx); err != nil {
			return r, err
		}
		text := fmt.Sprintf("echo %d", i)
		s, err := exchange(context.WithoutCancel(ctx), tg, text, text)
		if err != nil {
			return r, p.failure("floor bot: " + err.Error())
		}
		pc.done(s)
		if i >= o.warmup/2 {
			r.Turns = append(r.Turns, s)
		}
	}
	return r, nil
}
