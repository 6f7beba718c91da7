package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/latchd/latch/agent/provider/openai/openaitest"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// turnKind is what the owner sends.
type turnKind int

const (
	// plainTurn is plain text. It goes to the agent, whose model is an
	// instant fake (openaitest, scripted to answer modelAnswer at once), so
	// the row measures latch's own overhead for a model turn: the model
	// call on loopback, the session kept in the store, the answer sent.
	// With -no-model no provider is configured and latch answers with its
	// fixed hint instead, which starts with noModelPrefix.
	plainTurn turnKind = iota
	// cmdTurn is `!true`: command mode, which also starts bash.
	cmdTurn
)

const (
	modelAnswer   = "pong from the instant fake model"
	noModelPrefix = "No model is configured"
)

const turnTimeout = 30 * time.Second

// chatPostInterval is how far apart the bench keeps what the bot posts in
// the owner's chat (messages and edits). Telegram allows about one a second
// per chat, and latch paces itself to that (a per-chat token bucket in the
// Telegram gateway); a faster chat would measure that pacing, not latch.
const chatPostInterval = 1050 * time.Millisecond

// sample is one turn's latencies from the moment the owner's message was
// pushed into the fake: first is the bot's first request about it ("typing"
// or the first message, whichever came first), reply is the request that
// carried the answer (a message, or the edit that completed a streamed
// one). posts counts the messages and edits the turn caused.
type sample struct {
	first, reply time.Duration
	posts        int
}

// posted tracks the bot's messages and edits in the owner's chat since a
// turn began, cheaply enough to run on every change of the fake.
type posted struct {
	tg               *telegramtest.Server
	nMsg, nEdit      int // counts before the turn
	seenMsg, seenEdt int // counts when last looked at
	found            telegramtest.Call
	posts            int
}

func newPosted(tg *telegramtest.Server) *posted {
	p := &posted{tg: tg, nMsg: tg.Count("sendMessage"), nEdit: tg.Count("editMessageText")}
	p.seenMsg, p.seenEdt = p.nMsg, p.nEdit
	return p
}

// answered reports whether a message or edit to the owner since the turn
// began contains want, and keeps the first that does.
func (p *posted) answered(want string) bool {
	m, ed := p.tg.Count("sendMessage"), p.tg.Count("editMessageText")
	if m == p.seenMsg && ed == p.seenEdt {
		return p.found.Method != ""
	}
	p.seenMsg, p.seenEdt = m, ed
	calls := append(p.tg.Calls("sendMessage")[p.nMsg:], p.tg.Calls("editMessageText")[p.nEdit:]...)
	p.posts = 0
	for _, c := range calls {
		if c.Params["chat_id"] != ownerID {
			continue
		}
		p.posts++
		if strings.Contains(c.Params["text"], want) && (p.found.Method == "" || c.Time.Before(p.found.Time)) {
			p.found = c
		}
	}
	return p.found.Method != ""
}

// turn sends one message from the owner and waits for the answer.
func (e *env) turn(ctx context.Context, d *daemon, k turnKind) (sample, error) {
	text, want := "what time is it?", modelAnswer
	switch {
	case k == cmdTurn:
		text, want = "!true", "exit 0"
	case e.ai == nil:
		want = noModelPrefix
	default:
		e.ai.Script(openaitest.Text(modelAnswer))
	}
	s, err := exchange(ctx, e.tg, text, want)
	if err != nil {
		return s, d.failure(err.Error())
	}
	return s, nil
}

// exchange pushes text from the owner into tg and waits for the bot's
// message or edit containing want.
func exchange(ctx context.Context, tg *telegramtest.Server, text, want string) (sample, error) {
	p, nAct := newPosted(tg), tg.Count("sendChatAction")
	t0 := time.Now()
	tg.SendText(ownerChat, owner, text)
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	if err := tg.Wait(ctx, func() bool { return p.answered(want) }); err != nil {
		return sample{}, fmt.Errorf("no answer to %q containing %q: %v", text, want, err)
	}
	// Times as the fake stamped the requests' arrival, not when this
	// goroutine woke.
	s := sample{first: p.found.Time.Sub(t0), reply: p.found.Time.Sub(t0), posts: p.posts}
	if msgs := tg.Calls("sendMessage"); len(msgs) > p.nMsg && msgs[p.nMsg].Time.Sub(t0) < s.first {
		s.first = msgs[p.nMsg].Time.Sub(t0)
	}
	if acts := tg.Calls("sendChatAction"); len(acts) > nAct && acts[nAct].Time.Sub(t0) < s.first {
		s.first = acts[nAct].Time.Sub(t0)
	}
	return s, nil
}

// pacer starts the next turn once the owner's chat could take the posts
// of the last one again: chatPostInterval per post after it ended.
type pacer struct{ next time.Time }

