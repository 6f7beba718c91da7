package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/logkey"
)

// allowedUpdates are the update types latch asks for, by polling and by
// webhook alike: translate handles no others.
func allowedUpdates() []string { return []string{"message", "callback_query"} }

const (
	maxBatch = 100
	// minEmptyPoll is the least time between two polls that brought
	// nothing, so a server that answers at once cannot make latch spin.
	minEmptyPoll = time.Second
)

// Run receives updates until ctx ends: by webhook when one is configured
// (see runWebhook), otherwise by long polling getUpdates. Each batch goes
// to sink.Ingest with a cursor of the next offset and the ids taken last
// (see seen); only once Ingest succeeds does the next poll confirm the
// batch to Telegram. Run returns nil when ctx ends and ErrUnauthorized if
// the token stops working; everything else is retried. While it runs, a
// change of the forum topic latch answers in is stored too (saveTopics).
func (g *Gateway) Run(ctx context.Context, sink adapter.Sink) error {
	if _, err := g.bot(ctx); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	var owned sync.WaitGroup // the topic saver and the menu request
	owned.Add(2)
	go func() {
		defer owned.Done()
		g.saveTopics(ctx, sink)
	}()
	go func() {
		defer owned.Done()
		g.setMenu(ctx)
	}()
	defer func() {
		stop()
		owned.Wait()
	}()
	if g.webhookMode() {
		if err := g.Restore(ctx, sink); err != nil {
			// The first delivery reads the cursor again.
			g.log.Warn("reading the stored forum topics failed", logkey.Err, err)
		}
		return g.runWebhook(ctx, sink)
	}
	p := &poller{g: g, sink: sink, backoff: g.newBackoff()}
	if !p.loadCursor(ctx) {
		return nil
	}
	for ctx.Err() == nil {
		if err := p.step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// poller is the state of one Run.
type poller struct {
	g       *Gateway
	sink    adapter.Sink
	offset  int  // next getUpdates offset; 0 = none yet
	recent  seen // the ids taken last, as stored with offset (see translate)
	backoff retry.Backoff
	// conflict is set during a run of 409 answers, so the warning is
	// logged once per episode.
	conflict bool
	// shrink is set after an undecodable answer: fetch one update at a time
	// until one decodes, so one bad update cannot block the rest.
	shrink bool
}

// loadCursor reads the stored offset (and the forum topics stored after
// it, see topicstate.go), retrying store errors. It returns false when
// ctx ended first.
func (p *poller) loadCursor(ctx context.Context) bool {
	bo := p.g.newBackoff()
	for {
		c, err := p.sink.Cursor(ctx, gatewayName)
		if err == nil {
			c, topics := splitCursor(c)
			p.g.restoreTopics(topics)
			p.offset = p.parseCursor(c)
			recent, ok := parseSeen(c)
			if p.offset > 0 && !ok {
				// Without the window a restart of the ids is still
				// found; only a repeat of the last batches is not.
				p.g.log.Warn("ignoring the invalid list of recent update ids in the stored cursor", "cursor", c)
			}
			p.recent = recent
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		d := bo.Next()
		p.g.log.Warn("reading the update cursor failed; retrying", logkey.Err, p.g.scrub(err), "retry_in", d)
		if !retry.Sleep(ctx, d) {
			return false
		}
	}
}

func (p *poller) parseCursor(c string) int {
	if c == "" {
		return 0
	}
	// A cursor left by webhook mode has a list after its offset (see seen).
	c, _, _ = strings.Cut(c, ";")
	n, err := strconv.Atoi(c)
	if err != nil || n <= 0 {
		// A non-positive offset would make Telegram drop updates; starting
		// without one re-reads whatever is still unconfirmed.
		p.g.log.Warn("ignoring an invalid stored update cursor", "cursor", c)
		return 0
	}
	return n
}

// step makes one getUpdates call and delivers what it brought. It returns
// an error only when polling cannot continue.
func (p *poller) step(ctx context.Context) error {
	start := time.Now()
	raws, err := p.fetch(ctx)
	if err != nil {
		return p.failed(ctx, err)
	}
	p.recovered()
	b := p.g.translate(raws, p.offset, p.recent)
	p.report(b)
	if len(b.ids) == 0 {
		retry.Sleep(ctx, minEmptyPoll-time.Since(start))
		return nil
	}
	p.deliver(ctx, b)
	return nil
}

// report logs what was unusual about a batch.
func (p *poller) report(b batch) {
	if b.restart {
		p.g.log.Warn("Telegram's update ids started again below the stored offset "+
			"(it does after a week without updates, or api_url now names another Bot API server); "+
			"continuing from the new ids",
			"offset", p.offset, "first_id", slices.Min(b.ids), "updates", len(b.ids))
	}
	if b.repeats > 0 {
		p.g.log.Info("getUpdates repeated updates already stored; dropped", "updates", b.repeats, "offset", p.offset)
	}
}

func (p *poller) fetch(ctx context.Context) ([]json.RawMessage, error) {
	limit := maxBatch
	if p.shrink {
		limit = 1
	}
	resp, err := p.g.request(ctx, tgbotapi.UpdateConfig{
		Offset:         p.offset,
		Limit:          limit,
		Timeout:        int((p.g.cfg.PollTimeout + time.Second - 1) / time.Second),
		AllowedUpdates: allowedUpdates(),
	})
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(resp.Result, &raws); err != nil {
		return nil, err
	}
	return raws, nil
}

// deliver hands a batch to the sink until it is stored or ctx ends. The
// same batch is retried: fetching again could skip it. The cursor stored
// with it names its ids, so that after a crash they are known as taken
// even where the offset alone could not tell (see translate).
func (p *poller) deliver(ctx context.Context, b batch) {
	recent := p.recent.withAll(b.ids)
	next := recent.ids[len(recent.ids)-1] + 1 // the batch's highest id + 1
	cursor := recent.encode()
	bo := p.g.newBackoff()
	for {
		err := p.g.ingest(ctx, p.sink, cursor, b.msgs)
		if err == nil {
			p.offset, p.recent = next, recent
			return
		}
		if ctx.Err() != nil {
			return
		}
		d := bo.Next()
		p.g.log.Warn("storing updates failed; retrying the same batch",
			logkey.Err, p.g.scrub(err), "messages", len(b.msgs), "retry_in", d)
		if !retry.Sleep(ctx, d) {
			return
		}
	}
}

// failed handles a getUpdates error: it waits as the error demands and
// returns non-nil only for an error retrying cannot fix.
func (p *poller) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	p.g.setStatus(err)
	var apiErr *tgbotapi.Error
	isAPI := errors.As(err, &apiErr)
	wait := p.backoff.Next()
	switch {
	case isAPI && apiErr.Code == http.StatusUnauthorized:
		p.g.log.Error("the Bot API rejected the token; polling stopped", logkey.Err, err)
		return ErrUnauthorized
	case isAPI && apiErr.Code == http.StatusTooManyRequests && apiErr.RetryAfter > 0:
		wait = time.Duration(apiErr.RetryAfter) * time.Second
		p.g.log.Warn("rate limited by the Bot API; waiting", "retry_after", wait)
	case isAPI && apiErr.Code == http.StatusConflict:
		if p.onConflict(ctx, apiErr, wait) {
			return nil // the webhook is gone: poll again at once
		}
	default:
		p.shrink = p.shrink || undecodable(err)
		p.g.log.Warn("getUpdates failed; retrying", logkey.Err, err, "retry_in", wait)
	}
	retry.Sleep(ctx, wait)
	return nil
}

// onConflict logs a 409 once per episode. A webhook (left by webhook mode,
// or set behind latch's back) is removed, and Start leaves that to this
// first 409 rather than sending deleteWebhook before every first poll: a
// start waits one Bot API round trip less. It reports whether to poll
// again at once: only after the first 409 of an episode whose webhook was
// deleted, so a webhook set again and again cannot make latch spin.
// Another poller can only be waited out.
func (p *poller) onConflict(ctx context.Context, apiErr *tgbotapi.Error, wait time.Duration) (now bool) {
	first := !p.conflict
	p.conflict = true
	if strings.Contains(apiErr.Message, "webhook") {
		if first {
			p.g.log.Warn("a webhook is set for this bot token (409 Conflict); deleting it and polling")
		}
		if _, err := p.g.request(ctx, tgbotapi.DeleteWebhookConfig{}); err != nil {
			p.g.log.Debug("deleteWebhook failed", logkey.Err, err)
			return false
		}
		return first
	}
	if first {
		p.g.log.Warn("another process is polling this bot token (409 Conflict); retrying")
		return false
	}
	p.g.log.Debug("still in conflict with another poller", "retry_in", wait)
	return false
}

// recovered resets the error state after a successful poll.
func (p *poller) recovered() {
	if p.conflict {
		p.g.log.Info("polling works again after 409 Conflict")
	}
	p.conflict, p.shrink = false, false
	p.backoff.Reset()
	p.g.setStatus(nil)
}

// undecodable reports whether err means the answer was not valid Bot API
// JSON (as opposed to a network or API error).
func undecodable(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syntax) || errors.As(err, &typ) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errResponseTooLarge)
}

// newBackoff is a back-off within the configured bounds.
func (g *Gateway) newBackoff() retry.Backoff {
	return retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}
}
