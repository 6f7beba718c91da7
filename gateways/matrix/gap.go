package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
)

// A gap's back-fill reads at most maxGapPages pages of gapPage events:
// far more than the owner writes while latch is down, and a bound on what
// one room can make latch read.
const (
	gapPage     = 100
	maxGapPages = 10
)

// fillGaps back-fills the rooms latch acts on whose timeline came back
// limited (more events than the filter's limit since the last sync): the
// events before the served ones, back to the previous sync (since) or an
// event already taken, are read with /messages and put before them, so
// they are handed to Sink.Ingest with the same next_batch. Strangers'
// rooms are not read. A transient error fails the whole sync (it is made
// again, the cursor unmoved); a room whose history the homeserver
// refuses is skipped with a warning.
func (g *Gateway) fillGaps(ctx context.Context, resp *mautrix.RespSync, cur cursor) error {
	for rid, jr := range resp.Rooms.Join {
		if jr == nil || !jr.Timeline.Limited || jr.Timeline.PrevBatch == "" || !g.actsOn(rid) {
			continue
		}
		older, err := g.backfill(ctx, rid, jr.Timeline.PrevBatch, cur)
		if errors.Is(err, adapter.ErrRejected) {
			g.log.Warn("reading a room's missed events was refused; the older ones are not taken", "chat", string(rid), "err", err)
			continue
		}
		if err != nil {
			return err
		}
		jr.Timeline.Events = append(older, jr.Timeline.Events...)
	}
	return nil
}

// actsOn reports whether latch reads a room's missed events: the latched
// room, or before the latch a room latch joined on invite (where /pair
// may be waiting).
func (g *Gateway) actsOn(rid id.RoomID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.owner.Room != "" {
		return rid == g.owner.Room
	}
	r := g.rooms[rid]
	return r != nil && r.inviter != ""
}

// backfill pages back from prev (the timeline's prev_batch) to cur's
// batch, and returns the events oldest first.
func (g *Gateway) backfill(ctx context.Context, rid id.RoomID, prev string, cur cursor) ([]*event.Event, error) {
	var got []*event.Event
	from := prev
	for range maxGapPages {
		page, err := g.messages(ctx, rid, from, cur.Batch)
		if err != nil {
			return nil, err
		}
		for _, evt := range page.Chunk {
			if evt == nil {
				continue
			}
			if evt.ID != "" && cur.seen(evt.ID) {
				page.End = "" // taken before: the gap ends here
				break
			}
			got = append(got, evt)
		}
		if page.End == "" || len(page.Chunk) == 0 {
			slices.Reverse(got)
			return got, nil
		}
		from = page.End
	}
	g.log.Warn("more missed events in a room than latch reads back; the oldest are not taken", "chat", string(rid), "read", len(got))
	slices.Reverse(got)
	return got, nil
}

// messages reads one page of a room's events back from from, stopping at
// to.
func (g *Gateway) messages(ctx context.Context, rid id.RoomID, from, to string) (*mautrix.RespMessages, error) {
	q := map[string]string{"dir": "b", "from": from, "limit": strconv.Itoa(gapPage)}
	if to != "" {
		q["to"] = to
	}
	var raw json.RawMessage
	err := g.call(ctx, func(ctx context.Context) error {
		_, err := g.cli.MakeFullRequest(ctx, mautrix.FullRequest{Method: http.MethodGet, MaxAttempts: 1, ResponseJSON: &raw,
			URL: g.cli.BuildURLWithQuery(mautrix.ClientURLPath{"v3", "rooms", rid, "messages"}, q)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return parseEvents[mautrix.RespMessages](raw, "messages")
}
