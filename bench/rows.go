package main

import (
	"fmt"
	"time"
)

// Budgets from the "Footprint and speed" issue. MB is 10⁶ bytes.
const (
	budgetStartMS = 50
	budgetIdleMB  = 12
	budgetP50MS   = 2
	budgetP99MS   = 10
	// floodShare is the part of the target rate (5,000 msg/s in the issue,
	// -flood-rate here) that counts as absorbed: the last batch of the
	// window is still in flight when it ends.
	floodShare = 0.95
	// budgetTrendKiB is the RSS trend that counts as growth: 256 KiB per
	// 1,000 turns is a leak of 256 bytes a message, well above the noise of
	// a heap that breathes between collections.
	budgetTrendKiB = 256
)

// perRun maps a measure over the runs, one value per run.
type perRun func(func(runResult) float64) []float64

func mb(kib int64) float64 { return float64(kib) * 1024 / 1e6 }

// buildRows turns the runs into the table, in the order of the issue.
func buildRows(o options, m meta, runs []runResult, mem *turnsResult) []row {
	per := func(f func(r runResult) float64) []float64 {
		out := make([]float64, len(runs))
		for i, r := range runs {
			out[i] = f(r)
		}
		return out
	}
	rows := []row{newRow("binary size", "MB", []float64{float64(m.BinaryBytes) / 1e6}, nil, "CGO_ENABLED=0 go build -trimpath -ldflags=\"-s -w\"")}
	rows = append(rows, startRows(o, runs, per)...)
	rows = append(rows, turnRows(o, runs, per)...)
	rows = append(rows, floorRows(o, per)...)
	rows = append(rows, memoryRows(o, mem)...)
	return append(rows, floodRows(o, runs, per)...)
}

// startRows are start-up, idle memory and idle CPU.
func startRows(o options, runs []runResult, per perRun) []row {
	var restarts []float64
	for _, r := range runs {
		for _, d := range r.Restarts {
			restarts = append(restarts, ms(d))
		}
	}
	start := atMost(budgetStartMS, fmt.Sprintf("≤ %d ms", budgetStartMS))
	rows := []row{
		newRow("start-up to ready, first start (new home)", "ms", per(func(r runResult) float64 { return ms(r.ColdStart) }), start,
			"exec → status answers and first getUpdates"),
		newRow("start-up to ready, restart", "ms", restarts, start, fmt.Sprintf("%d restarts, range over all", len(restarts))),
		newRow(fmt.Sprintf("idle RSS (VmRSS), latched, %v after start", o.idle), "MB", per(func(r runResult) float64 { return mb(r.Idle.RSS) }),
			atMost(budgetIdleMB, fmt.Sprintf("≤ %d MB", budgetIdleMB)), ""),
		newRow("  of which anonymous (heap, stacks)", "MB", per(func(r runResult) float64 { return mb(r.Idle.Anon) }), nil, "RssAnon"),
		newRow("  of which file-backed (binary, bbolt)", "MB", per(func(r runResult) float64 { return mb(r.Idle.File) }), nil, "RssFile"),
		newRow("  goroutines at idle", "", per(func(r runResult) float64 { return float64(r.Idle.Goroutines) }), nil,
			fmt.Sprintf("their stacks: %.2f MB (latch status)", median(per(func(r runResult) float64 { return float64(r.Idle.Stacks) / 1e6 })))),
		newRow("  highest VmRSS while idle", "MB", per(func(r runResult) float64 { return mb(r.IdlePeak) }), nil,
			fmt.Sprintf("read every %v", idlePoll)),
		newRow("idle CPU, paired → idle sample", "ms", per(func(r runResult) float64 { return ms(r.IdleCPU) }), nil, "utime+stime"),
	}
	if o.cgroup {
		rows = append(rows,
			newRow("service cgroup's charge at idle", "MB", per(func(r runResult) float64 { return float64(r.IdleCgroup) / 1e6 }), nil,
				"memory.current (v1: usage_in_bytes), page cache included"),
			newRow("service cgroup's charge after the quiet turns", "MB", per(func(r runResult) float64 { return float64(r.TurnsCgroup) / 1e6 }), nil, ""))
	}
	return rows
}

