// Package gateways owns the boundary between chat platforms and latch: the
// Hub that applies the pairing guard, runs the chat commands and hands work
// to the agent — the items of an album that came one by one folded into one
// turn (album.go). Policy lives here and nowhere else; the adapters only
// translate, against the leaf package gateways/adapter, whose names this
// file re-exports for the Hub and the tests.
package gateways

import "github.com/latchd/latch/gateways/adapter"

// The adapters' side of the boundary (gateways/adapter).
type (
	ChatType         = adapter.ChatType
	Message          = adapter.Message
	Callback         = adapter.Callback
	Attachment       = adapter.Attachment
	Reply            = adapter.Reply
	Button           = adapter.Button
	Sink             = adapter.Sink
	Gateway          = adapter.Gateway
	Info             = adapter.Info
	CallbackAnswerer = adapter.CallbackAnswerer
	Downloader       = adapter.Downloader
	PairLinker       = adapter.PairLinker
	FileSender       = adapter.FileSender
	TurnRenderer     = adapter.TurnRenderer
	Vault            = adapter.Vault
	VaultUser        = adapter.VaultUser
)

// Chat types and the forwarded label (gateways/adapter).
const (
	ChatPrivate    = adapter.ChatPrivate
	ChatGroup      = adapter.ChatGroup
	ChatChannel    = adapter.ChatChannel
	ForwardedLabel = adapter.ForwardedLabel
)

// Errors the Hub branches on (gateways/adapter).
var (
	ErrRejected     = adapter.ErrRejected
	ErrUnauthorized = adapter.ErrUnauthorized
)

// Rejected wraps err as a refusal by the platform (ErrRejected).
func Rejected(err error) error { return adapter.Rejected(err) }

// JoinCaptions joins the captions of two items of an album.
func JoinCaptions(a, b string) string { return adapter.JoinCaptions(a, b) }
