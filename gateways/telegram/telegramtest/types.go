package telegramtest

import (
	"time"
)

// User is a Telegram user as the Bot API serialises it.
type User struct {
	ID           int64  `json:"id"`
	IsBot        bool   `json:"is_bot"`
	FirstName    string `json:"first_name"`
	LastName     string `json:"last_name,omitempty"`
	Username     string `json:"username,omitempty"`
	LanguageCode string `json:"language_code,omitempty"`
}

// Chat is a Telegram chat as the Bot API serialises it. Type is "private",
// "group", "supergroup" or "channel".
type Chat struct {
	ID    int64  `json:"id"`
	Type  string `json:"type"`
	Title string `json:"title,omitempty"`
	// IsForum marks a supergroup split into topics (see Forum).
	IsForum   bool   `json:"is_forum,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
}

// Telegram's placeholder senders. For a message sent on behalf of a chat,
// the Bot API puts one of these in from (outside channels, for clients that
// predate sender_chat) and the real sender in sender_chat.

// GroupAnonymousBot is the from of an anonymous group administrator's
// message.
func GroupAnonymousBot() User {
	return User{ID: 1087968824, IsBot: true, FirstName: "Group", Username: "GroupAnonymousBot"}
}

// ChannelBot is the from of a message someone posts in a group as a
// channel.
func ChannelBot() User {
	return User{ID: 136817688, IsBot: true, FirstName: "Channel", Username: "Channel_Bot"}
}

// ServiceUser is Telegram's own account, the from of a channel post
// forwarded automatically into the channel's discussion group.
func ServiceUser() User {
	return User{ID: 777000, FirstName: "Telegram"}
}

// Private returns the private chat between the bot and u. As on Telegram,
// its id equals the user's id.
func Private(u User) Chat {
	return Chat{ID: u.ID, Type: "private", Username: u.Username, FirstName: u.FirstName, LastName: u.LastName}
}

// Group returns a basic group chat. Group ids are negative on Telegram; a
// positive id is negated.
func Group(id int64, title string) Chat {
	if id > 0 {
		id = -id
	}
	return Chat{ID: id, Type: "group", Title: title}
}

// Supergroup returns a supergroup chat. Supergroup ids look like
// -100xxxxxxxxxx on Telegram; a positive id is turned into that form.
func Supergroup(id int64, title string) Chat {
	if id > 0 {
		id = -(1_000_000_000_000 + id)
	}
	return Chat{ID: id, Type: "supergroup", Title: title}
}

// Channel returns a channel chat (negative id, like a supergroup).
func Channel(id int64, title string) Chat {
	c := Supergroup(id, title)
	c.Type = "channel"
	return c
}

// Entity is a formatting entity. Offset and Length count UTF-16 code units,
// as on Telegram.
type Entity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`
	Language string `json:"language,omitempty"`
}

// Sent is one message the bot sent, as the server recorded it.
type Sent struct {
	// Method is the API method that created the message ("sendMessage").
	Method string
	// ChatID is the chat the message went to.
	ChatID int64
	// MessageID is the id the server assigned.
	MessageID int
	// Text is the text parameter exactly as the bot sent it, markup included.
	Text string
	// Plain is what the user sees: Text after entity parsing and trimming.
	Plain string
	// Entities are the formatting entities parsed out of Text.
	Entities []Entity
	// ParseMode is the parse_mode parameter ("" for plain text).
	ParseMode string
	// ReplyTo is reply_to_message_id, or 0.
	ReplyTo int
	// ThreadID is the message_thread_id parameter, or 0.
	ThreadID int
	// Topic is the forum topic the message landed in (its thread id), 0
	// for General or a chat that is no forum.
	Topic int
	// Params holds every request parameter, for anything not covered above.
	Params map[string]string
	// Edits lists later editMessageText and editMessageReplyMarkup calls on
	// this message, oldest first.
	Edits []Edit
	// Keyboard is the message's inline keyboard as it is now (after any
	// edits), nil when it has none.
	Keyboard [][]Button
	// File is what sendDocument or sendPhoto uploaded; Text is then the
	// caption.
	File *SentFile
	// Time is when the server accepted the message.
	Time time.Time
}

// Edit is one successful editMessageText or editMessageReplyMarkup call.
type Edit struct {
	// Method is "editMessageText" or "editMessageReplyMarkup".
	Method    string
	Text      string
	Plain     string
	ParseMode string
	// Keyboard is the inline keyboard after the edit (nil: removed).
	Keyboard [][]Button
	Time     time.Time
}

