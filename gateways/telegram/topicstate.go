package telegram

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latchd/latch/gateways/adapter"
	"github.com/latchd/latch/gateways/internal/retry"
	"github.com/latchd/latch/logkey"
)

// The forum topic latch last answered in, per chat, outlives a restart: it
// is part of the cursor the gateway stores through the Sink. Otherwise a
// notice recovered from the inbox, or one about a mint or an unpair done
// while latch was down, would go to General — refused if General is closed
// — instead of the topic the owner uses.
//
// The stored cursor is the update ids (see seen) and, once latch has
// answered in a topic, "|" and the topics, least recently answered first:
//
//	1043;1000-1042|-1001234567890@7,-1009876543210@12
//
// A cursor without "|" (every cursor stored before) reads as no topics.
//
// Only latch's own answers move a chat's topic (replyTarget, and a post
// that had to go elsewhere), never an update as it comes in, and once a
// chat is latched the Hub answers nobody in it but the owner: a stranger
// posting in another topic moves nothing.
//
// Every write of the cursor takes the topics as they are then, under
// cursorMu, so that no write is older than the one before it: Run's
// batches, and Run's saver (saveTopics), which stores a change of topic
// between batches through an Ingest of no messages.

// maxTopicChats bounds the chats whose topic is remembered, in memory and
// in the cursor. A latched gateway answers one chat; the others are
// strangers' pairing attempts from before it was latched.
const maxTopicChats = 16

// topicSep separates the update ids from the topics in the cursor.
const topicSep = "|"

// topicStoreTimeout bounds the saver's last write when Run stops.
const topicStoreTimeout = 5 * time.Second

// topicBook is the forum topic latch last answered in, per chat, for at
// most maxTopicChats chats: past that the least recently answered chat is
// forgotten. A chat not in it gets General.
type topicBook struct {
	entries []chatTopic // least recently answered first
	changes uint64      // counts the changes, so a writer can tell what it stored
}

type chatTopic struct {
	chat  int64
	topic int
}

func (b *topicBook) get(chat int64) int {
	if i := b.index(chat); i >= 0 {
		return b.entries[i].topic
	}
	return 0
}

func (b *topicBook) index(chat int64) int {
	return slices.IndexFunc(b.entries, func(e chatTopic) bool { return e.chat == chat })
}

// set records that latch answered in a chat's topic (0: General, which
// forgets the chat) and reports whether that changed what is stored.
func (b *topicBook) set(chat int64, topic int) bool {
	i := b.index(chat)
	switch {
	case topic == 0 && i < 0:
		return false
	case topic == 0:
		b.entries = slices.Delete(b.entries, i, i+1)
	case i >= 0 && i == len(b.entries)-1 && b.entries[i].topic == topic:
		return false
	default:
		if i >= 0 {
			b.entries = slices.Delete(b.entries, i, i+1)
		}
		b.entries = append(b.entries, chatTopic{chat, topic})
		if n := len(b.entries); n > maxTopicChats {
			b.entries = slices.Delete(b.entries, 0, n-maxTopicChats)
		}
	}
	b.changes++
	return true
}

// under puts stored entries under b's: b's are more recent.
func (b *topicBook) under(stored topicBook) {
	var older []chatTopic
	for _, e := range stored.entries {
		if b.index(e.chat) < 0 {
			older = append(older, e)
		}
	}
	b.entries = append(older, b.entries...)
	if n := len(b.entries); n > maxTopicChats {
		b.entries = slices.Delete(b.entries, 0, n-maxTopicChats)
	}
}

// encode is the topics part of the cursor: "chat@topic,…", or "".
func (b *topicBook) encode() string {
	var s strings.Builder
	for i, e := range b.entries {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(strconv.FormatInt(e.chat, 10))
		s.WriteByte('@')
		s.WriteString(strconv.Itoa(e.topic))
	}
	return s.String()
}

// parseTopics reads what encode wrote; ok is false for anything else.
func parseTopics(s string) (b topicBook, ok bool) {
	if s == "" {
		return topicBook{}, true
	}
	for part := range strings.SplitSeq(s, ",") {
		c, t, found := strings.Cut(part, "@")
		chat, err := strconv.ParseInt(c, 10, 64)
		if !found || err != nil || chat == 0 {
			return topicBook{}, false
		}
		topic, err := strconv.Atoi(t)
		if err != nil || topic <= 0 || topic > maxMessageID {
			return topicBook{}, false
		}
		b.set(chat, topic)
	}
	b.changes = 0
	return b, true
}

// splitCursor parts a stored cursor into the update ids (see seen) and
// the topics.
func splitCursor(c string) (seenPart, topicsPart string) {
	seenPart, topicsPart, _ = strings.Cut(c, topicSep)
	return seenPart, topicsPart
}

