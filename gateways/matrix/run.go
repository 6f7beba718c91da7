package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
)

// filter is /sync's inline filter: no presence, no account data, the
// timeline of each room bounded.
const filter = `{"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]},` +
	`"room":{"timeline":{"limit":50},"account_data":{"not_types":["*"]},"ephemeral":{"not_types":["*"]}}}`

// errUnknownToken explains the exit: the token was revoked or logged out.
const unknownTokenHelp = "matrix: the homeserver no longer takes the access token (M_UNKNOWN_TOKEN: logged out or revoked); " +
	"log the bot in again and put the new token in [matrix] access_token_file"

// Run syncs until ctx ends. Each /sync's events are translated and handed
// to Sink.Ingest with the response's next_batch as the cursor, in one
// step; while Ingest fails the same batch is tried again, and the next
// /sync starts only after it stored. A token the homeserver no longer
// takes ends Run with ErrUnauthorized; the end of ctx ends it with nil.
func (g *Gateway) Run(ctx context.Context, sink adapter.Sink) error {
	err := g.run(ctx, sink)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (g *Gateway) run(ctx context.Context, sink adapter.Sink) error {
	if g.cli == nil {
		return errors.New(g.lastErr)
	}
	stored, err := sink.Cursor(ctx, g.Name())
	if err != nil {
		return err
	}
	cur := parseCursor(stored)
	g.mu.Lock()
	g.owner = cur.Owner
	g.mu.Unlock()
	bo := retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}
	for {
		resp, err := g.sync(ctx, cur.Batch)
		if err == nil && cur.Batch != "" {
			err = g.fillGaps(ctx, resp, cur)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			err = g.scrub(err)
			g.noteErr(err)
			if unauthorized(err) {
				return errors.Join(adapter.ErrUnauthorized, errors.New(unknownTokenHelp+": "+err.Error()))
			}
			wait, limited := rateLimited(err)
			if !limited {
				wait = bo.Next()
			}
			g.log.Warn("sync failed; trying again", "err", err, "retry_in", wait)
			if !retry.Sleep(ctx, wait) {
				return ctx.Err()
			}
			continue
		}
		bo.Reset()
		g.noteErr(nil)
		next := cur.clone()
		next.Batch = resp.NextBatch
		msgs := g.translate(ctx, resp, &next, cur.Batch == "")
		next.Owner = g.ownerNow()
		if !g.ingestRetrying(ctx, sink, &cur, next, msgs) {
			return ctx.Err()
		}
		g.answerInvites(ctx, resp)
		if e := g.crypto(); e != nil {
			e.afterSync(ctx, resp)
		}
	}
}

// sync makes one /sync, its long-poll bounded by SyncTimeout and the whole
// request by requestTimeout on top (a homeserver that hangs is given up).
func (g *Gateway) sync(ctx context.Context, since string) (*mautrix.RespSync, error) {
	timeout := g.cfg.SyncTimeout
	if since == "" {
		timeout = 0 // the first sync only finds where "now" is
	}
	g.mu.Lock()
	holding := len(g.held) > 0
	g.mu.Unlock()
	if holding && timeout > heldWait {
		// Events wait for their room key: the sync that tries them again
		// comes within heldWait, so one whose key never comes is refused
		// (and said) then, not after a quiet room's whole long-poll.
		timeout = heldWait
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+g.cfg.RequestTimeout)
	defer cancel()
	q := mautrix.ReqSync{Timeout: int(timeout / time.Millisecond), Since: since, FilterID: filter}
	var raw json.RawMessage
	_, err := g.cli.MakeFullRequest(ctx, mautrix.FullRequest{Method: http.MethodGet, MaxAttempts: 1, ResponseJSON: &raw,
		URL: g.cli.BuildURLWithQuery(mautrix.ClientURLPath{"v3", "sync"}, q.BuildQuery())})
	if err != nil {
		return nil, err
	}
	return parseEvents[mautrix.RespSync](raw, "sync")
}

// parseEvents reads a response holding lists of events (/sync,
// /messages). One malformed event (content that is not an object, say)
// must not make the whole response unreadable, or the same request would
// fail for ever: then the events that do not parse are dropped and the
// rest read again.
func parseEvents[T any](raw json.RawMessage, what string) (*T, error) {
	var resp T
	if err := json.Unmarshal(raw, &resp); err == nil {
		return &resp, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("the %s response is not JSON: %w", what, err)
	}
	dropBadEvents(v)
	clean, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var again T
	if err := json.Unmarshal(clean, &again); err != nil {
		return nil, fmt.Errorf("the %s response cannot be read: %w", what, err)
	}
	return &again, nil
}

// dropBadEvents removes, from every list of events in v ("events", and
// /messages' "chunk" and "state"), what does not
// parse as an event.
func dropBadEvents(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if list, ok := val.([]any); ok && (k == "events" || k == "chunk" || k == "state") {
				kept := list[:0]
				for _, e := range list {
					b, _ := json.Marshal(e)
					var evt event.Event
					if json.Unmarshal(b, &evt) == nil {
						kept = append(kept, e)
					}
				}
				x[k] = kept
				continue
			}
			dropBadEvents(val)
		}
	case []any:
		for _, e := range x {
			dropBadEvents(e)
		}
	}
}

// ingestRetrying stores msgs with the cursor next, trying again until it
// works or ctx ends; it reports whether it worked.
func (g *Gateway) ingestRetrying(ctx context.Context, sink adapter.Sink, cur *cursor, next cursor, msgs []adapter.Message) bool {
	if len(msgs) == 0 && next.encode() == cur.encode() {
		return true
	}
	ok := retry.Until(ctx, retry.Backoff{Min: g.cfg.MinBackoff, Max: g.cfg.MaxBackoff}, g.log, "storing messages failed",
		func() error { return sink.Ingest(ctx, g.Name(), next.encode(), msgs) })
	if ok {
		*cur = next
	}
	return ok
}

func (g *Gateway) ownerNow() owner {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.owner
}

func (g *Gateway) crypto() *e2ee {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.e2ee
}

// markOwner notes room as the latched one, its user the one latch last
// took a message from there (who sent /pair).
func (g *Gateway) markOwner(r id.RoomID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.owner.Room == r {
		return
	}
	o := owner{Room: r}
	if x := g.rooms[r]; x != nil {
		o.User = x.lastUser
	}
	g.owner = o
}
