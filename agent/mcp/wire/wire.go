// Package wire is the protocol between the daemon (agent/mcp) and its MCP
// sidecar (cmd/latch-mcp, agent/mcp/mcpsdk), which alone links the MCP
// SDK: JSON lines on the sidecar's standard input (requests) and output
// (replies and events), and, for a stdio server, the server's pipe ends
// passed with SCM_RIGHTS on the unix socket at file descriptor FDSocket.
// It imports only the standard library, so the daemon's binary does not
// grow by the SDK.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"time"
)

// FDSocket is the sidecar's file descriptor of the SOCK_SEQPACKET socket
// the daemon passes stdio servers' pipes on (exec's ExtraFiles[0]).
const FDSocket = 3

// Ops of a Request.
const (
	// OpDial starts a session with Server; a stdio server's pipes come on
	// FDSocket first, in one message whose payload is Conn (FDPayload):
	// the server's stdout (read end), then its stdin (write end).
	OpDial = "dial"
	// OpCall calls Tool on Conn with Args.
	OpCall = "call"
	// OpCancel cancels the call whose request ID is Target: the sidecar
	// sends the server notifications/cancelled.
	OpCancel = "cancel"
	// OpClose ends Conn's session and closes its pipes.
	OpClose = "close"
)

// Events the sidecar sends unasked (ID 0).
const (
	// EventEnded: Conn's session ended (the server went away); Err says
	// how.
	EventEnded = "ended"
	// EventTools: Conn's server changed its tool list; Tools is the new
	// one.
	EventTools = "tools"
)

// Request is one line from the daemon.
type Request struct {
	ID     uint64          `json:"id"`
	Op     string          `json:"op"`
	Conn   uint64          `json:"conn,omitempty"`
	Server *Server         `json:"server,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Target uint64          `json:"target,omitempty"`
}

// Server is what the sidecar needs to dial: a stdio server's pipes, or a
// streamable-HTTP server's URL and headers (secrets: never logged).
type Server struct {
	Name    string            `json:"name"`
	Stdio   bool              `json:"stdio,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Timeout bounds the start and every tool listing.
	Timeout time.Duration `json:"timeout"`
}

// Reply is one line from the sidecar: the answer to request ID, or an
// event (ID 0).
type Reply struct {
	ID    uint64 `json:"id,omitempty"`
	Event string `json:"event,omitempty"`
	Conn  uint64 `json:"conn,omitempty"`
	// Err is why the request failed, unscrubbed: the daemon scrubs it.
	Err   string `json:"err,omitempty"`
	Tools []Tool `json:"tools,omitempty"`
	// Text is a call's result rendered as text (images and resources
	// described), neither scrubbed nor capped: the daemon does both.
	Text    string `json:"text,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
}

// Tool is one tool a server lists.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// FDPayload is the payload of the message that carries conn's pipes.
func FDPayload(conn uint64) []byte { return binary.BigEndian.AppendUint64(nil, conn) }