// Restore reads the forum topics stored in the cursor, once per Gateway,
// so that a post that names no message goes to the topic latch last
// answered in from the first. Run reads them too, but the Hub may post
// before Run has got that far: the daemon calls Restore after Start and
// before the Hub dispatches. An error leaves them to Run.
func (g *Gateway) Restore(ctx context.Context, sink adapter.Sink) error {
	g.mu.Lock()
	read := g.topicsRead
	g.mu.Unlock()
	if read {
		return nil
	}
	c, err := sink.Cursor(ctx, gatewayName)
	if err != nil {
		return fmt.Errorf("telegram: read the cursor: %w", g.scrub(err))
	}
	_, topics := splitCursor(c)
	g.restoreTopics(topics)
	return nil
}

// restoreTopics takes the topics part of a stored cursor, the first time
// one is read; later reads are older than what latch learned since.
func (g *Gateway) restoreTopics(s string) {
	stored, ok := parseTopics(s)
	if !ok {
		g.log.Warn("ignoring the invalid forum topics in the stored cursor; notices go to General until latch answers in a topic", "topics", s)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.topicsRead {
		return
	}
	g.topicsRead = true
	g.topics.under(stored)
}

// setTopic records that latch posted in a target: it becomes where what
// names no message goes in its chat. A change wakes Run's saver.
func (g *Gateway) setTopic(to target) {
	g.mu.Lock()
	changed := g.topics.set(to.chat, to.topic)
	g.mu.Unlock()
	if changed {
		select {
		case g.topicsChanged <- struct{}{}:
		default:
		}
	}
}

// ingest stores a batch with a cursor of the update ids seenPart and the
// topics as they are now. Every write of the cursor goes through here or
// storeTopics, under cursorMu.
func (g *Gateway) ingest(ctx context.Context, sink adapter.Sink, seenPart string, msgs []adapter.Message) error {
	g.cursorMu.Lock()
	defer g.cursorMu.Unlock()
	return g.ingestLocked(ctx, sink, seenPart, msgs)
}

// ingestLocked is ingest for callers that hold cursorMu.
func (g *Gateway) ingestLocked(ctx context.Context, sink adapter.Sink, seenPart string, msgs []adapter.Message) error {
	g.mu.Lock()
	cursor, changes := seenPart, g.topics.changes
	if topics := g.topics.encode(); topics != "" {
		cursor += topicSep + topics
	}
	g.mu.Unlock()
	if err := sink.Ingest(ctx, gatewayName, cursor, msgs); err != nil {
		return err
	}
	g.mu.Lock()
	g.topicsStored = changes
	g.mu.Unlock()
	return nil
}

// storeTopics stores the topics if they changed since they were last
// stored, with the update ids of the stored cursor. The cursor is read
// under cursorMu, so it is the last one written, and the topics in it
// first, if they were not yet: they must not be written over unread.
func (g *Gateway) storeTopics(ctx context.Context, sink adapter.Sink) error {
	g.cursorMu.Lock()
	defer g.cursorMu.Unlock()
	g.mu.Lock()
	current := g.topicsRead && g.topics.changes == g.topicsStored
	g.mu.Unlock()
	if current {
		return nil
	}
	c, err := sink.Cursor(ctx, gatewayName)
	if err != nil {
		return fmt.Errorf("read the cursor: %w", err)
	}
	seenPart, topics := splitCursor(c)
	g.restoreTopics(topics)
	g.mu.Lock()
	changed := g.topics.changes != g.topicsStored
	g.mu.Unlock()
	if !changed {
		return nil
	}
	return g.ingestLocked(ctx, sink, seenPart, nil)
}

// saveTopics is Run's saver: it stores the topics whenever they change,
// until ctx ends, and tries once more then.
func (g *Gateway) saveTopics(ctx context.Context, sink adapter.Sink) {
	bo := g.newBackoff()
	for {
		select {
		case <-ctx.Done():
			g.storeTopicsLast(ctx, sink)
			return
		case <-g.topicsChanged:
		}
		for {
			err := g.storeTopics(ctx, sink)
			if err == nil || ctx.Err() != nil {
				bo.Reset()
				break
			}
			d := bo.Next()
			g.log.Warn("storing the forum topics failed; retrying", logkey.Err, g.scrub(err), "retry_in", d)
			if !retry.Sleep(ctx, d) {
				break
			}
		}
	}
}

// storeTopicsLast is the saver's last try, once Run's ctx has ended: a
// change made just before a stop is not lost to it.
func (g *Gateway) storeTopicsLast(ctx context.Context, sink adapter.Sink) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), topicStoreTimeout)
	defer cancel()
	if err := g.storeTopics(ctx, sink); err != nil {
		g.log.Warn("storing the forum topics at shutdown failed", logkey.Err, g.scrub(err))
	}
}
