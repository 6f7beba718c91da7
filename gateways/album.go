package gateways

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// Albums. Some platforms deliver the items of an album (photos or files
// sent together, the caption usually on the first) as separate messages,
// and an adapter cannot always merge them: a webhook delivers each item on
// its own and each must be stored before the next comes. Run one by one,
// the agent would answer the caption having seen only the first file, and
// then get a turn for each other file with no question. So the Hub folds
// them: an entry with a Group and files opens an album in its chat, later
// items of the same chat, user and Group join it instead of queuing, and
// the chat's worker, once the entry is next, waits for the album to go
// quiet (albumQuiet after its last item, at most albumMax after its
// first) before the turn starts.
//
// Order and /stop come first: anything else the chat sends (text, a
// command, /stop, another album) closes the album at once, so nothing
// joins it from behind a later message; and the entry's job is claimed as
// any other, so /stop ends the wait and stops the whole album. Only the
// chat's own worker waits: other chats, and entries without a Group, are
// not delayed at all.
//
// Folding is one store transaction: the first entry is rewritten to carry
// every item's files and caption, and the other items are deleted. A crash
// before it leaves every item "received", and the next start folds (or
// runs) them then; after it there is one entry. Either way no item runs
// twice and none is lost. At shutdown the album is folded and left for the
// next start, as any job not started is.

// Album timing and size. The quiet window covers the gap Telegram leaves
// between the items of one album; the cap bounds how long a turn waits.
const (
	defaultAlbumQuiet = 1500 * time.Millisecond
	defaultAlbumMax   = 5 * time.Second
	// maxAlbumFiles is the most files folded into one turn (an album
	// holds at most 10).
	maxAlbumFiles = 10
)

// album is the album a chat's last queued entry opened; under h.mu.
type album struct {
	group, user string
	// items are the entries that joined, in order; they are not queued.
	items       []store.Entry
	files       int
	first, last time.Time // when the first and the last item was received
	closed      bool
	done        chan struct{} // closed with closed
}

// albumGroup is the album e opens or joins, or "" when e is no album item:
// a message with files and a Group that would go to the agent with its
// files (a job, no "!" command).
func albumGroup(e store.Entry, j *job) (group string, files int) {
	if e.Kind != store.KindMessage || j == nil || strings.HasPrefix(strings.TrimSpace(e.Text), "!") {
		return "", 0
	}
	x := decodeExtra(e)
	if x.Callback != nil || len(x.Files) == 0 {
		return "", 0
	}
	return x.Group, len(x.Files)
}

// joinAlbum adds e to c's open album if it is the album's next item, under
// h.mu. Otherwise it closes the album: e comes after it.
func (h *Hub) joinAlbum(c *chat, e store.Entry, j *job) bool {
	a := c.album
	if a == nil {
		return false
	}
	group, files := albumGroup(e, j)
	if group == "" || group != a.group || e.UserID != a.user || a.files+files > maxAlbumFiles {
		h.closeAlbum(c, a)
		return false
	}
	a.items = append(a.items, e)
	a.files += files
	a.last = e.Received
	if a.files == maxAlbumFiles {
		h.closeAlbum(c, a)
	}
	return true
}

// openAlbum makes e, about to be queued in c, the first item of an album
// if it is one, under h.mu.
func (h *Hub) openAlbum(c *chat, e store.Entry, j *job) *album {
	group, files := albumGroup(e, j)
	if group == "" || files >= maxAlbumFiles {
		return nil
	}
	c.album = &album{group: group, user: e.UserID, files: files, first: e.Received, last: e.Received, done: make(chan struct{})}
	return c.album
}

// closeAlbum lets nothing more join a, under h.mu.
func (h *Hub) closeAlbum(c *chat, a *album) {
	if c.album == a {
		c.album = nil
	}
	if !a.closed {
		a.closed = true
		close(a.done)
	}
}

// endAlbumIn closes the open album of a chat, if any: a message answered
// at once came after it.
func (h *Hub) endAlbumIn(key chatKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.chats[key]; c != nil && c.album != nil {
		h.closeAlbum(c, c.album)
	}
}

// awaitAlbum is the worker's, for an album's first entry q, taken from
// the queue: it waits for the album to close or go quiet, then folds it.
// back is true when Run is stopping: q is put back at the front of the
// queue, folded, for the worker to leave in the inbox as any job not
// started.
func (h *Hub) awaitAlbum(ctx context.Context, c *chat, q queued) (_ queued, back bool) {
	stopping := !h.albumQuiet(ctx, q.album, q.j)
	h.mu.Lock()
	h.closeAlbum(c, q.album)
	items := q.album.items
	h.mu.Unlock()
	q = h.foldAlbum(c, q, items)
	q.album = nil
	if stopping && q.j.ctx.Err() == nil {
		h.mu.Lock()
		c.queue = append([]queued{q}, c.queue...)
		h.mu.Unlock()
		return q, true
	}
	return q, false
}

// albumQuiet waits until a is closed, has been quiet long enough, or j is
// stopped. It returns false if Run is stopping first.
func (h *Hub) albumQuiet(ctx context.Context, a *album, j *job) bool {
	h.mu.Lock()
	run := h.ctx // Run's: set before any worker starts
	h.mu.Unlock()
	for {
		h.mu.Lock()
		closed := a.closed
		deadline := minTime(a.last.Add(h.albumWait), a.first.Add(h.albumMax))
		h.mu.Unlock()
		now := h.cfg.Now()
		if closed || j.ctx.Err() != nil || !now.Before(deadline) {
			return true
		}
		select {
		case <-a.done:
		case <-j.ctx.Done():
		case <-h.after(deadline.Sub(now)):
		case <-ctx.Done():
			return j.ctx.Err() != nil
		case <-run.Done():
			return j.ctx.Err() != nil
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// foldAlbum folds items into q's entry (see fold). If the store fails, the
// items are queued after it instead, each its own job: split, but each run
// once.
func (h *Hub) foldAlbum(c *chat, q queued, items []store.Entry) queued {
	if len(items) == 0 {
		return q
	}
	merged, err := h.fold(q.e, items)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.log.Error("folding an album failed; its items run one by one", logkey.Gateway, q.e.Gateway, "seq", q.e.Seq, logkey.Err, err)
		back := make([]queued, len(items))
		for i, e := range items {
			back[i] = queued{e: e, j: h.jobFor(e)}
			if back[i].j != nil {
				back[i].j.e = e
			}
		}
		c.queue = append(back, c.queue...)
		return q
	}
	q.e, q.j.e = merged, merged
	q.j.text = cmp.Or(merged.Text, q.j.text) // what /stop and /status quote
	return q
}

// fold rewrites head to carry every item's files and caption and deletes
// the items, in one transaction, and returns the rewritten entry. Each
// item is counted as handled: it was a message of the chat's.
func (h *Hub) fold(head store.Entry, items []store.Entry) (store.Entry, error) {
	merged := head
	x := decodeExtra(head)
	for _, e := range items {
		merged.Text = JoinCaptions(merged.Text, e.Text)
		x.Files = append(x.Files, decodeExtra(e).Files...)
	}
	merged.Extra = x.encode()
	err := h.cfg.Store.Update(func(tx *store.Tx) error {
		for _, e := range items {
			if err := finishTx(tx, e, true); err != nil {
				return err
			}
		}
		return tx.ReplaceInbox(merged)
	})
	return merged, err
}
