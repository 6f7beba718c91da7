package gateways

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// MsgInterrupted tells a chat that a command it sent was cut by a restart.
const MsgInterrupted = "⚠ This was interrupted by a restart of latch and was not run again:\n"

// chat is the per-(gateway, chat) worker state: a FIFO of inbox entries run
// one at a time, and the job in progress.
type chat struct {
	key   chatKey
	queue []queued
	// running is the chat's job from the moment it is next — only
	// answers given at once (a notice, /new) are ahead of it, if anything
	// — until the worker is done with its entry; see claim. It may still
	// be in queue.
	running *job
	// fresh counts the entries at the end of queue that the scan being
	// dispatched added; no worker takes them before it is done (see
	// startWorkers).
	fresh int
	// active is true while a worker goroutine owns this chat; at most one
	// does, so a chat's messages run in order.
	active bool
	// album is the open album the last queued entry started, which the
	// chat's next items join (see album.go); nil for none.
	album *album
}

// queued is an entry in a chat's queue, with the job it runs (nil for
// what is answered at once) and the album it starts (nil for none).
type queued struct {
	e     store.Entry
	j     *job
	album *album
}

// Run recovers the inbox, then dispatches stored work until ctx ends. Then
// it starts nothing new and gives running jobs ShutdownGrace to finish
// before it cancels them (a cancelled job stays "running" in the inbox, so
// the next start reports it instead of running it again). It returns once
// every goroutine it started has ended.
func (h *Hub) Run(ctx context.Context) error {
	work, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	// agent.ErrShutdown tells a turn to stay resumable rather than end.
	hardStop := func() { cancelWork(agent.ErrShutdown) }
	defer hardStop()
	h.hold(true)
	defer h.hold(false) // after drain: from then on Ingest commits every batch
	h.mu.Lock()
	h.ctx = ctx
	h.mu.Unlock()
	defer h.stopEarly() // after drain: Ingest may still run until then
	defer h.drain(hardStop)
	if err := h.recoverInbox(); err != nil {
		return fmt.Errorf("recover inbox: %w", err)
	}
	var beat <-chan time.Time
	if h.cfg.Heartbeat != nil && h.cfg.HeartbeatEvery > 0 {
		t := time.NewTicker(h.cfg.HeartbeatEvery)
		defer t.Stop()
		beat = t.C
		h.cfg.Heartbeat()
	}
	var storeHeld <-chan time.Time // armed while Ingest holds something
	for {
		if err := h.dispatchPending(work); err != nil {
			h.log.Error("dispatch", logkey.Err, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-h.wake:
		case <-beat:
			h.cfg.Heartbeat()
		case <-h.heldWake:
			if storeHeld == nil {
				storeHeld = time.After(holdFor)
			}
			continue
		case <-storeHeld:
			storeHeld = nil
			if h.storeHeldNow() {
				storeHeld = time.After(holdFor)
			}
			continue
		}
	}
}

// MsgStopping tells a chat whose job is running that latch is stopping;
// %s is the shutdown grace.
const MsgStopping = "⏳ latch is stopping on this machine. What is running has %s to finish; " +
	"after that it is stopped, and not run again when latch is back."

// drain waits for running jobs for up to ShutdownGrace, or until StopNow
// closes, then stops them. It says at once what it waits for, in the log
// and to each chat whose job runs.
func (h *Hub) drain(hardStop func()) {
	done := make(chan struct{})
	go func() { h.workers.Wait(); close(done) }()
	var told sync.WaitGroup
	defer told.Wait()
	if jobs := h.runningJobs(); len(jobs) > 0 {
		grace := h.cfg.ShutdownGrace
		h.log.Warn("stopping: waiting for running jobs to finish", "running", len(jobs),
			"jobs", strings.Join(jobs, ", "), "grace", grace.String())
		if grace >= time.Second { // a shorter grace is over before the message is out
			h.tellStopping(&told, grace.Round(time.Second))
		}
	}
	select {
	case <-done:
		return
	case <-time.After(h.cfg.ShutdownGrace):
		if n := h.runningTotal(); n > 0 {
			h.log.Warn("shutdown grace over; stopping running jobs", "running", n)
		}
	case <-h.cfg.StopNow:
		h.log.Warn("stopping running jobs now, as asked", "running", h.runningTotal())
	}
	hardStop()
	<-done
}

// runningJobs describes each running job as "a shell command in
// telegram chat 42" (never its text, which may hold a secret).
func (h *Hub) runningJobs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var jobs []string
	for k, c := range h.chats {
		if c.running == nil || !c.running.working {
			continue
		}
		what := "an agent turn"
		if strings.HasPrefix(strings.TrimSpace(c.running.e.Text), "!") {
			what = "a shell command"
		}
		jobs = append(jobs, fmt.Sprintf("%s in %s chat %s", what, k.gateway, k.chatID))
	}
	slices.Sort(jobs)
	return jobs
}

