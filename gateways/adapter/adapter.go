// Package adapter is what a platform adapter implements and hands the
// Hub: the Gateway interface and its optional extensions, the
// platform-neutral Message and Reply, and the errors the Hub branches on.
// It imports nothing of latch but the leaf package turn, so an adapter
// (gateways/telegram, gateways/discord, …) compiles against neither the
// agent core nor the store; package gateways re-exports every name.
package adapter

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/latchd/latch/turn"
)

// ChatType says what kind of conversation a message came from. Only private
// chats may pair unless groups are allowed explicitly.
type ChatType string

// Chat types, shared by every platform.
const (
	ChatPrivate ChatType = "private"
	ChatGroup   ChatType = "group"
	ChatChannel ChatType = "channel"
)

// Message is one inbound chat message, already translated out of the
// platform's format. IDs are strings so every platform fits (Telegram uses
// int64, Discord snowflakes).
type Message struct {
	Gateway  string    `json:"gateway"`
	ID       string    `json:"id"`
	ChatID   string    `json:"chat_id"`
	ChatType ChatType  `json:"chat_type"`
	ChatName string    `json:"chat_name,omitempty"`
	UserID   string    `json:"user_id"`
	UserName string    `json:"user_name,omitempty"`
	Text     string    `json:"text"`
	Time     time.Time `json:"time"`
	// Callback is set when the message is a button press, not text.
	Callback *Callback `json:"callback,omitempty"`
	// Files are attachments (documents, photos, voice notes, audio); Text
	// is then the caption.
	Files []Attachment `json:"files,omitempty"`
	// Group marks the items of one album (photos or files sent together,
	// which some platforms deliver one by one): the Hub may fold messages
	// of one chat and user with the same Group into one. "" for none.
	Group string `json:"group,omitempty"`
}

// Callback is a press of an inline button latch sent.
type Callback struct {
	// ID identifies the press; it must be answered (AnswerCallback).
	ID string `json:"id"`
	// Data is the button's payload, e.g. "approve:k3x9p" (1-64 bytes).
	Data string `json:"data"`
	// MessageID is the message that carries the button.
	MessageID string `json:"message_id"`
}

// Attachment is a file someone sent to the bot, not yet downloaded.
type Attachment struct {
	ID   string `json:"id"`   // the platform's file id
	Name string `json:"name"` // as sent, unsanitized; may be empty
	Size int64  `json:"size"` // as announced; 0 if unknown
	Kind string `json:"kind"` // "document", "photo", "voice", "audio", "video"
	MIME string `json:"mime,omitempty"`
	// Seconds is a voice note's or audio file's length as the platform
	// announces it; 0 if unknown.
	Seconds int `json:"seconds,omitempty"`
}

// Reply is one outbound message. The adapter renders it within its platform's
// limits (splitting long text, escaping markup).
type Reply struct {
	// Text is the body, shown as plain text.
	Text string
	// Pre renders Text as a preformatted (monospace) block.
	Pre bool
	// ReplyTo is the platform id of the message this answers, or "".
	ReplyTo string
	// Paired marks the Hub's answer to the pairing that latched this chat
	// (MsgPaired). Only the latched chat ever gets it, so an adapter may
	// take the chat for the owner's from here on; it is sent again after a
	// crash until delivered.
	Paired bool
	// Markdown: Text is the Hub's own Markdown (code spans, bold), to be
	// shown with the platform's formatting. Never set for what a chat or
	// the model wrote.
	Markdown bool
	// Buttons go under the (last) message; a press comes back as a
	// Message with Callback.Data the button's Data.
	Buttons []Button
}

// Button is an inline button of a Reply.
type Button struct {
	Label string `json:"label"`
	// Data is the payload (1-64 bytes), e.g. "latch-ok:<request id>".
	Data string `json:"data"`
}

// Sink receives what a gateway reads from its platform. Ingest must store the
// messages and the new cursor atomically: when it returns nil the gateway may
// confirm the updates to the platform; when it returns an error the gateway
// must not advance and should retry the same batch later.
type Sink interface {
	// Cursor returns the last cursor Ingest stored for the gateway, or "".
	Cursor(ctx context.Context, gateway string) (string, error)
	// Ingest stores msgs and advances the gateway's cursor in one step.
	Ingest(ctx context.Context, gateway, cursor string, msgs []Message) error
}