// Button is one inline keyboard button.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
}

// SentFile is a file the bot sent, byte for byte.
type SentFile struct {
	// Field is the multipart field ("document", "photo"); empty when the
	// bot sent an existing file_id instead of uploading.
	Field       string
	Name        string
	ContentType string
	Data        []byte
	// FileID is the id the server gave the file.
	FileID string
}

// Document is a general file attached to a message.
type Document struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// PhotoSize is one size of a photo; a message carries several.
type PhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Voice is a voice note.
type Voice struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Duration     int    `json:"duration"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Audio is a music file.
type Audio struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Duration     int    `json:"duration"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Call is one request the server received for a method.
type Call struct {
	// Method is the method name as the client spelled it.
	Method string
	// Params holds the request parameters (query, form, multipart or JSON).
	Params map[string]string
	// Time is when the request arrived.
	Time time.Time
	// N numbers the method's requests from 0 in arrival order: the Count
	// before this one. It still places a call when KeepCalls has dropped
	// older ones.
	N int
}

// Command is one entry of the bot's command list (setMyCommands).
type Command struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// Fault is a scripted misbehaviour of one method. Inject queues faults; each
// request to the method takes the first queued fault. Fields combine: Delay
// is applied first, then the first of Hangup, Malformed, Body and Status that
// is set decides the answer. A Fault with only Delay set delays a normal
// answer; a zero Fault lets its request through, so queued before another
// it aims that one at a later request.
type Fault struct {
	// Status is the HTTP status and error_code of an error answer in
	// Telegram's JSON shape.
	Status int
	// Description replaces the default description for Status.
	Description string
	// RetryAfter sets parameters.retry_after (seconds), as Telegram does on
	// 429 Too Many Requests.
	RetryAfter int
	// Body is written verbatim instead of Telegram's JSON (a proxy's HTML
	// error page, say), with Status (default 200).
	Body string
	// Malformed answers 200 with truncated, invalid JSON.
	Malformed bool
	// Hangup closes the connection without answering.
	Hangup bool
	// Delay holds the answer back; it ends early when the request is
	// cancelled or the server closes.
	Delay time.Duration
	// Times is how many requests the fault applies to: 0 and 1 mean once, a
	// negative number means until ClearFaults.
	Times int
}

// Delivered identifies an inbound update pushed by the test.
type Delivered struct {
	UpdateID  int
	MessageID int
}

// Incoming describes an inbound message for Deliver.
type Incoming struct {
	Chat Chat
	// From is the person who sent the message. Nil (with no SenderChat)
	// means the message was sent on behalf of Chat itself: a post in a
	// channel, or in a group a message from an anonymous administrator.
	From *User
	// SenderChat is the chat the message was sent on behalf of: a channel
	// someone posts as in a group, or the linked channel of an automatic
	// forward. As on Telegram, the update then carries it in sender_chat
	// and, outside channels, a placeholder user in from instead of From
	// (GroupAnonymousBot, ChannelBot or ServiceUser).
	SenderChat *Chat
	// AutomaticForward marks a post Telegram forwarded from the linked
	// channel SenderChat into its discussion group Chat.
	AutomaticForward bool
	// ForwardedFrom, when set, makes this a message the sender forwarded
	// from that user: it carries forward_origin, as Bot API 7.0 and later
	// send it.
	ForwardedFrom *User
	Text          string
	Caption       string
	// ReplyTo is the id of a message in the same chat this one answers.
	ReplyTo int
	// Topic is the forum topic (thread id, from CreateTopic) the message is
	// sent in; 0 for General or a chat that is no forum. A reply without
	// it lands in the topic of the message it answers.
	Topic int
	// Attachments; build them with DocumentOf, PhotoSizeOf, VoiceOf,
	// AudioOf, VideoOf, VideoNoteOf, AnimationOf and StickerOf from files
	// added with AddFile. As on Telegram, an Animation comes with a
	// Document of the same file.
	Document  *Document
	Photo     []PhotoSize
	Voice     *Voice
	Audio     *Audio
	Video     *Video
	VideoNote *VideoNote
	Animation *Animation
	Sticker   *Sticker
	// Content that is no file. As on Telegram, a Venue comes with its
	// Location.
	Location *Location
	Venue    *Venue
	Contact  *Contact
	Poll     *Poll
	Dice     *Dice
	Story    *Story
	// MediaGroupID makes the message an item of an album (see
	// DeliverAlbum).
	MediaGroupID string
	// Date defaults to now.
	Date time.Time
}
