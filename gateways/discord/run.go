package discord

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"

	"github.com/bwmarrin/discordgo"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/logkey"
)

const (
	// maxQueue bounds the events waiting for Run. Past it, messages are
	// dropped and fetched again by a backfill.
	maxQueue = 4096
	// pageSize is the most messages Discord returns per history request.
	pageSize = 100
	// maxPages bounds one channel's backfill, so a misbehaving server
	// cannot keep it going forever.
	maxPages = 100
	// recentInteractions is how many interaction ids Run remembers to drop
	// a press delivered twice.
	recentInteractions = 256
)

// event is what the gateway's handlers queue for Run: a READY (a new
// session: backfill), a message or a button press; or, from Send, word
// that a channel was latched (markLatched), for the cursor to store.
type event struct {
	ready   bool
	latched bool
	msg     *discordgo.Message
	inter   *discordgo.Interaction
}

// eventQueue hands events from discordgo's reading goroutine to Run
// without ever blocking the reader.
type eventQueue struct {
	mu       sync.Mutex
	items    []event
	overflow bool
	wake     chan struct{}
}

func newEventQueue() eventQueue { return eventQueue{wake: make(chan struct{}, 1)} }

func (q *eventQueue) push(e event) {
	q.mu.Lock()
	if len(q.items) >= maxQueue {
		q.overflow = true
	} else {
		q.items = append(q.items, e)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) take() ([]event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	items, overflow := q.items, q.overflow
	q.items, q.overflow = nil, false
	return items, overflow
}

func (g *Gateway) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	g.mu.Lock()
	if r.User != nil {
		g.botID, g.info.BotName = r.User.ID, r.User.Username
	}
	if r.Application != nil {
		g.appID = r.Application.ID
	}
	g.readies++
	again := g.readies > 1
	g.mu.Unlock()
	if again {
		g.log.Warn("the gateway session could not be resumed; started a new one and backfilling missed messages")
	}
	g.queue.push(event{ready: true})
}

func (g *Gateway) onResumed(*discordgo.Session, *discordgo.Resumed) {
	g.log.Info("gateway session resumed; missed events are replayed")
}

func (g *Gateway) onDisconnect(n *netGuard) {
	g.setConnected(false)
	if !n.isClosed() {
		g.log.Warn("lost the gateway connection; reconnecting")
	}
}

func (g *Gateway) onMessage(_ *discordgo.Session, m *discordgo.MessageCreate) {
	if m.Message == nil || m.Author == nil || m.Author.ID == g.botUserID() {
		return
	}
	g.queue.push(event{msg: m.Message})
}

func (g *Gateway) onInteraction(_ *discordgo.Session, i *discordgo.InteractionCreate) {
	if i.Interaction != nil {
		g.queue.push(event{inter: i.Interaction})
	}
}

// Run hands what the gateway receives to sink until ctx ends: after the
// stored cursor is read, the channels it names are backfilled, then live
// messages and button presses follow in order; each batch is stored with
// the cursor advanced past it. discordgo reconnects by itself; a resumed
// session replays what was missed, a new one is backfilled. Run returns nil
// when ctx ends (closing the gateway connection; REST calls keep working)
// and ErrUnauthorized if the token stops working.
func (g *Gateway) Run(ctx context.Context, sink adapter.Sink) error {
	g.mu.Lock()
	s, n := g.session, g.net
	g.mu.Unlock()
	if s == nil {
		return errNotStarted
	}
	if n.isClosed() {
		return errors.New("discord: the gateway was closed by an earlier Run; Start it again")
	}
	defer g.closeGateway(s, n)
	r := &runner{g: g, s: s, sink: sink}
	if !r.loadCursor(ctx) {
		return nil
	}
	for {
		items, overflow := g.queue.take()
		if len(items) == 0 && !overflow {
			if !r.wait(ctx) {
				return nil
			}
			continue
		}
		if err := r.process(ctx, items, overflow); err != nil || ctx.Err() != nil {
			return err
		}
		g.expirePairs()
	}
}

// wait waits for events. It returns false when ctx ended.
func (r *runner) wait(ctx context.Context) bool {
	select {
	case <-r.g.queue.wake:
	case <-ctx.Done():
		return false
	}
	return true
}

// runner is the state of one Run.
type runner struct {
	g      *Gateway
	s      *discordgo.Session
	sink   adapter.Sink
	cur    cursor
	recent []string // ids of recent interactions
	// gone remembers where the channels the cursor let go of stood then,
	// so that one latched after it went comes back where it was (see
	// cursor.markAnswered). At most maxGone.
	gone map[string]mark
}

// maxGone bounds runner.gone. Only the latched chat is ever looked up, and
// only if strangers pushed it out between its pairing attempt and the
// Hub's answer: more than maxGone channels dropped in that moment would
// make a backfill fetch again what the owner sent in it.
const maxGone = 1024