// Gateway is one bot account on one platform.
type Gateway interface {
	// Name is the gateway's key in the configuration and the store
	// ("telegram", "discord").
	Name() string
	// Start connects to the platform (verifying the credentials) and returns
	// once it is known whether that worked. It does not read messages yet.
	Start(ctx context.Context) error
	// Run reads messages until ctx ends, handing them to sink. Transient
	// platform errors are retried inside Run; it returns only when ctx ends
	// or on an error that retrying cannot fix.
	Run(ctx context.Context, sink Sink) error
	// Send delivers a reply to a chat and returns the platform id of the
	// (last) message it created.
	Send(ctx context.Context, chatID string, r Reply) (string, error)
	// Info describes the gateway for status output and pairing links.
	Info() Info
}

// Info is what a gateway knows about itself.
type Info struct {
	// BotName is the bot's user name without "@", once known.
	BotName string
	// Connected is true while the last call to the platform succeeded.
	Connected bool
	// LastError is the last platform error, already scrubbed of secrets.
	LastError string
}

// CallbackAnswerer is implemented by gateways with buttons. Every button
// press must be answered once, or the user's client keeps a spinner.
type CallbackAnswerer interface {
	// AnswerCallback acknowledges cb with a short notice shown to the user
	// ("" for none). When resolved is not "", the message that carries the
	// buttons is edited to show it (e.g. "✓ approved") and loses its buttons.
	AnswerCallback(ctx context.Context, chatID string, cb Callback, notice, resolved string) error
}

// Downloader is implemented by gateways that can fetch attachments.
type Downloader interface {
	// Download writes the attachment's bytes to w, failing once more than
	// max bytes arrive (or the announced size is over max).
	Download(ctx context.Context, a Attachment, w io.Writer, max int64) error
}

// PairLinker is implemented by gateways whose platform has a deep link that
// sends a start parameter (Telegram's t.me/<bot>?start=<code>).
type PairLinker interface {
	PairLink(code string) string
}

// ForwardedLabel starts the text of a message the owner forwarded: it is
// someone else's words, and the label keeps a forwarded "!" or "/" from
// ever being taken for a command.
const ForwardedLabel = "↪ Forwarded message:\n"

// ErrRejected is wrapped by Gateway.Send when the platform refused the
// message itself (an answer in the 4xx range other than 429: the chat is
// gone, the bot was blocked, a topic is closed): sending it again cannot
// help. Any other error may pass.
var ErrRejected = errors.New("the platform refused the message")

// Rejected marks err as ErrRejected, keeping its text.
func Rejected(err error) error { return rejectedError{err} }

type rejectedError struct{ err error }

func (e rejectedError) Error() string   { return e.err.Error() }
func (e rejectedError) Unwrap() []error { return []error{ErrRejected, e.err} }

// ErrUnauthorized is wrapped by Gateway.Start when the platform rejects the
// credentials: retrying cannot help, so the daemon stops with a clear error.
var ErrUnauthorized = errors.New("the platform rejected the bot token")

// Vault is durable storage of a gateway's own, apart from the cursor: the
// Matrix gateway keeps its end-to-end encryption state there (the
// account's keys, the Olm and Megolm sessions). Each gateway has a space of
// keys of its own.
type Vault interface {
	// Load returns every value stored for gateway.
	Load(ctx context.Context, gateway string) (map[string][]byte, error)
	// Save stores put and deletes del in one transaction; once it returns
	// nil both are on disk.
	Save(ctx context.Context, gateway string, put map[string][]byte, del []string) error
}

// VaultUser is implemented by gateways that keep state in a Vault; the
// daemon hands theirs over before Start.
type VaultUser interface {
	UseVault(Vault)
}

// FileSender is implemented by gateways that can upload a file to a chat.
type FileSender interface {
	SendFile(ctx context.Context, chatID string, f turn.File, replyTo string) error
}

// TurnRenderer is implemented by gateways that render a turn themselves
// (streaming edits, buttons). Others get the Hub's plain-message rendering.
type TurnRenderer interface {
	RenderTurn(ctx context.Context, chatID, replyTo string) turn.Events
}

// JoinCaptions joins the captions of two items of an album, as the Hub's
// fold and an adapter that merges an album itself both do.
func JoinCaptions(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}