// turnRows are the quiet chat's latencies and what its turns cost.
func turnRows(o options, runs []runResult, per perRun) []row {
	n := len(runs[0].Turns.Plain)
	plain, plainNote := "plain text → answer (instant fake model)", fmt.Sprintf("%d/run; one model call on loopback", n)
	if o.noModel {
		plain, plainNote = "plain text (no model) → answer", fmt.Sprintf("%d/run; latch's fixed hint", n)
	}
	after := fmt.Sprintf("first plain text after %v idle", o.idle)
	if o.dropCaches {
		after += ", page cache dropped"
	}
	rows := []row{
		newRow(after+" → first request (typing)", "ms", per(func(r runResult) float64 { return ms(r.Turns.First.first) }), nil, "one a run"),
		newRow(after+" → answer", "ms", per(func(r runResult) float64 { return ms(r.Turns.First.reply) }),
			atMost(budgetP50MS+5, fmt.Sprintf("≤ %d ms", budgetP50MS+5)), "the answer budget + 5 ms"),
		newRow("  pages read from disk during it", "", per(func(r runResult) float64 { return float64(r.Turns.FirstFaults) }), nil,
			"the daemon's majflt; each is a page the page cache did not have"),
	}
	rows = append(rows, latency("plain text → first request (typing)", fmt.Sprintf("%d/run; the issue's per-message overhead", n),
		per, func(r runResult) []time.Duration { return firsts(r.Turns.Plain) }, true)...)
	rows = append(rows, latency(plain, plainNote, per, func(r runResult) []time.Duration { return replies(r.Turns.Plain) }, true)...)
	rows = append(rows, newRow("  p50 drift: last tenth ÷ first tenth of the turns", "×", per(func(r runResult) float64 {
		ds := replies(r.Turns.Plain)
		k := max(len(ds)/10, 1)
		return float64(quantile(ds[len(ds)-k:], 0.5)) / float64(quantile(ds[:k], 0.5))
	}), nil, "grows if per-turn work grows with the session"))
	rows = append(rows, latency("!true → first request (typing)", fmt.Sprintf("%d/run; sent before bash starts", n),
		per, func(r runResult) []time.Duration { return firsts(r.Turns.Cmd) }, true)...)
	rows = append(rows, latency("!true → answer (includes bash)", "bash start is not latch's overhead", per,
		func(r runResult) []time.Duration { return replies(r.Turns.Cmd) }, false)...)
	rows = append(rows,
		newRow("store growth per 1,000 handled", "KiB", per(func(r runResult) float64 {
			return float64(r.Turns.DBAfter-r.Turns.DBBefore) / 1024 * 1000 / float64(r.Turns.Turns)
		}), nil, fmt.Sprintf("latch.db size, over %d turns", o.turns)),
		newRow(fmt.Sprintf("RSS growth over the %d warm-up turns", o.warmup), "MB", per(func(r runResult) float64 {
			return mb(r.Turns.Warm.RSS - r.Turns.Cold.RSS)
		}), nil, ""),
		newRow(fmt.Sprintf("RSS after %d more turns", o.turns), "MB", per(func(r runResult) float64 { return mb(r.Turns.After.RSS) }), nil, ""),
		newRow("RSS slope while the context fills (default budget)", "KiB/1k", per(func(r runResult) float64 { return r.Turns.SlopeKiB }), nil,
			"the conversation itself; see the memory run"),
		newRow("  live heap slope, as of each sample's last collection", "KiB/1k", per(func(r runResult) float64 { return r.Turns.SlopeHeapKiB }), nil,
			"status memory.heap_live_bytes"))
	return rows
}

// Budgets of issue 27, as ratios to the floor bot in the same run.
const (
	budgetIdleFloor    = 1.6 // idle RSS, Telegram only
	budgetAllIdleFloor = 2.0 // idle RSS, every gateway latched
	budgetAnswerFloor  = 2.0 // answer p50 ÷ the floor's reply p50
	budgetTypingFloor  = 1.5 // first request p50 ÷ the floor's
	budgetStartFloor   = 1.3 // start-up ÷ the floor's
)

