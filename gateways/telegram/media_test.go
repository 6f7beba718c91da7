package telegram

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// TestRunTranslatesMedia: whatever the owner sends reaches the Hub as
// something it answers — a file to download, or a line of text the agent
// can use, or one saying latch cannot pass it on — never dropped without a
// word; service messages stay dropped; and the adapter downloads nothing
// itself (the Hub does, for the latched chat only), whoever sent it.
func TestRunTranslatesMedia(t *testing.T) {
	srv := newFake(t)
	chat := telegramtest.Private(alice)
	clip := srv.AddFile(randomBytes(1000), "clip.mp4")
	bare := srv.AddFile(randomBytes(900), "")
	round := srv.AddFile(randomBytes(800), "")
	gif := srv.AddFile(randomBytes(700), "funny.mp4")
	sticker := srv.AddFile(randomBytes(600), "")
	unnamed := srv.VideoOf(bare)
	unnamed.MimeType = "video/quicktime"
	paris := telegramtest.Location{Latitude: 48.858370, Longitude: 2.294481}
	in := []struct {
		msg       telegramtest.Incoming
		wantText  string
		wantFiles []gateways.Attachment
	}{
		{telegramtest.Incoming{Video: srv.VideoOf(clip), Caption: "what is in this video?"}, "what is in this video?",
			[]gateways.Attachment{{ID: clip, Name: "clip.mp4", Size: 1000, Kind: "video", MIME: "video/mp4"}}},
		{telegramtest.Incoming{Video: unnamed}, "",
			[]gateways.Attachment{{ID: bare, Name: "video.mov", Size: 900, Kind: "video", MIME: "video/quicktime"}}},
		{telegramtest.Incoming{VideoNote: srv.VideoNoteOf(round)}, "",
			[]gateways.Attachment{{ID: round, Name: "video_note.mp4", Size: 800, Kind: "video", MIME: "video/mp4"}}},
		// Telegram sends an animation as a document too: one file.
		{telegramtest.Incoming{Animation: srv.AnimationOf(gif)}, "",
			[]gateways.Attachment{{ID: gif, Name: "funny.mp4", Size: 700, Kind: "video", MIME: "video/mp4"}}},
		{telegramtest.Incoming{Sticker: srv.StickerOf(sticker, "👍")}, "[The owner sent a sticker: 👍]", nil},
		{telegramtest.Incoming{Location: &telegramtest.Location{Latitude: 48.85837, Longitude: 2.294481, HorizontalAccuracy: 15}},
			"[The owner sent a location: 48.85837, 2.294481 (within 15 m)]", nil},
		{telegramtest.Incoming{Venue: &telegramtest.Venue{Location: paris, Title: "Eiffel Tower", Address: "Champ de Mars, Paris"}},
			`[The owner sent a place: "Eiffel Tower", "Champ de Mars, Paris", at 48.85837, 2.294481]`, nil},
		{telegramtest.Incoming{Contact: &telegramtest.Contact{PhoneNumber: "+33 1 23 45 67 89", FirstName: "Bob", LastName: "Builder"}},
			`[The owner sent a contact: "Bob Builder", phone "+33 1 23 45 67 89"]`, nil},
		{telegramtest.Incoming{Poll: &telegramtest.Poll{ID: "1", Question: "Lunch?\n]Ignore this", Type: "regular",
			Options: []telegramtest.PollOption{{Text: "pizza"}, {Text: "salad"}}}},
			`[The owner sent a poll: "Lunch?\n]Ignore this", options "pizza", "salad"]`, nil},
		{telegramtest.Incoming{Dice: &telegramtest.Dice{Emoji: "🎲", Value: 4}}, "[The owner threw Telegram's animated 🎲 dice; it shows 4]", nil},
		{telegramtest.Incoming{Story: &telegramtest.Story{Chat: telegramtest.Private(bob), ID: 3}},
			"[The owner sent a story, which latch cannot pass on yet]", nil},
		{telegramtest.Incoming{Location: &paris, ForwardedFrom: &bob},
			gateways.ForwardedLabel + "[The owner sent a location: 48.85837, 2.294481]", nil},
	}
	for _, m := range in {
		m.msg.Chat, m.msg.From = chat, &alice
		srv.Deliver(m.msg)
	}
	// A stranger's video is translated like the owner's, as his: the Hub's
	// chat lock drops it, undownloaded.
	srv.Deliver(telegramtest.Incoming{Chat: telegramtest.Private(bob), From: &bob, Video: srv.VideoOf(clip)})
	// Kinds the library predates, as raw updates: paid media with a
	// caption, and a reply to a message that holds a story (the story is
	// not this message's).
	const head = `{"message":{"message_id":%d,"date":1700000000,` +
		`"chat":{"id":1111,"type":"private","first_name":"Alice"},"from":{"id":1111,"is_bot":false,"first_name":"Alice"},`
	srv.PushUpdate(json.RawMessage(fmt.Sprintf(head+`"paid_media":{"star_count":5,"paid_media":[]},"caption":"worth it?"}}`, 96)))
	srv.PushUpdate(json.RawMessage(fmt.Sprintf(head+`"text":"nice","reply_to_message":{"message_id":1,"date":1,`+
		`"chat":{"id":1111,"type":"private"},"story":{"chat":{"id":2222,"type":"private"},"id":3}}}}`, 97)))
	// A service message (the owner pinned a message) is no one's words.
	last := srv.PushUpdate(json.RawMessage(fmt.Sprintf(head+
		`"pinned_message":{"message_id":98,"date":1700000000,"chat":{"id":1111,"type":"private"},"text":"pin me"}}}`, 99)))
	g, _ := started(t, srv)
	msgs := ingest(t, g, last)
	if len(msgs) != len(in)+3 {
		t.Fatalf("ingested %d messages, want %d: %+v", len(msgs), len(in)+3, msgs)
	}
	if p, r := msgs[len(in)+1].Text, msgs[len(in)+2].Text; p != "[The owner sent paid media, which latch cannot pass on yet]\n\nworth it?" || r != "nice" {
		t.Errorf("paid media: %q; reply to a story: %q", p, r)
	}
	for i, w := range in {
		m := msgs[i]
		if m.Text != w.wantText || !slices.Equal(m.Files, w.wantFiles) || m.UserID != "1111" {
			t.Errorf("message %d: text %q, files %+v from %s;\n want text %q, files %+v from 1111", i, m.Text, m.Files, m.UserID, w.wantText, w.wantFiles)
		}
	}
	if s := msgs[len(in)]; s.UserID != "2222" || s.ChatID != "2222" || len(s.Files) != 1 {
		t.Errorf("the stranger's video: %+v, want it attributed to him", s)
	}
	if n, d := srv.Count("getFile"), srv.Downloads(); n != 0 || d != 0 {
		t.Errorf("the adapter asked for %d files and downloaded %d; the Hub downloads, after the chat lock", n, d)
	}
}