// tellStopping sends MsgStopping to every chat whose job runs, best
// effort: each send has a few seconds, and ends with the job's own out
// context (an unpair mutes it).
func (h *Hub) tellStopping(wg *sync.WaitGroup, grace time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, c := range h.chats {
		j := c.running
		if j == nil || !j.working || j.out == nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(j.out, 5*time.Second)
			defer cancel()
			if err := h.trySend(ctx, k.gateway, k.chatID, Reply{Text: fmt.Sprintf(MsgStopping, grace)}); err != nil {
				h.log.Debug("could not tell the chat latch is stopping", logkey.Gateway, k.gateway, logkey.Chat, k.chatID, logkey.Err, err)
			}
		})
	}
}

func (h *Hub) runningTotal() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.chats {
		if c.running != nil {
			n++
		}
	}
	return n
}

// recoverInbox handles every entry that the last process left in the
// middle. A command is never run twice — the chat is told instead: that it
// was interrupted, when latch stopped it itself (Cut), or that it may
// have finished, when latch died while it ran (Running: the crash may
// have come between the process's exit and the commit of its answer). An
// agent turn resumes once from its last completed step (the tool call
// that was running gets "interrupted" as its result, never a second run).
// A cut job of a chat no longer latched (an unpair came during the
// shutdown) is dropped without a word: an unpaired chat hears nothing
// more of its work. An answer stored but not known delivered (in the
// outbox) goes back to its place in the inbox, and it and a notice that
// was being sent are marked Again: they are sent with MsgSentAgain, in
// the chat's order.
func (h *Hub) recoverInbox() error {
	return h.cfg.Store.Update(func(tx *store.Tx) error {
		n, err := tx.ReturnAnswers()
		if err != nil {
			return err
		}
		if n > 0 {
			h.log.Warn("sending again answers that may have been delivered before the restart", "answers", n)
		}
		var cut, again []store.Entry
		err = tx.ScanInbox(0, func(e store.Entry) bool {
			switch {
			case e.Kind == store.KindNotice && e.State == store.Running:
				again = append(again, e)
			case e.State == store.Running || e.State == store.Cut:
				cut = append(cut, e)
			}
			return true
		})
		if err != nil {
			return err
		}
		for _, e := range again {
			h.log.Warn("sending again a notice that may have been delivered before the restart", logkey.Gateway, e.Gateway, "seq", e.Seq)
			if err := tx.MarkAgain(e.Seq); err != nil {
				return err
			}
		}
		for _, e := range cut {
			if err := h.recoverCut(tx, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// recoverCut replaces e, a job the last process left running, in place,
// under its own number: what the chat sent after it (while it ran, or
// while latch was down) still comes after it — a /stop then stops the
// resumed turn, and a later message does not close the turn before it
// resumes.
func (h *Hub) recoverCut(tx *store.Tx, e store.Entry) error {
	l, err := tx.Latch(e.Gateway)
	if err != nil {
		return err
	}
	if !latchedTo(l, e) {
		h.log.Info("gateway unpaired; job cut by the restart dropped", logkey.Gateway, e.Gateway, "seq", e.Seq)
		return tx.DeleteInbox(e.Seq)
	}
	next := store.Entry{Seq: e.Seq, Kind: store.KindNotice, Gateway: e.Gateway, ChatID: e.ChatID, UserID: e.UserID,
		MessageID: e.MessageID, Text: MsgInterrupted + e.Text, Received: h.cfg.Now()}
	switch {
	case h.resumable(e):
		next.Kind, next.Text = store.KindResume, e.Text
		h.log.Warn("agent turn cut by a restart; resuming from its last step", logkey.Gateway, e.Gateway, "seq", e.Seq)
	case e.State == store.Running && isShellCommand(e):
		next.Text = MsgMayHaveRun + e.Text
		h.log.Warn("latch died while a command ran; not re-run", logkey.Gateway, e.Gateway, "seq", e.Seq)
	default:
		h.log.Warn("command interrupted by restart; not re-run", logkey.Gateway, e.Gateway, "seq", e.Seq)
	}
	return tx.ReplaceInbox(next)
}

// isShellCommand: e is a "!command" of the chat's.
func isShellCommand(e store.Entry) bool {
	return e.Kind == store.KindMessage && strings.HasPrefix(strings.TrimSpace(e.Text), "!")
}

// resumable: an agent turn (not a !command, not already a resumed one)
// with a model to continue it.
func (h *Hub) resumable(e store.Entry) bool {
	// A scheduled run is reported, never resumed: nobody asked for
	// it just now, and a run that goes on after a restart is one the
	// owner cannot tell from a second.
	if e.Kind != store.KindMessage || e.Job != 0 || h.cfg.Agent == nil || !h.cfg.Agent.Enabled() {
		return false
	}
	text := strings.TrimSpace(e.Text)
	name, _ := splitCommand(text)
	return !strings.HasPrefix(text, "!") && name == ""
}

// dispatchPending hands every not yet dispatched inbox entry to its chat.
func (h *Hub) dispatchPending(ctx context.Context) error {
	var entries []store.Entry
	err := h.cfg.Store.View(func(tx *store.Tx) error {
		return tx.ScanInbox(h.next, func(e store.Entry) bool {
			entries = append(entries, e)
			return len(entries) < 256
		})
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		h.next = e.Seq + 1
		h.dispatch(ctx, e)
	}
	h.startWorkers(ctx)
	if len(entries) == 256 {
		h.poke()
	}
	return nil
}

// dispatch routes one entry. Chat commands that must not wait behind a
// running job (/stop, /status, /help) are answered at once; everything
// else joins the chat's queue.
func (h *Hub) dispatch(ctx context.Context, e store.Entry) {
	if guarded(e) && !h.stillLatched(e) {
		h.finish(e, false)
		return
	}
	if e.Kind == store.KindMessage && e.State != store.Answered {
		if cb := decodeExtra(e).Callback; cb != nil {
			// Decided, then deleted: a crash between the two brings the
			// press back after the restart, where the decision is found
			// taken; the other order would lose a press made while latch
			// was down (which the agent keeps for the resumed turn).
			h.pressed(ctx, e, cb)
			h.finish(e, true)
			return
		}
		if reply, ok := h.immediate(e); ok {
			// It comes after the chat's open album, which takes no
			// more items (an entry that queues may join it instead:
			// enqueue decides). Only this loop adds to an album, so
			// nothing joins between /stop and this.
			h.endAlbumIn(chatKey{e.Gateway, e.ChatID})
			h.finish(e, true)
			h.goSend(ctx, e.Gateway, e.ChatID, Reply{Text: reply, ReplyTo: e.MessageID})
			return
		}
	}
	h.enqueue(ctx, e)
}

// stillLatched re-checks the chat lock at dispatch time, and again when the
// worker is about to start the entry: the gateway may have been unpaired
// since the message was stored, or while it waited behind a running job. A
// store error counts as "no": fail closed.
func (h *Hub) stillLatched(e store.Entry) bool {
	l, err := h.latch(e.Gateway)
	if err != nil {
		h.log.Error("reading latch failed; message dropped", logkey.Gateway, e.Gateway, logkey.Err, err)
		return false
	}
	return latchedTo(l, e)
}

func (h *Hub) latch(gateway string) (l *store.Latch, err error) {
	err = h.cfg.Store.View(func(tx *store.Tx) (err error) {
		l, err = tx.Latch(gateway)
		return err
	})
	return l, err
}

// latchedTo: l latches e's chat (and, in a group, e's sender).
func latchedTo(l *store.Latch, e store.Entry) bool {
	if l == nil || l.ChatID != e.ChatID {
		return false
	}
	return l.UserID == "" || l.UserID == e.UserID
}

// guarded: e runs on the latched chat's behalf, so the latch must still
// hold when it starts. A notice is latch's own reply and goes out anyway,
// unless it belongs to a scheduled job's run, which an unpaired chat
// hears nothing more of.
func guarded(e store.Entry) bool {
	return e.Kind == store.KindMessage || e.Kind == store.KindResume || e.Job != 0
}

// finish deletes a handled entry (and counts it when handled is true).
func (h *Hub) finish(e store.Entry, handled bool) {
	if err := h.cfg.Store.Update(func(tx *store.Tx) error { return finishTx(tx, e, handled) }); err != nil {
		h.log.Error("finishing inbox entry", "seq", e.Seq, logkey.Err, err)
	}
}

func finishTx(tx *store.Tx, e store.Entry, handled bool) error {
	if handled {
		if err := tx.Incr(e.Gateway, CounterHandled, 1); err != nil {
			return err
		}
	}
	return tx.DeleteInbox(e.Seq)
}

func (h *Hub) enqueue(ctx context.Context, e store.Entry) {
	key := chatKey{e.Gateway, e.ChatID}
	q := queued{e: e}
	if e.State != store.Answered { // done already: only its answer is owed
		q.j = h.jobFor(e)
	}
	if q.j != nil {
		q.j.e = e
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chats[key]
	if c == nil {
		c = &chat{key: key}
		h.chats[key] = c
	}
	if h.joinAlbum(c, e, q.j) {
		return // folded into the album's first entry before it runs
	}
	q.album = h.openAlbum(c, e, q.j)
	c.queue = append(c.queue, q)
	c.fresh++
	h.claim(ctx, c)
}

// startWorkers hands what a scan queued to the workers, once the whole
// scan is dispatched, and starts a worker for each chat with a queue and
// none. Not before: a /stop that came with its job — in one batch, or
// while latch was down — must find it not yet started, however fast a
// worker is and whether or not one was busy in that chat already.
func (h *Hub) startWorkers(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.chats {
		c.fresh = 0
		if !c.active && len(c.queue) > 0 {
			c.active = true
			h.workers.Add(1)
			go h.work(ctx, c)
		}
	}
}

// claim makes the first job in c's queue the chat's running job if it has
// none, under h.mu. It is called whenever the queue grows and whenever a
// job is done, so a job is claimed as soon as it is next — in the very
// step that queues it, if nothing else is running — and /stop reaches it
// from then on, not only once its work has begun. Nothing runs out of
// order: the worker still takes the queue front to back; a claimed job
// only waits for it.
func (h *Hub) claim(ctx context.Context, c *chat) {
	if c.running != nil {
		return
	}
	for _, q := range c.queue {
		if q.j != nil {
			q.j.ctx, q.j.cancel = context.WithCancel(ctx)
			q.j.out, q.j.mute = context.WithCancel(ctx)
			q.j.started = time.Now()
			c.running = q.j
			return
		}
	}
}

// work runs a chat's queue until it is empty, then retires. One worker per
// chat at most, so a chat's messages run in order.
func (h *Hub) work(ctx context.Context, c *chat) {
	defer h.workers.Done()
	for {
		h.mu.Lock()
		// Once Run is stopping nothing new starts: what is still queued
		// stays "received" in the inbox and runs after the restart.
		stopping := h.ctx != nil && h.ctx.Err() != nil
		if len(c.queue) == 0 || stopping || ctx.Err() != nil {
			h.retired(ctx, c)
			return
		}
		if len(c.queue) == c.fresh {
			// The scan being dispatched has the rest; startWorkers
			// starts a worker for it when that is done.
			c.active = false
			h.mu.Unlock()
			return
		}
		q := c.queue[0]
		c.queue = c.queue[1:]
		h.mu.Unlock()
		if q.album != nil {
			var back bool
			if q, back = h.awaitAlbum(ctx, c, q); back {
				continue // Run is stopping: q stays for the next start
			}
		}
		if guarded(q.e) && !h.stillLatched(q.e) {
			// Unpaired while it waited: the chat no longer controls
			// anything here, so the entry is dropped as dispatch drops
			// one, without a word to the chat.
			h.log.Info("gateway unpaired; queued entry dropped", logkey.Gateway, q.e.Gateway, "seq", q.e.Seq)
			h.finish(q.e, false)
		} else if q.e.State == store.Answered {
			h.deliverAnswer(ctx, nil, q.e) // stored by the last process
		} else {
			if q.j != nil {
				h.mu.Lock()
				q.j.working = true
				h.mu.Unlock()
			}
			h.handle(ctx, q.e, q.j)
		}
		if q.j != nil { // c.running: claim takes jobs in queue order
			q.j.cancel()
			q.j.mute()
			h.mu.Lock()
			c.running = nil
			h.claim(ctx, c)
			h.mu.Unlock()
		}
	}
}

// retired ends c's worker; h.mu is held, and released. A job /stop or an
// unpair stopped before it started is finished (see retire), with the
// items of its album folded into it first, so that they stop with it.
func (h *Hub) retired(ctx context.Context, c *chat) {
	stopped, dropped := h.retire(c)
	h.mu.Unlock()
	if stopped == nil {
		return
	}
	q := *stopped
	if q.album != nil {
		q = h.foldAlbum(c, q, q.album.items)
	}
	if dropped {
		h.finish(q.e, false)
	} else {
		h.stoppedBeforeStart(ctx, q.e)
	}
}

// retire ends c's worker, under h.mu. A job claimed but never started
// stays in the inbox as it is, for the next start — unless /stop or an
// unpair stopped it: that stands, so retire returns it for the caller to
// finish (silently and as not run, when dropped by an unpair) rather than
// leave it to run after the restart. An open album closes: its items
// stay in the inbox with its first, for the next start.
func (h *Hub) retire(c *chat) (stopped *queued, dropped bool) {
	if j := c.running; j != nil {
		for _, q := range c.queue {
			if q.j == j && (j.stopped || j.dropped) {
				stopped, dropped = &q, j.dropped
			}
		}
		j.cancel()
		j.mute()
	}
	if c.album != nil {
		h.closeAlbum(c, c.album)
	}
	c.running = nil
	c.active = false
	delete(h.chats, c.key)
	return stopped, dropped
}

// Unlatched stops the work of the chats gateway no longer answers; the
// daemon calls it once an unpair has committed. Their running job is
// cancelled as /stop cancels one (a command's processes are killed), but
// without a word to the chat, and their queued entries are dropped as not
// run. A chat the gateway is latched to by now keeps its work.
//
// The worker re-checks the latch before each entry as well; Unlatched is
// still needed: nothing else ends the running job, and what it drops
// cannot run even if the same chat is paired again before the worker
// would have got to it.
func (h *Hub) Unlatched(gateway string) {
	l, err := h.latch(gateway)
	if err != nil {
		// Fail closed: none of the gateway's work goes on.
		h.log.Error("reading latch failed; dropping the gateway's work", logkey.Gateway, gateway, logkey.Err, err)
		l = nil
	}
	var dropped []store.Entry
	h.mu.Lock()
	for key, c := range h.chats {
		if key.gateway != gateway {
			continue
		}
		if j := c.running; j != nil && !j.ended && !latchedTo(l, j.e) {
			j.dropped = true
			j.cancel()
			j.mute()
		}
		// fresh counts entries at the end of the queue, so it must
		// count only those of them that stay.
		kept, fresh := c.queue[:0], 0
		for i, q := range c.queue {
			// A claimed job stays: its worker finishes it (see
			// stoppedEarly and retire).
			if !guarded(q.e) || latchedTo(l, q.e) || (q.j != nil && q.j == c.running) {
				kept = append(kept, q)
				if i >= len(c.queue)-c.fresh {
					fresh++
				}
				continue
			}
			dropped = append(dropped, q.e)
			if q.album != nil { // its items go with it
				h.closeAlbum(c, q.album)
				dropped = append(dropped, q.album.items...)
			}
		}
		clear(c.queue[len(kept):])
		c.queue, c.fresh = kept, fresh
	}
	h.mu.Unlock()
	for _, e := range dropped {
		h.log.Info("gateway unpaired; queued entry dropped", logkey.Gateway, e.Gateway, "seq", e.Seq)
		h.finish(e, false)
	}
}

// goSend sends a reply without blocking the dispatch loop.
func (h *Hub) goSend(ctx context.Context, gateway, chatID string, r Reply) {
	h.workers.Add(1)
	go func() {
		defer h.workers.Done()
		h.send(ctx, gateway, chatID, r)
	}()
}

func (h *Hub) send(ctx context.Context, gateway, chatID string, r Reply) {
	if err := h.trySend(ctx, gateway, chatID, r); err != nil {
		h.log.Warn("sending reply failed", logkey.Gateway, gateway, logkey.Chat, chatID, logkey.Err, err)
	}
}

// errUnknownGateway: a reply for a gateway this Hub does not have (it was
// taken out of the configuration); trying again cannot help.
var errUnknownGateway = errors.New("reply for a gateway that is not configured")

// trySend sends a reply and says whether that worked.
func (h *Hub) trySend(ctx context.Context, gateway, chatID string, r Reply) error {
	g := h.gateways[gateway]
	if g == nil {
		return fmt.Errorf("%w: %q", errUnknownGateway, gateway)
	}
	_, err := g.Send(ctx, chatID, r)
	return err
}

// Notify sends text to a chat, best effort (announcements, unpair notices).
func (h *Hub) Notify(ctx context.Context, gateway, chatID, text string) error {
	g := h.gateways[gateway]
	if g == nil {
		return fmt.Errorf("notify: unknown gateway %q", gateway)
	}
	_, err := g.Send(ctx, chatID, Reply{Text: text})
	return err
}
