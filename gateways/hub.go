package gateways

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
)

// Counter names kept per gateway in the store.
const (
	CounterHandled   = "handled"
	CounterStrangers = "strangers_dropped"
	CounterFailed    = "failed_attempts"
)

// Replies sent by the guard. The failure text is the same for every
// reason a code can be refused.
const (
	// MsgPairFailed is the one answer to a failed attempt, at most one per
	// chat per failWindow (SECURITY.md, "wrong-code feedback"). It names
	// every reason a code can fail without saying which, so it tells a
	// stranger nothing about any code.
	MsgPairFailed = "That code is not valid: a code works once, within its time, and five wrong tries burn it. " +
		"Mint a new one on the machine with `latch pair` and send it here. " +
		"Tries from this chat in the next 10 seconds get no answer."
	MsgPaired = "Paired. This chat now controls latch on this machine:\n" +
		"  plain text  goes to the agent (the model and its tools)\n" +
		"  !<command>  runs a shell command\n  /status  /stop  /help"
)

// Shell runs one command for the latched chat and returns the text to show
// (output and a summary line). It must stop everything it started when ctx
// ends.
type Shell func(ctx context.Context, command string) string

// Config wires a Hub.
type Config struct {
	Store    *store.DB
	Pairer   *pairing.Pairer
	Gateways []Gateway
	// AllowGroups lists gateways whose group chats may pair.
	AllowGroups map[string]bool
	Shell       Shell
	// Agent answers plain text; nil or disabled means no model.
	Agent Agent
	// Files keeps files sent from the chat; nil refuses them.
	Files FileStore
	// Jobs answers /every, /at, /jobs and /cancel; nil: no scheduler.
	Jobs Jobs
	// Transcribe transcribes voice notes and audio files for the agent;
	// nil: they are only saved.
	Transcribe *Transcription
	// Heartbeat, when set, is called from the dispatch loop itself every
	// HeartbeatEvery: a wedged loop stops calling it (systemd's watchdog).
	Heartbeat      func()
	HeartbeatEvery time.Duration
	// Escaped, when set, lists what commands left running outside the
	// daemon's reach, for /status.
	Escaped func() []string
	// ShutdownGrace is how long running jobs may finish after Run's
	// context ends before they are stopped.
	ShutdownGrace time.Duration
	// StopNow, when closed during the shutdown grace, ends it at once
	// (a second Ctrl-C): running jobs are stopped as when the grace runs
	// out, so the next start reports them as interrupted.
	StopNow <-chan struct{}
	Log     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Hub is the one dispatcher of a daemon: it guards what the gateways
// ingest, stores it, and runs it in order per chat.
type Hub struct {
	cfg      Config
	log      *slog.Logger
	gateways map[string]Gateway
	limiter  *replyLimiter
	strays   *replyLimiter // rate-limits stranger audit events
	wake     chan struct{}

	// noticeWait is the first wait before a failed notice is sent again
	// (0: a second; tests shorten it).
	noticeWait time.Duration
	// albumWait and albumMax time an album's wait (see album.go); after
	// is its timer. Tests change them.
	albumWait, albumMax time.Duration
	after               func(time.Duration) <-chan time.Time

	mu      sync.Mutex
	chats   map[chatKey]*chat
	next    uint64 // first inbox seq not yet dispatched
	ctx     context.Context
	workers sync.WaitGroup

	// early are the "typing…" requests Ingest starts (see typeEarly),
	// under earlyCtx: Run's end cancels it and waits for them, and none
	// start after that.
	earlyMu     sync.Mutex
	earlyDone   bool
	early       sync.WaitGroup
	earlyCtx    context.Context
	earlyCancel context.CancelFunc

	// ingestMu orders Ingest's commits and the storing of what is held,
	// so that a cursor stored is never older than one stored before it.
	// It is held across write transactions, so it must never be waited
	// for inside one: a commit that grows the file waits for every read
	// transaction to end. Readers of held take heldMu alone.
	ingestMu sync.Mutex
	// holding is true while Run runs: only then may Ingest hold back a
	// batch of strangers' messages (see Ingest), because only Run stores
	// what is held, within holdFor and once more when it ends. Under
	// ingestMu.
	holding bool
	heldMu  sync.Mutex
	held    map[string]heldBatches // by gateway; written under both locks
	// heldWake tells Run that something is held and must be stored.
	heldWake chan struct{}
}

// failWindow is the attempt window: a chat gets at most one answer to its
// failed pairing attempts per window (MsgPairFailed says so).
const failWindow = 10 * time.Second

// holdFor is how long strangers' counts and the cursor past them may stay
// in memory before Run stores them.
const holdFor = time.Second

// heldBatches are batches of strangers' messages that Ingest counted but
// did not store: how many messages, and the cursor past the last batch.
type heldBatches struct {
	strangers uint64
	cursor    string
}

type chatKey struct{ gateway, chatID string }

// NewHub returns a Hub for cfg.
func NewHub(cfg Config) *Hub {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{
		cfg:       cfg,
		log:       cfg.Log,
		gateways:  make(map[string]Gateway),
		limiter:   newReplyLimiter(failWindow, 4096),
		strays:    newReplyLimiter(time.Minute, 64),
		wake:      make(chan struct{}, 1),
		heldWake:  make(chan struct{}, 1),
		held:      make(map[string]heldBatches),
		chats:     make(map[chatKey]*chat),
		albumWait: defaultAlbumQuiet,
		albumMax:  defaultAlbumMax,
		after:     time.After,
	}
	h.earlyCtx, h.earlyCancel = context.WithCancel(context.Background())
	for _, g := range cfg.Gateways {
		h.gateways[g.Name()] = g
	}
	return h
}

// Cursor implements Sink. A cursor held in memory (see Ingest) is newer
// than the stored one.
func (h *Hub) Cursor(ctx context.Context, gateway string) (string, error) {
	h.heldMu.Lock()
	b, ok := h.held[gateway]
	h.heldMu.Unlock()
	if ok {
		return b.cursor, nil
	}
	var c string
	err := h.cfg.Store.View(func(tx *store.Tx) (err error) {
		c, err = tx.Cursor(gateway)
		return err
	})
	return c, err
}

// Ingest implements Sink: in one transaction it applies the guard to every
// message, stores what passes, redeems pairing attempts, counts the rest and
// advances the cursor. If anything fails nothing is stored and the cursor
// stays, so the gateway retries the batch: the guard fails closed.
//
// "typing…" for the owner's work goes out before Ingest waits for anything
// (typeEarly): not after the commit, nor after another writer's — a turn
// saving, the held count being stored — which holds the store's one write
// lock meanwhile. A read of the latch decides it; a chat this very batch
// latches gets its "typing…" in the transaction. It promises only that the
// message will be handled, which holds either way: a batch that fails to
// commit is not confirmed to the platform, which delivers it again.
//
// While Run runs, a batch of nothing but strangers' messages (a flood, a
// spam bot) is not committed: the guard drops them either way, so all
// there is to store is a count and the cursor past them, and committing
// that for every batch would put two disk syncs between the owner and each
// of their messages. Ingest keeps both in memory instead; the next commit
// takes them along, or Run stores them within holdFor. A crash loses at
// most that count, and the gateway starts from the older cursor: for
// Telegram the messages past it were confirmed already and do not come
// again, and whatever does come again is strangers' and dropped again.
// Nothing of the owner's is held, so nothing of theirs is lost or run
// twice.
func (h *Hub) Ingest(ctx context.Context, gateway, cursor string, msgs []Message) error {
	typed, _ := h.preview(gateway, msgs)
	h.typeEarly(gateway, typed)
	h.ingestMu.Lock()
	defer h.ingestMu.Unlock()
	// Looked at again under the lock: a batch held now must be strangers'
	// by the latch no other Ingest can change meanwhile.
	if _, only := h.preview(gateway, msgs); h.holding && only {
		h.heldMu.Lock()
		b := h.held[gateway]
		b.strangers += uint64(len(msgs))
		b.cursor = cursor
		first := len(h.held) == 0
		h.held[gateway] = b
		h.heldMu.Unlock()
		if first {
			select {
			case h.heldWake <- struct{}{}:
			default:
			}
		}
		return nil
	}
	now := h.cfg.Now()
	stored := 0
	h.heldMu.Lock()
	held := h.held[gateway]
	h.heldMu.Unlock()
	err := h.cfg.Store.Update(func(tx *store.Tx) error {
		stored = 0
		l, err := tx.Latch(gateway)
		if err != nil {
			return err
		}
		swap, err := replacing(tx, gateway, now)
		if err != nil {
			return err
		}
		strangers, failed := held.strangers, uint64(0)
		var working []string // chats whose message starts a job
		for _, m := range msgs {
			m.Gateway = gateway
			switch classify(l, m, h.cfg.AllowGroups[gateway], swap) {
			case accept:
				if _, err := tx.AppendInbox(entryFor(m, now)); err != nil {
					return err
				}
				stored++
				working = addWorking(working, m)
			case attempt:
				nl, ok, err := h.redeem(tx, m, now)
				if err != nil {
					return err
				}
				if nl != nil {
					l = nl
				}
				if !ok {
					failed++
				}
				stored++
			default:
				strangers++
			}
		}
		h.typeEarly(gateway, slices.DeleteFunc(working, func(c string) bool { return slices.Contains(typed, c) }))
		if err := h.count(tx, gateway, strangers, failed, now); err != nil {
			return err
		}
		return tx.SetCursor(gateway, cursor)
	})
	if err != nil {
		h.log.Error("ingest failed; messages dropped for now and retried later", logkey.Gateway, gateway, logkey.Err, err)
		return fmt.Errorf("ingest: %w", err)
	}
	h.heldMu.Lock()
	delete(h.held, gateway)
	h.heldMu.Unlock()
	if stored > 0 {
		h.poke()
		handOver() // Run dispatches the stored messages
	}
	return nil
}

// preview applies the guard to a batch as the latch stands now, in a read
// transaction: the chats where a message starts a job of the owner's, and
// whether the guard would drop every message. A latch that cannot be read
// gives neither: no "typing…", nothing held.
func (h *Hub) preview(gateway string, msgs []Message) (working []string, strangersOnly bool) {
	err := h.cfg.Store.View(func(tx *store.Tx) error {
		l, err := tx.Latch(gateway)
		if err != nil {
			return err
		}
		swap, err := replacing(tx, gateway, h.cfg.Now())
		if err != nil {
			return err
		}
		strangersOnly = true
		for _, m := range msgs {
			m.Gateway = gateway
			switch classify(l, m, h.cfg.AllowGroups[gateway], swap) {
			case drop:
			case accept:
				strangersOnly = false
				working = addWorking(working, m)
			default:
				strangersOnly = false
			}
		}
		return nil
	})
	if err != nil {
		return nil, false
	}
	return working, strangersOnly
}

// addWorking adds m's chat to chats if m starts a job there.
func addWorking(chats []string, m Message) []string {
	if queues(m) && !slices.Contains(chats, m.ChatID) {
		return append(chats, m.ChatID)
	}
	return chats
}

// storeHeld commits what Ingest held back: the strangers' counts and the
// cursors past them. Callers hold ingestMu, so held cannot grow meanwhile.
func (h *Hub) storeHeld() error {
	h.heldMu.Lock()
	held := maps.Clone(h.held)
	h.heldMu.Unlock()
	if len(held) == 0 {
		return nil
	}
	now := h.cfg.Now()
	err := h.cfg.Store.Update(func(tx *store.Tx) error {
		for gateway, b := range held {
			if err := h.count(tx, gateway, b.strangers, 0, now); err != nil {
				return err
			}
			if err := tx.SetCursor(gateway, b.cursor); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store strangers' counts and cursors: %w", err)
	}
	h.heldMu.Lock()
	clear(h.held)
	h.heldMu.Unlock()
	return nil
}

// HeldStrangers is how many strangers' messages Ingest counted for a
// gateway that are not in the store's counter yet. It does not wait for a
// commit, so it may be called inside a store transaction.
func (h *Hub) HeldStrangers(gateway string) uint64 {
	h.heldMu.Lock()
	defer h.heldMu.Unlock()
	return h.held[gateway].strangers
}

// hold lets Ingest hold back strangers' batches, or stops it and stores
// what it held; Run calls it at its start and end.
func (h *Hub) hold(on bool) {
	h.ingestMu.Lock()
	defer h.ingestMu.Unlock()
	h.holding = on
	if on {
		return
	}
	if err := h.storeHeld(); err != nil {
		h.log.Warn("could not store the strangers' count at shutdown", logkey.Err, err)
	}
}

// storeHeldNow is Run's: it stores what is held and reports whether it
// must try again.
func (h *Hub) storeHeldNow() (again bool) {
	h.ingestMu.Lock()
	defer h.ingestMu.Unlock()
	if err := h.storeHeld(); err != nil {
		h.log.Warn("could not store the strangers' count; trying again", logkey.Err, err)
		return true
	}
	return false
}

// queues reports whether an accepted message becomes a job (a command, a
// turn, files) rather than a button press or a command answered at once.
func queues(m Message) bool {
	if m.Callback != nil {
		return false
	}
	name, _ := splitCommand(m.Text)
	return name == "" || name == "new"
}

// typer is a gateway that can show "typing…" in a chat.
type typer interface {
	Typing(ctx context.Context, chatID string)
}

// typeEarly shows "typing…" in each chat, in goroutines of the Hub's that
// Run waits for; after Run has returned it does nothing. Not under
// Ingest's context: a webhook's ends with its response, which the commit
// may send before the request is out. It hands its thread to them before
// it returns (handOver), so the requests are out before the caller goes on
// to the commit.
func (h *Hub) typeEarly(gateway string, chats []string) {
	t, ok := h.gateways[gateway].(typer)
	if !ok || len(chats) == 0 {
		return
	}
	if h.startTyping(t, chats) {
		handOver()
	}
}

// startTyping starts typeEarly's goroutines, unless Run has returned.
func (h *Hub) startTyping(t typer, chats []string) (started bool) {
	h.earlyMu.Lock()
	defer h.earlyMu.Unlock()
	if h.earlyDone {
		return false
	}
	for _, chatID := range chats {
		h.early.Add(1)
		go func() {
			defer h.early.Done()
			ctx, cancel := context.WithTimeout(h.earlyCtx, earlyTypingTimeout)
			defer cancel()
			t.Typing(ctx, chatID)
		}()
	}
	return true
}

// handOver lets the goroutines the caller has just made ready run now, on
// the caller's thread, and the caller go on after them. Without it a new
// goroutine waits until the caller blocks, or until another of the
// runtime's threads wakes up and takes it: on the bench's two vCPUs that
// wait was 0.13–0.18 ms, for "typing…" behind Ingest's commit and for Run's
// dispatch behind the poller's next request (bench/README.md, "Typing
// p50"). What the caller does next — a commit, the next long poll — loses
// as much time as the goroutine takes to block on its request, and
// nothing waits for it.
func handOver() { runtime.Gosched() }

// earlyTypingTimeout bounds one of typeEarly's requests.
const earlyTypingTimeout = 10 * time.Second

// stopEarly stops typeEarly's goroutines, waits for them and lets no new
// one start.
func (h *Hub) stopEarly() {
	h.earlyMu.Lock()
	h.earlyDone = true
	h.earlyMu.Unlock()
	h.earlyCancel()
	h.early.Wait()
}

func entryFor(m Message, now time.Time) store.Entry {
	return store.Entry{
		Kind: store.KindMessage, Gateway: m.Gateway, ChatID: m.ChatID, UserID: m.UserID,
		MessageID: m.ID, Text: m.Text, Received: now, Extra: encodeExtra(m),
	}
}

// redeem handles one pairing attempt inside the ingest transaction. ok is
// false for a failed attempt. The reply is queued as a notice in the same
// transaction so it survives a crash.
//
// While a gateway is latched a right code files a request for the owner's
// approval instead (pairing's rule): the chat is told it waits, and every
// latched chat gets the request. A failed attempt on a latched gateway (one
// whose --replace code is pending) is answered with silence, as every
// stranger there is.
func (h *Hub) redeem(tx *store.Tx, m Message, now time.Time) (l *store.Latch, ok bool, err error) {
	code, _ := pairArgument(m.Text)
	chat := pairing.Chat{ID: m.ChatID, Type: string(m.ChatType), Name: m.ChatName, UserID: m.UserID, UserName: m.UserName}
	latched, err := tx.Latch(m.Gateway)
	if err != nil {
		return nil, false, err
	}
	res, err := h.cfg.Pairer.Redeem(tx, m.Gateway, code, chat)
	notice := store.Entry{Kind: store.KindNotice, Gateway: m.Gateway, ChatID: m.ChatID, MessageID: m.ID, Received: now}
	switch {
	case err == nil && res.Request != nil:
		h.log.Warn("pairing code redeemed; the latch waits for the owner's approval in a latched chat",
			logkey.Gateway, m.Gateway, logkey.Chat, m.ChatID, "name", m.ChatName)
		return nil, true, requested(tx, m, res.Request, now)
	case err == nil:
		h.log.Info("gateway latched", logkey.Gateway, m.Gateway, logkey.Chat, m.ChatID, "name", m.ChatName)
		notice.Text = MsgPaired
	case errors.Is(err, pairing.ErrNoApprover):
		h.log.Warn("pairing code redeemed, but no latched chat is left to approve it; spent", logkey.Gateway, m.Gateway, logkey.Chat, m.ChatID)
		notice.Text = MsgNoApprover
	case errors.Is(err, pairing.ErrInvalidCode):
		h.log.Warn("pairing attempt failed", logkey.Gateway, m.Gateway, logkey.Chat, m.ChatID)
		if latched != nil || !h.limiter.allow(m.Gateway+"/"+m.ChatID, now) {
			return nil, false, nil
		}
		notice.Text = MsgPairFailed
		notice.Extra = extra{Markdown: true}.encode()
	default:
		return nil, false, err
	}
	if _, err := tx.AppendInbox(notice); err != nil {
		return nil, false, err
	}
	return res.Latch, err == nil, nil
}

// count records dropped strangers and failed attempts: constant space in
// the counters, and at most one audit event a minute per gateway.
func (h *Hub) count(tx *store.Tx, gateway string, strangers, failed uint64, now time.Time) error {
	if strangers > 0 {
		if err := tx.Incr(gateway, CounterStrangers, strangers); err != nil {
			return err
		}
		if h.strays.allow(gateway, now) {
			ev := store.Event{Time: now, Gateway: gateway, Kind: "strangers_dropped", Detail: fmt.Sprint(strangers)}
			if err := tx.Audit(ev); err != nil {
				return err
			}
		}
	}
	if failed > 0 {
		return tx.Incr(gateway, CounterFailed, failed)
	}
	return nil
}

func (h *Hub) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Running reports how many jobs run for a gateway now.
func (h *Hub) Running(gateway string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for k, c := range h.chats {
		if k.gateway == gateway && c.running != nil {
			n++
		}
	}
	return n
}