// floorRows are the floor bot's figures and latch's as ratios to them, run
// by run: a bare Go long-poll echo bot on the same fake, measured just
// before latch, so the machine's load of the moment weighs on both.
func floorRows(o options, per perRun) []row {
	if !o.ratios {
		return nil
	}
	ratio := func(limit float64) *budget { return atMost(limit, fmt.Sprintf("≤ %.1f×", limit)) }
	floorP50 := func(r runResult, f func([]sample) []time.Duration) float64 {
		return ms(quantile(f(r.Floor.Turns), 0.5))
	}
	latchP50 := func(r runResult, f func([]sample) []time.Duration) float64 {
		return ms(quantile(f(r.Turns.Plain), 0.5))
	}
	return []row{
		newRow("floor bot: start-up, exec → first getUpdates", "ms", per(func(r runResult) float64 { return ms(r.Floor.Start) }), nil,
			"bench/floor: net/http long poll + encoding/json, nothing else"),
		newRow(fmt.Sprintf("floor bot: idle RSS, %v after start", o.idle), "MB", per(func(r runResult) float64 { return mb(r.Floor.Idle.RSS) }), nil,
			"VmRSS"),
		newRow("floor bot: text → first request (typing) p50", "ms", per(func(r runResult) float64 { return floorP50(r, firsts) }), nil,
			"sendChatAction"),
		newRow("floor bot: text → reply p50", "ms", per(func(r runResult) float64 { return floorP50(r, replies) }), nil, "sendMessage"),
		newRow("start-up ÷ floor's (first start)", "×", per(func(r runResult) float64 { return float64(r.ColdStart) / float64(r.Floor.Start) }),
			ratio(budgetStartFloor), "same run"),
		newRow("idle RSS ÷ floor's, Telegram only", "×", per(func(r runResult) float64 { return float64(r.Idle.RSS) / float64(r.Floor.Idle.RSS) }),
			ratio(budgetIdleFloor), ""),
		newRow("idle RSS, every gateway latched", "MB", per(func(r runResult) float64 { return mb(r.AllIdle.RSS) }), nil,
			everyGateway()),
		newRow("idle RSS ÷ floor's, every gateway latched", "×", per(func(r runResult) float64 { return float64(r.AllIdle.RSS) / float64(r.Floor.Idle.RSS) }),
			ratio(budgetAllIdleFloor), ""),
		newRow("plain text first request (typing) p50 ÷ floor's", "×", per(func(r runResult) float64 { return latchP50(r, firsts) / floorP50(r, firsts) }),
			ratio(budgetTypingFloor), ""),
		newRow("plain text answer p50 ÷ floor's reply p50", "×", per(func(r runResult) float64 { return latchP50(r, replies) / floorP50(r, replies) }),
			ratio(budgetAnswerFloor), "latch: a model call on loopback and durable commits; the floor: none"),
	}
}

// memoryRows are the memory run's: the 1,000 turns with the
// context held full, so that a trend is what turns leave behind. The
// budget is judged on RSS, as the issue words it; the anonymous part and
// the live heap show where a change comes from. A -quick run is too short
// to judge.
func memoryRows(o options, mem *turnsResult) []row {
	if mem == nil {
		return nil
	}
	one := func(v float64) []float64 { return []float64{v} }
	b, note := atMost(budgetTrendKiB, fmt.Sprintf("≤ %d KiB/1k", budgetTrendKiB)), fmt.Sprintf("least squares, %d samples", len(mem.RSSKiB))
	if o.quick {
		b, note = nil, "too short to judge in -quick"
	}
	name := fmt.Sprintf("memory run: %d turns, context held at %d tokens", mem.Turns, memoryBudget)
	return []row{
		newRow(name+", RSS before", "MB", one(mb(int64(mem.RSSKiB[0]))), nil, fmt.Sprintf("after %d warm-up turns", o.memWarmup)),
		newRow(name+", RSS after", "MB", one(mb(mem.After.RSS)), nil, ""),
		newRow("memory run: RSS trend", "KiB/1k", one(mem.SlopeKiB), b, note),
		newRow("  anonymous trend (heap, incl. freed not yet returned)", "KiB/1k", one(mem.SlopeAnonKiB), nil, "RssAnon"),
		newRow("  file-backed trend (binary pages run for the first time, bbolt)", "KiB/1k", one(mem.SlopeKiB-mem.SlopeAnonKiB), nil,
			"RssFile; at most what of the binary is not mapped yet"),
		newRow("  live heap trend, as of each sample's last collection", "KiB/1k", one(mem.SlopeHeapKiB), nil, "status memory.heap_live_bytes"),
		newRow("memory run: store growth per 1,000 turns", "KiB", one(float64(mem.DBAfter-mem.DBBefore)/1024*1000/float64(mem.Turns)), nil,
			"latch.db size; old turns beyond the context are deleted"),
	}
}

