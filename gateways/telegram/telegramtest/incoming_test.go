package telegramtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// TestIncomingMedia: what a user sends besides text and the four original
// file kinds reaches the bot as the Bot API serialises it, with what
// Telegram adds (an animation's document, a venue's location), and the
// files behind it can be fetched.
func TestIncomingMedia(t *testing.T) {
	srv := newServer(t)
	chat := telegramtest.Private(alice)
	clip := srv.AddFile([]byte("mp4 bytes"), "clip.mp4")
	gif := srv.AddFile([]byte("gif as mp4"), "funny.mp4")
	round := srv.AddFile([]byte("round"), "")
	sticker := srv.AddFile([]byte("RIFF webp"), "")
	in := []telegramtest.Incoming{
		{Chat: chat, From: &alice, Video: srv.VideoOf(clip), Caption: "what is this?"},
		{Chat: chat, From: &alice, VideoNote: srv.VideoNoteOf(round)},
		{Chat: chat, From: &alice, Animation: srv.AnimationOf(gif)},
		{Chat: chat, From: &alice, Sticker: srv.StickerOf(sticker, "👍")},
		{Chat: chat, From: &alice, Venue: &telegramtest.Venue{Location: telegramtest.Location{Latitude: 48.8584, Longitude: 2.2945}, Title: "Eiffel Tower", Address: "Paris"}},
		{Chat: chat, From: &alice, Contact: &telegramtest.Contact{PhoneNumber: "+33 1 23", FirstName: "Bob"}},
		{Chat: chat, From: &alice, Poll: &telegramtest.Poll{ID: "p1", Question: "Lunch?", Options: []telegramtest.PollOption{{Text: "yes"}, {Text: "no"}}, Type: "regular"}},
		{Chat: chat, From: &alice, Dice: &telegramtest.Dice{Emoji: "🎲", Value: 4}},
	}
	for _, m := range in {
		srv.Deliver(m)
	}
	album := srv.DeliverAlbum(
		telegramtest.Incoming{Chat: chat, From: &alice, Photo: []telegramtest.PhotoSize{srv.PhotoSizeOf(sticker, 90, 90)}, Caption: "which?"},
		telegramtest.Incoming{Chat: chat, From: &alice, Photo: []telegramtest.PhotoSize{srv.PhotoSizeOf(round, 90, 90)}},
	)
	other := srv.DeliverAlbum(telegramtest.Incoming{Chat: chat, From: &alice, Document: srv.DocumentOf(clip)})
	bot := newBot(t, srv)
	ups, err := bot.GetUpdates(tgbotapi.UpdateConfig{})
	if err != nil || len(ups) != len(in)+3 {
		t.Fatalf("getUpdates = %d updates, %v; want %d", len(ups), err, len(in)+3)
	}
	m := func(i int) *tgbotapi.Message { return ups[i].Message }
	if v := m(0).Video; v == nil || v.FileID != clip || v.FileName != "clip.mp4" || v.MimeType != "video/mp4" || m(0).Caption != "what is this?" {
		t.Errorf("video message: %+v", m(0))
	}
	if v := m(1).VideoNote; v == nil || v.FileID != round || v.Length == 0 {
		t.Errorf("video note message: %+v", m(1))
	}
	if a, d := m(2).Animation, m(2).Document; a == nil || d == nil || a.FileID != gif || d.FileID != gif {
		t.Errorf("animation message: animation %+v, document %+v; want both, of the same file", a, d)
	}
	if s := m(3).Sticker; s == nil || s.FileID != sticker || s.Emoji != "👍" {
		t.Errorf("sticker message: %+v", m(3))
	}
	if v, l := m(4).Venue, m(4).Location; v == nil || l == nil || v.Title != "Eiffel Tower" || l.Latitude != 48.8584 {
		t.Errorf("venue message: venue %+v, location %+v; want both", v, l)
	}
	if c := m(5).Contact; c == nil || c.PhoneNumber != "+33 1 23" {
		t.Errorf("contact message: %+v", m(5))
	}
	if p := m(6).Poll; p == nil || p.Question != "Lunch?" || len(p.Options) != 2 {
		t.Errorf("poll message: %+v", m(6))
	}
	if d := m(7).Dice; d == nil || d.Value != 4 {
		t.Errorf("dice message: %+v", m(7))
	}
	a1, a2, a3 := m(8), m(9), m(10)
	if a1.MediaGroupID == "" || a1.MediaGroupID != a2.MediaGroupID || a3.MediaGroupID == a1.MediaGroupID ||
		a1.Caption != "which?" || a2.Caption != "" || a1.MessageID != album[0].MessageID || a3.MessageID != other[0].MessageID {
		t.Errorf("albums: %q %q %q, captions %q %q; want the first two in one, the third apart, the caption on the first",
			a1.MediaGroupID, a2.MediaGroupID, a3.MediaGroupID, a1.Caption, a2.Caption)
	}
	f, err := bot.GetFile(tgbotapi.FileConfig{FileID: m(1).VideoNote.FileID})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fetch(t, srv, f.FilePath), []byte("round")) {
		t.Errorf("the video note's file does not download as sent")
	}
}

// TestIncomingStory: a forwarded story, which the library predates,
// arrives as Telegram sends it.
func TestIncomingStory(t *testing.T) {
	srv := newServer(t)
	chat := telegramtest.Private(alice)
	srv.Deliver(telegramtest.Incoming{Chat: chat, From: &alice, Story: &telegramtest.Story{Chat: telegramtest.Private(bob), ID: 7}})
	raws := rawUpdates(t, srv)
	if len(raws) != 1 || !strings.Contains(string(raws[0]), `"story":{"chat":{"id":2222`) {
		t.Errorf("updates %s, want one with the story", raws)
	}
}

// fetch downloads a file path from the file route.
func fetch(t *testing.T, srv *telegramtest.Server, path string) []byte {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/file/bot" + token + "/" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawUpdates is what getUpdates answers, update by update, unconfirmed.
func rawUpdates(t *testing.T, srv *telegramtest.Server) []json.RawMessage {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/bot" + token + "/getUpdates")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got.Result
}
