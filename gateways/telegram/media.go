package telegram

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/latchd/latch/gateways/adapter"
)

// What the owner may send besides text, and what becomes of it:
//
//   - files the agent can use (document, photo, voice, audio, video, video
//     note, animation) become attachments, which the Hub downloads into
//     the workspace once the chat lock has let the message through;
//   - content that is its own description (a sticker's emoji, a location,
//     a venue, a contact, a poll, a dice) becomes a line of text the agent
//     can act on: "[The owner sent a location: 48.8584, 2.2945]";
//   - content latch cannot pass on (a story, paid media, a game, …)
//     becomes a line saying so, which the agent — or without a model the
//     Hub's reply — answers, rather than the message vanishing unanswered.
//
// Service messages (a member joined, a message was pinned, the auto-delete
// timer changed…) are nobody's words to answer and stay dropped: hence a
// list of the content Telegram defines rather than "anything else".

// maxNoteField bounds one value quoted into a note (a poll option, a
// contact's name). Telegram's own limits are lower; this only keeps a
// malformed update from making the note unbounded.
const maxNoteField = 512

// attachments lists the files of a message. Of a photo's sizes only the
// largest is kept. Telegram gives video notes, and often videos and
// animations, no file name; they get one after the format Telegram keeps
// them in, so the file saved in the workspace has the right extension.
func attachments(m *tgbotapi.Message) []adapter.Attachment {
	var out []adapter.Attachment
	add := func(a adapter.Attachment) {
		if a.ID == "" || len(a.ID) > maxIDBytes {
			return
		}
		a.Name = clip(a.Name, maxFileNameLen)
		if len(a.MIME) > maxMIMEBytes {
			a.MIME = ""
		}
		out = append(out, a)
	}
	// For clients that predate animations, Telegram sends an animation as
	// a document too (the same file): it is taken once, as the animation.
	if d := m.Document; d != nil && (m.Animation == nil || m.Animation.FileID != d.FileID) {
		add(adapter.Attachment{ID: d.FileID, Name: d.FileName, Size: int64(d.FileSize), Kind: "document", MIME: d.MimeType})
	}
	if p, ok := largest(m.Photo); ok {
		add(adapter.Attachment{ID: p.FileID, Size: int64(p.FileSize), Kind: "photo", MIME: "image/jpeg"})
	}
	if v := m.Voice; v != nil {
		add(adapter.Attachment{ID: v.FileID, Size: int64(v.FileSize), Kind: "voice", MIME: v.MimeType, Seconds: v.Duration})
	}
	if a := m.Audio; a != nil {
		add(adapter.Attachment{ID: a.FileID, Name: a.FileName, Size: int64(a.FileSize), Kind: "audio", MIME: a.MimeType, Seconds: a.Duration})
	}
	if v := m.Video; v != nil {
		add(adapter.Attachment{ID: v.FileID, Name: videoName(v.FileName, "video", v.MimeType), Size: int64(v.FileSize), Kind: "video", MIME: v.MimeType})
	}
	if v := m.VideoNote; v != nil {
		// A round video message: always MP4, never named.
		add(adapter.Attachment{ID: v.FileID, Name: "video_note.mp4", Size: int64(v.FileSize), Kind: "video", MIME: "video/mp4"})
	}
	if a := m.Animation; a != nil {
		name, mimeType := a.FileName, a.MimeType
		if d := m.Document; d != nil && d.FileID == a.FileID {
			name, mimeType = cmp.Or(name, d.FileName), cmp.Or(mimeType, d.MimeType)
		}
		// A GIF, which Telegram keeps as a silent MP4 video.
		add(adapter.Attachment{ID: a.FileID, Name: videoName(name, "animation", mimeType), Size: int64(a.FileSize), Kind: "video", MIME: mimeType})
	}
	return out
}

// videoName is a video's file name: as sent, or base plus the extension of
// its MIME type (MP4, Telegram's format, when that says nothing).
func videoName(name, base, mimeType string) string {
	if name != "" {
		return name
	}
	switch strings.ToLower(mimeType) {
	case "video/quicktime":
		return base + ".mov"
	case "video/webm":
		return base + ".webm"
	case "video/x-matroska":
		return base + ".mkv"
	case "image/gif":
		return base + ".gif"
	}
	return base + ".mp4"
}

