// Package logkey holds the slog keys every layer of latch logs with, so
// that one chat's story (adapter, Hub, agent, daemon) can be followed with
// one grep. It imports nothing.
package logkey

const (
	// Chat is the platform's chat (Telegram chat id, Discord channel id).
	Chat = "chat"
	// Gateway is the gateway's name ("telegram", "discord").
	Gateway = "gateway"
	// Err is the error.
	Err = "err"
)