func (p *pacer) wait(ctx context.Context) error {
	if d := time.Until(p.next); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func (p *pacer) done(s sample) {
	p.next = time.Now().Add(time.Duration(max(s.posts, 1)) * chatPostInterval)
}

// turnsResult is the quiet-chat phase: latencies, and what 1,000 handled
// messages cost in memory and store.
type turnsResult struct {
	// First is the first turn, plain text, right after the idle sample:
	// the first reply after a long idle.
	First sample `json:"-"`
	// FirstFaults are the daemon's major faults (pages read from disk)
	// during the first turn.
	FirstFaults int64    `json:"first_turn_major_faults"`
	Plain       []sample `json:"-"`
	Cmd         []sample `json:"-"`
	Turns       int      `json:"turns"`
	Cold        memory   `json:"memory_before_warmup"`
	Warm        memory   `json:"memory_after_warmup"`
	DBBefore    int64    `json:"db_before_bytes"`
	DBAfter     int64    `json:"db_after_bytes"`
	// RSSAt and RSSKiB are RSS before every measured turn and after the
	// last: between collections the heap breathes by a few hundred KiB,
	// so a sample a turn is what makes a trend of a few hundred KiB per
	// 1,000 turns stand out (reading /proc costs the daemon nothing).
	RSSAt   []float64 `json:"rss_at_turn"`
	RSSKiB  []float64 `json:"rss_kib"`
	Samples []memory  `json:"memory_samples"`
	// HeapAt and HeapKiB are the daemon's live heap, as its last
	// collection found it (status: memory.heap_live_bytes), sampled
	// fewer times: asking costs the daemon a little work.
	HeapAt  []float64 `json:"heap_at_turn"`
	HeapKiB []float64 `json:"heap_live_kib"`
	After   memory    `json:"memory_after"`
	// SlopeKiB, SlopeAnonKiB and SlopeHeapKiB are the fitted trends of
	// RSS, of its anonymous part and of the live heap, in KiB per 1,000
	// turns.
	SlopeKiB     float64 `json:"rss_slope_kib_per_1000"`
	SlopeAnonKiB float64 `json:"rss_anon_slope_kib_per_1000"`
	SlopeHeapKiB float64 `json:"heap_live_slope_kib_per_1000"`
}

// turns alternates plain text and `!true` from the owner: warmup turns
// first, not counted, then n measured ones with RSS sampled samples times
// along the way and once at the end. The warm-up matters for the RSS trend: the heap first
// grows to the runtime's minimum goal (4 MB at GOGC=100) before its first
// collection, a rise that is not a leak and would dominate a trend fitted
// from turn one.
func (e *env) turns(ctx context.Context, d *daemon, warmup, n, samples int) (turnsResult, error) {
	kind := func(i int) turnKind { return turnKind(i % 2) }
	p := &pacer{}
	cold, err := readMemory(d.pid)
	if err != nil {
		return turnsResult{}, err
	}
	var first sample
	var faults int64
	for i := range warmup {
		if err := p.wait(ctx); err != nil {
			return turnsResult{}, err
		}
		f0, _ := majorFaults(d.pid)
		s, err := e.turn(ctx, d, kind(i))
		if err != nil {
			return turnsResult{}, err
		}
		p.done(s)
		if i == 0 {
			f1, _ := majorFaults(d.pid)
			first, faults = s, f1-f0
		}
	}
	warm, err := readMemory(d.pid)
	if err != nil {
		return turnsResult{}, err
	}
	r := turnsResult{First: first, FirstFaults: faults, Turns: n, Cold: cold, Warm: warm, DBBefore: fileSize(e.dbPath())}
	every := max(n/samples, 1)
	for i := 0; i < n; i++ {
		if err := r.sample(ctx, d, i, i%every == 0); err != nil {
			return r, err
		}
		if err := p.wait(ctx); err != nil {
			return r, err
		}
		s, err := e.turn(ctx, d, kind(i))
		if err != nil {
			return r, err
		}
		p.done(s)
		if kind(i) == plainTurn {
			r.Plain = append(r.Plain, s)
		} else {
			r.Cmd = append(r.Cmd, s)
		}
	}
	if err := r.sample(ctx, d, n, true); err != nil {
		return r, err
	}
	r.DBAfter = fileSize(e.dbPath())
	r.After, _ = readMemory(d.pid)
	anon := make([]float64, len(r.Samples))
	for i, m := range r.Samples {
		anon[i] = float64(m.Anon)
	}
	r.SlopeKiB, r.SlopeAnonKiB = slope(r.RSSAt, r.RSSKiB)*1000, slope(r.RSSAt, anon)*1000
	r.SlopeHeapKiB = slope(r.HeapAt, r.HeapKiB) * 1000
	return r, nil
}

// sample reads RSS before turn, and with heap the live heap too.
func (r *turnsResult) sample(ctx context.Context, d *daemon, turn int, heap bool) error {
	m, err := readMemory(d.pid)
	if err != nil {
		return d.failure(fmt.Sprintf("read memory: %v", err))
	}
	r.RSSAt = append(r.RSSAt, float64(turn))
	r.RSSKiB = append(r.RSSKiB, float64(m.RSS))
	r.Samples = append(r.Samples, m)
	if !heap {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, callLimit)
	defer cancel()
	st, err := d.ctl.Status(ctx)
	if err != nil || st.Memory == nil {
		return d.failure(fmt.Sprintf("status memory: %+v, %v", st.Memory, err))
	}
	r.HeapAt = append(r.HeapAt, float64(turn))
	r.HeapKiB = append(r.HeapKiB, float64(st.Memory.HeapLive)/1024)
	return nil
}

func firsts(ss []sample) []time.Duration {
	return pick(ss, func(s sample) time.Duration { return s.first })
}

func replies(ss []sample) []time.Duration {
	return pick(ss, func(s sample) time.Duration { return s.reply })
}

func pick(ss []sample, f func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}
