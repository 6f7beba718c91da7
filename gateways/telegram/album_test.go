package telegram

import (
	"slices"
	"strconv"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// TestRunMergesAlbum: the items of an album that one getUpdates answer
// holds become one message — the first item's id, every file, the caption
// — so the agent answers the question about all of them in one turn. Only
// items of the same album from the same sender with nothing of that chat
// in between merge, and every update is confirmed and remembered.
func TestRunMergesAlbum(t *testing.T) {
	srv := newFake(t)
	chat, bobs := telegramtest.Private(alice), telegramtest.Private(bob)
	f := make([]string, 6)
	for i := range f {
		f[i] = srv.AddFile(randomBytes(100+i), "f"+strconv.Itoa(i)+".pdf")
	}
	photo := func(i int) []telegramtest.PhotoSize { return []telegramtest.PhotoSize{srv.PhotoSizeOf(f[i], 800, 600)} }
	item := func(group string, i int, caption string) telegramtest.Incoming {
		return telegramtest.Incoming{Chat: chat, From: &alice, MediaGroupID: group, Photo: photo(i), Caption: caption}
	}
	var ids []int
	deliver := func(in telegramtest.Incoming) telegramtest.Delivered {
		d := srv.Deliver(in)
		ids = append(ids, d.UpdateID)
		return d
	}
	first := deliver(item("g1", 0, "which of these is sharpest?"))
	deliver(telegramtest.Incoming{Chat: bobs, From: &bob, Text: "hi"}) // another chat: no matter
	deliver(item("g1", 1, ""))
	doc := item("g1", 2, "")
	doc.Photo, doc.Document = nil, srv.DocumentOf(f[2])
	deliver(doc)
	second := deliver(item("g2", 3, ""))
	deliver(item("g2", 4, "and these?"))
	deliver(telegramtest.Incoming{Chat: chat, From: &alice, Text: "thanks"})
	third := deliver(item("g2", 5, "")) // after "thanks": not merged
	g, _ := started(t, srv)
	sink := &memSink{}
	stop := run(t, g, sink)
	last := ids[len(ids)-1]
	eventually(t, "the updates", func() bool { return sink.storedNext() == strconv.Itoa(last+1) })
	_ = stop()

	photoOf := func(i int) gateways.Attachment {
		return gateways.Attachment{ID: f[i], Size: int64(100 + i), Kind: "photo", MIME: "image/jpeg"}
	}
	docOf := gateways.Attachment{ID: f[2], Name: "f2.pdf", Size: 102, Kind: "document", MIME: "application/pdf"}
	want := []struct {
		id    int
		user  string
		text  string
		files []gateways.Attachment
		group string // what the Hub folds later items of the album by
	}{
		{first.MessageID, "1111", "which of these is sharpest?", []gateways.Attachment{photoOf(0), photoOf(1), docOf}, "0:g1"},
		{1, "2222", "hi", nil, ""},
		{second.MessageID, "1111", "and these?", []gateways.Attachment{photoOf(3), photoOf(4)}, "0:g2"},
		{third.MessageID - 1, "1111", "thanks", nil, ""},
		{third.MessageID, "1111", "", []gateways.Attachment{photoOf(5)}, "0:g2"},
	}
	msgs := sink.storedMsgs()
	if len(msgs) != len(want) {
		t.Fatalf("stored %d messages, want %d: %+v", len(msgs), len(want), msgs)
	}
	for i, w := range want {
		m := msgs[i]
		if m.ID != strconv.Itoa(w.id) || m.UserID != w.user || m.Text != w.text || !slices.Equal(m.Files, w.files) || m.Group != w.group {
			t.Errorf("message %d: id %s from %s, text %q, files %+v, group %q;\n want id %d from %s, text %q, files %+v, group %q",
				i, m.ID, m.UserID, m.Text, m.Files, m.Group, w.id, w.user, w.text, w.files, w.group)
		}
	}
	stored, ok := parseSeen(sink.storedCursor())
	for _, id := range ids {
		if !ok || !stored.has(id) {
			t.Errorf("update %d is not in the stored cursor %q: a merged item must still count as taken", id, sink.storedCursor())
		}
	}
}

// TestMergeAlbumsBounds: a run with one media_group_id longer than any
// album Telegram makes is not merged beyond one, and another sender's item
// with the same id is never merged into the first sender's message.
func TestMergeAlbumsBounds(t *testing.T) {
	var in []albumItem
	for i := range maxAlbumItems + 2 {
		in = append(in, albumItem{album: "0:g", msg: gateways.Message{ID: strconv.Itoa(i), ChatID: "-5", UserID: "1",
			Files: []gateways.Attachment{{ID: strconv.Itoa(i)}}}})
	}
	in = append(in, albumItem{album: "0:g", msg: gateways.Message{ID: "x", ChatID: "-5", UserID: "2", Files: []gateways.Attachment{{ID: "x"}}}})
	got := mergeAlbums(in)
	if len(got) != 3 || len(got[0].Files) != maxAlbumItems || len(got[1].Files) != 2 || got[2].UserID != "2" {
		t.Errorf("merged into %d messages of %d, %d files (last from %s); want %d, 2 and another sender's apart",
			len(got), len(got[0].Files), len(got[min(1, len(got)-1)].Files), got[len(got)-1].UserID, maxAlbumItems)
	}
}