// largest picks the photo size with the most pixels (then bytes).
func largest(sizes []tgbotapi.PhotoSize) (tgbotapi.PhotoSize, bool) {
	best, ok := tgbotapi.PhotoSize{}, false
	for _, p := range sizes {
		if p.FileID == "" {
			continue
		}
		if !ok || p.Width*p.Height > best.Width*best.Height ||
			p.Width*p.Height == best.Width*best.Height && p.FileSize > best.FileSize {
			best, ok = p, true
		}
	}
	return best, ok
}

// notes describes, one line each, what a message carries that is neither
// text nor a file (see the top of this file). raw is the update, for the
// kinds the library predates.
func notes(m *tgbotapi.Message, raw []byte) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, "["+fmt.Sprintf(format, args...)+"]") }
	if s := m.Sticker; s != nil {
		// The emoji is what a sticker says. The picture itself — often an
		// animation (.tgs, .webm) no model can look at — is not fetched:
		// a reaction is not a file the owner means to keep.
		if e := clip(s.Emoji, 32); e != "" {
			add("The owner sent a sticker: %s", e)
		} else {
			add("The owner sent a sticker")
		}
	}
	switch {
	case m.Venue != nil:
		// A venue carries its location in location too.
		v := m.Venue
		add("The owner sent a place: %q, %q, at %s", field(v.Title), field(v.Address), coords(v.Location))
	case m.Location != nil:
		l := *m.Location
		extra := ""
		if l.HorizontalAccuracy > 0 {
			extra += fmt.Sprintf(" (within %s m)", strconv.FormatFloat(l.HorizontalAccuracy, 'f', -1, 64))
		}
		if l.LivePeriod > 0 {
			extra += " (live location: later moves are not passed on)"
		}
		add("The owner sent a location: %s%s", coords(l), extra)
	}
	if c := m.Contact; c != nil {
		add("The owner sent a contact: %q, phone %q", field(strings.TrimSpace(c.FirstName+" "+c.LastName)), field(c.PhoneNumber))
	}
	if p := m.Poll; p != nil {
		opts := make([]string, 0, len(p.Options))
		for _, o := range p.Options {
			opts = append(opts, strconv.Quote(field(o.Text)))
		}
		add("The owner sent a poll: %q, options %s", field(p.Question), strings.Join(opts, ", "))
	}
	if d := m.Dice; d != nil {
		add("The owner threw Telegram's animated %s dice; it shows %d", clip(d.Emoji, 32), d.Value)
	}
	if g := m.Game; g != nil {
		add("The owner sent a game, %q, which latch cannot pass on", field(g.Title))
	}
	for _, kind := range unreadable(raw) {
		add("The owner sent %s, which latch cannot pass on yet", kind)
	}
	return out
}

// coords is a location as "latitude, longitude", as precise as it came.
func coords(l tgbotapi.Location) string {
	return strconv.FormatFloat(l.Latitude, 'f', -1, 64) + ", " + strconv.FormatFloat(l.Longitude, 'f', -1, 64)
}

// field bounds a value taken into a note.
func field(s string) string { return clip(s, maxNoteField) }

// unreadableKinds are the contents of a message, newer than the library,
// that latch cannot pass on, keyed by their field in the Bot API's Message,
// with how a note names them.
var unreadableKinds = []struct{ key, name string }{
	{"story", "a story"},
	{"paid_media", "paid media"},
	{"checklist", "a checklist"},
	{"giveaway", "a giveaway"},
	{"giveaway_winners", "the winners of a giveaway"},
	{"invoice", "an invoice"},
}

// unreadable lists what of unreadableKinds the update's message carries.
// The cheap search spares the decode for nearly every update; the decode
// reads only the message's own fields, not those of a message it quotes.
func unreadable(raw []byte) []string {
	found := false
	for _, k := range unreadableKinds {
		found = found || bytes.Contains(raw, []byte(`"`+k.key+`"`))
	}
	if !found {
		return nil
	}
	var u struct {
		Message map[string]json.RawMessage `json:"message"`
	}
	if json.Unmarshal(raw, &u) != nil {
		return nil
	}
	var out []string
	for _, k := range unreadableKinds {
		if v, ok := u.Message[k.key]; ok && string(v) != "null" {
			out = append(out, k.name)
		}
	}
	return out
}