// latency is a p50 and a p99 row; with budget they are judged against the
// per-message overhead budgets.
func latency(name, note string, per perRun, f func(runResult) []time.Duration, judged bool) []row {
	var b50, b99 *budget
	if judged {
		b50 = atMost(budgetP50MS, fmt.Sprintf("≤ %d ms", budgetP50MS))
		b99 = atMost(budgetP99MS, fmt.Sprintf("≤ %d ms", budgetP99MS))
	}
	return []row{
		newRow(name+" p50", "ms", per(func(r runResult) float64 { return ms(quantile(f(r), 0.50)) }), b50, note),
		newRow(name+" p99", "ms", per(func(r runResult) float64 { return ms(quantile(f(r), 0.99)) }), b99, ""),
	}
}

// floodRows are the stranger flood: what was absorbed at what cost, and the
// latched chat's latency meanwhile against its quiet latency.
func floodRows(o options, runs []runResult, per perRun) []row {
	fl := func(f func(floodResult) float64) []float64 {
		return per(func(r runResult) float64 { return f(r.Flood) })
	}
	rate := func(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
	target := fmt.Sprintf("%d msg/s × %v, %d chats", o.floodRate, o.floodFor, o.strangers)
	rows := []row{
		newRow("flood: pushed into the fake", "msg/s", fl(func(f floodResult) float64 { return rate(f.Pushed, f.Window) }), nil, target),
		newRow("flood: absorbed (confirmed offset)", "msg/s", fl(func(f floodResult) float64 { return rate(f.Absorbed, f.Window) }),
			atLeast(floodShare*float64(o.floodRate), fmt.Sprintf("≥ %.0f msg/s", floodShare*float64(o.floodRate))), "during the flood"),
		newRow("flood: slowest whole second", "msg/s", fl(func(f floodResult) float64 { return float64(minOr(f.PerSecond)) }), nil, ""),
		newRow("flood: mean batch (updates per getUpdates)", "", fl(func(f floodResult) float64 {
			return float64(f.Pushed) / float64(max(f.Polls, 1))
		}), nil, "strangers only: held, stored once a second"),
		newRow("flood: backlog drained after last push", "ms", fl(func(f floodResult) float64 { return ms(f.Drain) }), nil, ""),
		newRow("flood: strangers dropped / pushed", "%", fl(func(f floodResult) float64 {
			return 100 * float64(f.Dropped) / float64(max(f.Pushed, 1))
		}), nil, "counter from status"),
		newRow("flood: daemon CPU (utime+stime)", "%", fl(func(f floodResult) float64 { return 100 * f.CPU.Seconds() / f.Wall.Seconds() }),
			nil, "of one core, flood start → drained"),
		newRow("flood: daemon CPU per 1,000 strangers", "ms", fl(func(f floodResult) float64 {
			return ms(f.CPU) * 1000 / float64(max(f.Pushed, 1))
		}), nil, ""),
		newRow("flood: bench's own CPU (fake, pusher)", "%", fl(func(f floodResult) float64 { return 100 * f.HarnessCPU.Seconds() / f.Wall.Seconds() }),
			nil, "same 2 cores"),
		newRow("flood: store growth", "KiB", fl(func(f floodResult) float64 { return float64(f.DBGrowth) / 1024 }), nil, ""),
		newRow("flood: peak RSS so far (VmHWM)", "MB", fl(func(f floodResult) float64 { return mb(f.After.Peak) }), nil, ""),
	}
	for _, k := range []struct {
		name string
		f    func([]sample) []time.Duration
	}{{"!true → first request", firsts}, {"!true → answer", replies}} {
		flood := func(r runResult) float64 { return ms(quantile(k.f(r.Flood.Cmd), 0.99)) }
		quiet := func(r runResult) float64 { return ms(quantile(k.f(r.Turns.Cmd), 0.99)) }
		rows = append(rows,
			newRow("flood: "+k.name+" p50", "ms", per(func(r runResult) float64 { return ms(quantile(k.f(r.Flood.Cmd), 0.5)) }), nil,
				fmt.Sprintf("%d in run 1", len(runs[0].Flood.Cmd))),
			newRow("flood: "+k.name+" p99", "ms", per(flood), nil, ""),
			newRow("flood: "+k.name+" p99 ÷ quiet p99", "×", per(func(r runResult) float64 { return flood(r) / quiet(r) }),
				atMost(2, "≤ 2×"), ""))
	}
	return rows
}

func minOr(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}
