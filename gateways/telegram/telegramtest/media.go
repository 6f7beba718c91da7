package telegramtest

import (
	"strconv"
)

// Video is a video file.
type Video struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	Duration     int    `json:"duration"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Animation is a GIF or a silent H.264 video. As on Telegram, a message
// carrying one carries it as a Document too.
type Animation Video

// VideoNote is a round video message: Telegram gives it neither a name nor
// a MIME type.
type VideoNote struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Length       int    `json:"length"`
	Duration     int    `json:"duration"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Sticker is a sticker: a static .webp, an animated .tgs (IsAnimated) or a
// video .webm (IsVideo).
type Sticker struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Type         string `json:"type"` // "regular", "mask" or "custom_emoji"
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	IsAnimated   bool   `json:"is_animated"`
	IsVideo      bool   `json:"is_video"`
	Emoji        string `json:"emoji,omitempty"`
	SetName      string `json:"set_name,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Location is a point on the map. LivePeriod is set for a live location.
type Location struct {
	Latitude           float64 `json:"latitude"`
	Longitude          float64 `json:"longitude"`
	HorizontalAccuracy float64 `json:"horizontal_accuracy,omitempty"`
	LivePeriod         int     `json:"live_period,omitempty"`
}

// Venue is a named place. As on Telegram, a message carrying one carries
// its Location too.
type Venue struct {
	Location Location `json:"location"`
	Title    string   `json:"title"`
	Address  string   `json:"address"`
}

// Contact is a shared phone contact.
type Contact struct {
	PhoneNumber string `json:"phone_number"`
	FirstName   string `json:"first_name"`
	LastName    string `json:"last_name,omitempty"`
	UserID      int64  `json:"user_id,omitempty"`
}

// Poll is a native poll.
type Poll struct {
	ID                    string       `json:"id"`
	Question              string       `json:"question"`
	Options               []PollOption `json:"options"`
	TotalVoterCount       int          `json:"total_voter_count"`
	IsClosed              bool         `json:"is_closed"`
	IsAnonymous           bool         `json:"is_anonymous"`
	Type                  string       `json:"type"` // "regular" or "quiz"
	AllowsMultipleAnswers bool         `json:"allows_multiple_answers"`
}

// PollOption is one answer of a poll.
type PollOption struct {
	Text       string `json:"text"`
	VoterCount int    `json:"voter_count"`
}

// Dice is an animated emoji with a random value (🎲 1-6, 🎰 1-64, …).
type Dice struct {
	Emoji string `json:"emoji"`
	Value int    `json:"value"`
}

// Story is a forwarded story: only its chat and id reach a bot.
type Story struct {
	Chat Chat `json:"chat"`
	ID   int  `json:"id"`
}

// media is what a message carries besides text and the kinds message
// holds itself, as the Bot API serialises it (embedded in wireMessage).
type media struct {
	MediaGroupID string     `json:"media_group_id,omitempty"`
	Animation    *Animation `json:"animation,omitempty"`
	Video        *Video     `json:"video,omitempty"`
	VideoNote    *VideoNote `json:"video_note,omitempty"`
	Sticker      *Sticker   `json:"sticker,omitempty"`
	Location     *Location  `json:"location,omitempty"`
	Venue        *Venue     `json:"venue,omitempty"`
	Contact      *Contact   `json:"contact,omitempty"`
	Poll         *Poll      `json:"poll,omitempty"`
	Dice         *Dice      `json:"dice,omitempty"`
	Story        *Story     `json:"story,omitempty"`
}

// mediaOf is the media of in as Telegram fills it in: a venue's location
// is set too, and an animation is a document as well (the caller sets
// that).
func mediaOf(in Incoming) media {
	m := media{
		MediaGroupID: in.MediaGroupID, Animation: in.Animation, Video: in.Video, VideoNote: in.VideoNote,
		Sticker: in.Sticker, Location: in.Location, Venue: in.Venue, Contact: in.Contact, Poll: in.Poll,
		Dice: in.Dice, Story: in.Story,
	}
	if m.Venue != nil && m.Location == nil {
		l := m.Venue.Location
		m.Location = &l
	}
	return m
}

// documentOf is the document Telegram adds to a message carrying an
// animation, for clients that predate animations.
func documentOf(a *Animation) *Document {
	return &Document{FileID: a.FileID, FileUniqueID: a.FileUniqueID, FileName: a.FileName, MimeType: a.MimeType, FileSize: a.FileSize}
}

// VideoOf describes an added file as a video (MP4, 640×360).
func (s *Server) VideoOf(fileID string) *Video {
	f := s.file(fileID)
	return &Video{FileID: f.id, FileUniqueID: f.unique, Width: 640, Height: 360, Duration: 5, FileName: f.name, MimeType: "video/mp4", FileSize: f.size()}
}

// VideoNoteOf describes an added file as a round video message.
func (s *Server) VideoNoteOf(fileID string) *VideoNote {
	f := s.file(fileID)
	return &VideoNote{FileID: f.id, FileUniqueID: f.unique, Length: 384, Duration: 4, FileSize: f.size()}
}

// AnimationOf describes an added file as an animation (a GIF Telegram
// converted to MP4).
func (s *Server) AnimationOf(fileID string) *Animation {
	f := s.file(fileID)
	return &Animation{FileID: f.id, FileUniqueID: f.unique, Width: 320, Height: 240, Duration: 2, FileName: f.name, MimeType: "video/mp4", FileSize: f.size()}
}

// StickerOf describes an added file as a static sticker showing emoji.
func (s *Server) StickerOf(fileID, emoji string) *Sticker {
	f := s.file(fileID)
	return &Sticker{FileID: f.id, FileUniqueID: f.unique, Type: "regular", Width: 512, Height: 512, Emoji: emoji, SetName: "TestPack", FileSize: f.size()}
}

// DeliverAlbum pushes items as one album, as if a user had sent several
// photos, videos or documents together: each is a message and an update of
// its own, all with a new media_group_id (a caption is usually on the
// first). It returns their ids in order.
func (s *Server) DeliverAlbum(items ...Incoming) []Delivered {
	s.mu.Lock()
	s.albums++
	id := strconv.FormatInt(13_545_316_567_340_000+int64(s.albums), 10)
	s.mu.Unlock()
	out := make([]Delivered, len(items))
	for i, in := range items {
		in.MediaGroupID = id
		out[i] = s.Deliver(in)
	}
	return out
}