// loadCursor reads the stored cursor, retrying store errors. It returns
// false when ctx ended first.
func (r *runner) loadCursor(ctx context.Context) bool {
	bo := r.g.newBackoff()
	for {
		c, err := r.sink.Cursor(ctx, gatewayName)
		if err == nil {
			var ok bool
			if r.cur, ok = parseCursor(c); !ok {
				r.g.log.Warn("ignoring an invalid stored cursor; nothing will be backfilled")
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		d := bo.Next()
		r.g.log.Warn("reading the cursor failed; retrying", logkey.Err, r.g.scrub(err), "retry_in", d)
		if !retry.Sleep(ctx, d) {
			return false
		}
	}
}

// process handles queued events in order: runs of messages and presses are
// stored as one batch each; a READY backfills first. An overflow (events
// were dropped) is made good by a backfill at the end.
func (r *runner) process(ctx context.Context, items []event, overflow bool) error {
	start := 0
	for i, e := range items {
		if !e.ready {
			continue
		}
		r.live(ctx, items[start:i])
		if err := r.backfill(ctx); err != nil {
			return err
		}
		start = i + 1
	}
	r.live(ctx, items[start:])
	if overflow {
		r.g.log.Warn("too many events waited for the store; fetching the dropped messages again")
		return r.backfill(ctx)
	}
	return nil
}

// live translates and stores a run of live events. Messages at or below
// the cursor of their channel were handled already (by a backfill, or
// delivered twice) and are dropped. A /pair command's interaction is held
// here, before it is stored, so the Hub's reply can be its response
// within Discord's three seconds.
func (r *runner) live(ctx context.Context, evs []event) {
	if len(evs) == 0 {
		return
	}
	next := r.cur.clone()
	var msgs []adapter.Message
	latched := false
	for _, e := range evs {
		switch {
		case e.latched:
			latched = true
		case e.msg != nil:
			id, ok := snowflake(e.msg.ID)
			if !ok {
				continue
			}
			if next.seen(e.msg.ChannelID, id) {
				r.g.log.Debug("skipping a message handled already", "message_id", e.msg.ID)
				continue
			}
			if m, ok := r.g.translate(e.msg); ok {
				next.advance(e.msg.ChannelID, e.msg.GuildID, id)
				msgs = append(msgs, m)
			}
		case e.inter != nil:
			if slices.Contains(r.recent, e.inter.ID) {
				continue
			}
			r.recent = append(r.recent, e.inter.ID)
			if len(r.recent) > recentInteractions {
				r.recent = r.recent[1:]
			}
			if m, ok := r.interaction(e.inter); ok {
				msgs = append(msgs, m)
			}
		}
	}
	// A latched channel is stored in the cursor at once, with or without
	// messages: a restart before the next batch must not lose its mark.
	if len(msgs) > 0 || latched {
		r.ingest(ctx, next, msgs)
	}
}

// interaction translates a button press or a use of a command.
func (r *runner) interaction(i *discordgo.Interaction) (adapter.Message, bool) {
	if i.Type == discordgo.InteractionApplicationCommand {
		return r.g.translateCommand(i)
	}
	return r.g.translateInteraction(i)
}

// ingest stores msgs with the cursor next, retrying the same batch until
// the sink takes it or ctx ends. Only then does the cursor move.
func (r *runner) ingest(ctx context.Context, next cursor, msgs []adapter.Message) bool {
	next.markAnswered(r.g.takeAnswered(), r.wentFrom)
	bo := r.g.newBackoff()
	for {
		err := r.sink.Ingest(ctx, gatewayName, next.encode(), msgs)
		if err == nil {
			r.noteGone(next)
			next.dropped = nil
			r.cur = next
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		d := bo.Next()
		r.g.log.Warn("storing messages failed; retrying the same batch",
			logkey.Err, r.g.scrub(err), "messages", len(msgs), "retry_in", d)
		if !retry.Sleep(ctx, d) {
			return false
		}
	}
}

// wentFrom returns where a channel stood when the cursor let go of it
// (cursor.markAnswered).
func (r *runner) wentFrom(channel string) (mark, bool) {
	m, ok := r.gone[channel]
	return m, ok
}

// noteGone remembers the channels a stored cursor let go of; when maxGone
// are remembered, the one that went quiet first makes room.
func (r *runner) noteGone(next cursor) {
	if r.gone == nil {
		r.gone = map[string]mark{}
	}
	for _, m := range next.dropped {
		if len(r.gone) >= maxGone {
			oldest := ""
			for id, o := range r.gone {
				if oldest == "" || o.last < r.gone[oldest].last {
					oldest = id
				}
			}
			delete(r.gone, oldest)
		}
		r.gone[m.ID] = m
	}
	for _, m := range next.Channels {
		delete(r.gone, m.ID)
	}
}

// backfill fetches, for every channel of the cursor, the messages after
// the last one handled, oldest first, and stores them page by page. A
// channel latch has lost access to is forgotten; one whose history fails
// otherwise is kept for the next backfill. It returns an error only for a
// token Discord no longer accepts.
func (r *runner) backfill(ctx context.Context) error {
	for _, ch := range slices.Clone(r.cur.Channels) {
		err := r.backfillChannel(ctx, ch)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil
		case isAPI(err, http.StatusUnauthorized, 0):
			r.g.log.Error("Discord rejected the bot token; stopping", logkey.Err, err)
			return ErrUnauthorized
		case lostAccess(err):
			r.g.log.Warn("cannot read a channel's history any more; forgetting it", logkey.Chat, ch.ID, logkey.Err, err)
			next := r.cur.clone()
			next.forget(ch.ID)
			r.ingest(ctx, next, nil)
		default:
			r.g.log.Error("reading a channel's history failed; keeping it for the next backfill",
				logkey.Chat, ch.ID, logkey.Err, err)
		}
	}
	return nil
}

// Discord's error codes for a channel latch can no longer read.
const (
	codeUnknownChannel = 10003 // 404: deleted
	codeMissingAccess  = 50001 // 403: the bot left the server or lost View Channel
)

// lostAccess reports whether err says the channel is gone for latch, so
// its history will never come: only then may the cursor forget it, or
// messages sent while latch was down would never be fetched.
func lostAccess(err error) bool {
	return isAPI(err, http.StatusNotFound, codeUnknownChannel) || isAPI(err, http.StatusForbidden, codeMissingAccess)
}

func (r *runner) backfillChannel(ctx context.Context, ch mark) error {
	after := ch.last
	for range maxPages {
		page, err := r.history(ctx, ch.ID, after)
		if err != nil {
			return err
		}
		next := r.cur.clone()
		var msgs []adapter.Message
		highest := after
		for _, m := range page {
			id, _ := snowflake(m.ID)
			if id <= after {
				continue
			}
			highest = max(highest, id)
			if next.seen(ch.ID, id) {
				continue
			}
			if m.GuildID == "" {
				m.GuildID = ch.Guild // history answers leave guild_id out
			}
			if gm, ok := r.g.translate(m); ok {
				msgs = append(msgs, gm)
			}
		}
		if highest == after {
			return nil
		}
		// Past the bot's own replies and others' skipped messages too:
		// the next backfill need not read them again.
		next.advance(ch.ID, ch.Guild, highest)
		if len(msgs) > 0 {
			r.g.log.Info("backfilled messages", logkey.Chat, ch.ID, "messages", len(msgs))
		}
		if !r.ingest(ctx, next, msgs) {
			return ctx.Err()
		}
		if len(page) < pageSize {
			return nil
		}
		after = highest
	}
	return nil
}

// history reads one page of a channel's messages after an id, oldest
// first. A read is safe to make again, so whatever may go away by itself
// — a 429, a 5xx, no answer at all — is retried until ctx ends, waiting as
// a 429 asks or with back-off; any other answer of Discord's is returned.
func (r *runner) history(ctx context.Context, channel string, after uint64) ([]*discordgo.Message, error) {
	bo := r.g.newBackoff()
	for {
		var page []*discordgo.Message
		err := r.g.attempt(ctx, requestTimeout, nil, func(opts ...discordgo.RequestOption) (err error) {
			page, err = r.s.ChannelMessages(channel, pageSize, "", formatID(after), "", opts...)
			return err
		})
		var apiErr *APIError
		switch {
		case err == nil:
			slices.SortFunc(page, func(a, b *discordgo.Message) int {
				x, _ := snowflake(a.ID)
				y, _ := snowflake(b.ID)
				return cmpUint(x, y)
			})
			return page, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &apiErr) && !transient(err):
			return nil, err
		}
		d := bo.Next()
		if apiErr != nil && apiErr.Status == http.StatusTooManyRequests {
			d = rateLimitWait(apiErr, &bo)
		}
		r.g.log.Warn("reading a channel's history failed; retrying", logkey.Chat, channel, logkey.Err, err, "retry_in", d)
		if !retry.Sleep(ctx, d) {
			return nil, ctx.Err()
		}
	}
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// markAnswered notes that latch sent to a channel; the cursor keeps such
// channels over the others.
func (g *Gateway) markAnswered(channel string) { g.noteAnswer(channel, reply{}) }

// markOwner notes that a turn is rendered in a channel: the latched chat,
// which the cursor keeps longest.
func (g *Gateway) markOwner(channel string) { g.noteAnswer(channel, reply{owner: true}) }

// markLatched notes that the Hub told a channel it is now paired, in
// answer to message since (0: unknown): it is the latched chat. Run is
// told at once, so the cursor has the channel, as the owner's, before any
// stranger's message can push it out, and stores it even if nothing else
// comes.
func (g *Gateway) markLatched(channel string, since uint64) {
	g.noteAnswer(channel, reply{owner: true, since: since})
	g.queue.push(event{latched: true})
}

// noteAnswer merges a into what is noted for channel. Past maxQueue
// channels only the owner's are noted: the Hub latches one chat at a time,
// so those stay few, whereas a flood of strangers' channels must not grow
// the map.
func (g *Gateway) noteAnswer(channel string, a reply) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old, ok := g.answered[channel]
	if !ok && !a.owner && len(g.answered) >= maxQueue {
		return
	}
	g.answered[channel] = reply{owner: old.owner || a.owner, since: max(old.since, a.since)}
}

func (g *Gateway) takeAnswered() map[string]reply {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.answered
	g.answered = map[string]reply{}
	return a
}
