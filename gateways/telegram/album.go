package telegram

import (
	"github.com/latchd/latch/gateways/adapter"
)

// Albums. Photos, videos or documents sent together share a
// media_group_id, and Telegram delivers each as an update of its own, the
// caption (the owner's question about them) usually on the first. Handed
// on one by one, the agent would answer the question having seen only the
// first file, and then get a turn for each other file with no question.
// So the items of an album that one getUpdates answer holds are merged
// into one message before they are stored.
//
// What cannot be merged here:
//   - an album split across two getUpdates answers: the first answer is
//     stored before the second is fetched (fetching it confirms the first
//     to Telegram, so holding the first back would risk losing it);
//   - an album delivered by webhook: each item is its own delivery, and
//     Telegram (max_connections 1) sends the next only once this one is
//     answered, which it may be only once the item is stored.
// Those carry the album in Message.Group, and the Hub folds them
// (gateways/album.go).

// maxAlbumItems is the most items Telegram puts in an album; a longer run
// with one media_group_id is not an album Telegram made and is not merged
// beyond it.
const maxAlbumItems = 10

// albumItem is a translated message and the album it belongs to ("": none).
type albumItem struct {
	msg   adapter.Message
	album string
	items int // how many messages were merged into msg
}

// mergeAlbums merges each item of an album into the message of the album's
// first item, when nothing else from the same chat came in between and the
// same person sent it: the merged message keeps the first item's ID (its
// answer threads to the album's first message, whose place the album has
// in the chat), time and sender; it gets every item's files in order and
// the captions, joined. The update ids are not touched: every merged
// update is confirmed and remembered as taken, as before.
func mergeAlbums(in []albumItem) []adapter.Message {
	var out []albumItem
	last := map[string]int{} // chat id → index in out of its last message
	for _, it := range in {
		it.items = 1
		j, seen := last[it.msg.ChatID]
		if seen && joins(out[j], it) {
			out[j] = merged(out[j], it)
			continue
		}
		out = append(out, it)
		last[it.msg.ChatID] = len(out) - 1
	}
	msgs := make([]adapter.Message, len(out))
	for i, it := range out {
		msgs[i] = it.msg
	}
	return msgs
}

// joins reports whether it is the next item of the album that a ends with.
func joins(a, it albumItem) bool {
	return it.album != "" && it.album == a.album && it.msg.UserID == a.msg.UserID &&
		it.msg.Callback == nil && a.items < maxAlbumItems
}

// merged is a with it added.
func merged(a, it albumItem) albumItem {
	files := make([]adapter.Attachment, 0, len(a.msg.Files)+len(it.msg.Files))
	a.msg.Files = append(append(files, a.msg.Files...), it.msg.Files...)
	a.msg.Text = adapter.JoinCaptions(a.msg.Text, it.msg.Text)
	a.items++
	return a
}
