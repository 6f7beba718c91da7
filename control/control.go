// Package control owns latch's local control API: HTTP over a Unix socket
// ($LATCH_HOME/latch.sock), the only way to ask a running daemon for a
// pairing code (DESIGN.md, invariant 1). It holds both ends: the Server the
// daemon runs and the Client the latch CLI uses.
//
// Access is limited by three layers, each enough on its own against
// another local user: the socket lives in a directory that must be 0700 and
// owned by the daemon's uid, the socket file is 0600, and every connection's
// peer uid is read from the kernel (SO_PEERCRED) and must equal the
// daemon's. There is no TCP listener, and none may be added.
//
// Peer credentials come from SO_PEERCRED, so the server only admits callers
// on Linux; elsewhere it refuses every request (fail closed).
package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// Errors a Backend returns (wrapped) so the caller learns what went wrong.
// The server maps them to HTTP statuses and the Client maps them back, so
// errors.Is works on both sides of the socket.
var (
	// ErrUnknownGateway: no gateway of that name is configured (404).
	ErrUnknownGateway = errors.New("unknown gateway")
	// ErrNotLatched: the gateway has no latched chat to unpair (409).
	ErrNotLatched = errors.New("gateway is not latched")
	// ErrRefused: the caller may not do this (403). The server also
	// returns it for a peer whose uid is not the daemon's.
	ErrRefused = errors.New("refused")
	// ErrLatched: the gateway is latched, and a plain mint cannot make a
	// second latch beside it (409); MintRequest.Replace moves it instead.
	ErrLatched = errors.New("gateway is latched")
)

// ErrNoDaemon is returned (wrapped) by the Client when nothing listens on
// the socket: the file is missing, or it is left over from a daemon that
// died and connecting is refused.
var ErrNoDaemon = errors.New("latch daemon is not running")

// ErrAlreadyRunning is returned (wrapped) by Listen when a live daemon
// already answers on the socket path.
var ErrAlreadyRunning = errors.New("latch daemon is already running")

// Backend is what the daemon provides to the control API.
//
// The message of an error that wraps ErrUnknownGateway, ErrNotLatched or
// ErrRefused is shown to the caller verbatim, so write it for the user.
// Any other error is logged by the server and replaced by a generic message,
// because it may carry internals (paths, tokens in URLs) the caller should
// not see.
type Backend interface {
	// Mint creates a fresh pairing code for req.Gateway, superseding any
	// pending one.
	Mint(ctx context.Context, req MintRequest) (MintResult, error)
	// Unpair drops the gateway's latch.
	Unpair(ctx context.Context, gateway string) error
	// Status reports the daemon and its gateways. It must never include a
	// pairing code.
	Status(ctx context.Context) (Status, error)
}

// MintRequest asks for a pairing code for one gateway.
//
// On the wire it is {"gateway": "telegram", "ttl": "10m0s"}: the TTL is a
// Go duration string (time.ParseDuration), which reads unambiguously in
// logs and in a hand-written curl, unlike bare nanoseconds. It may be
// omitted.
type MintRequest struct {
	Gateway string
	// TTL is how long the code stays valid; zero lets the daemon choose.
	TTL time.Duration
	// Replace asks for a code that moves the gateway's latch to the chat
	// that redeems it, once a latched chat approves (`latch pair --replace`).
	Replace bool
}

type mintRequestWire struct {
	Gateway string `json:"gateway"`
	TTL     string `json:"ttl,omitempty"`
	Replace bool   `json:"replace,omitempty"`
}

// MarshalJSON encodes the TTL as a Go duration string.
func (r MintRequest) MarshalJSON() ([]byte, error) {
	w := mintRequestWire{Gateway: r.Gateway, Replace: r.Replace}
	if r.TTL != 0 {
		w.TTL = r.TTL.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the wire form; unknown fields are an error, so a
// newer client cannot ask for something this daemon would silently ignore.
func (r *MintRequest) UnmarshalJSON(b []byte) error {
	var w mintRequestWire
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	var ttl time.Duration
	if w.TTL != "" {
		d, err := time.ParseDuration(w.TTL)
		if err != nil {
			return fmt.Errorf("ttl: %w", err)
		}
		ttl = d
	}
	*r = MintRequest{Gateway: w.Gateway, TTL: ttl, Replace: w.Replace}
	return nil
}

// MintResult is a freshly minted code. It is the only response that holds
// a code, and the server never logs it.
type MintResult struct {
	Gateway   string    `json:"gateway"`
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expires_at"`
	// Link opens the bot with the code filled in (t.me/<bot>?start=<code>),
	// when the platform has such links.
	Link string `json:"link,omitempty"`
	// Approval: the latch the code makes waits for the owner's approval
	// in a latched chat. Replace: it moves the gateway's latch.
	Approval bool `json:"approval,omitempty"`
	Replace  bool `json:"replace,omitempty"`
}

// unpairRequest is the body of POST /v1/unpair.
type unpairRequest struct {
	Gateway string `json:"gateway"`
}

// Status describes the running daemon.
type Status struct {
	PID       int             `json:"pid"`
	Version   string          `json:"version"`
	StartedAt time.Time       `json:"started_at"`
	Home      string          `json:"home"`
	Gateways  []GatewayStatus `json:"gateways"`
	// Memory is the running daemon's Go memory; nil when it is not running.
	Memory *MemoryInfo `json:"memory,omitempty"`
	// Commands says how the running daemon ends the processes of a
	// command: CommandsInCgroups, or why it cannot (it then walks /proc).
	Commands string `json:"commands,omitempty"`
	// Endpoints are the API roots the running daemon talks to, by
	// EndpointTelegram, EndpointDiscord and EndpointModel, for the gateways
	// and the model it has. Config validation keeps credentials out of
	// them (no user info, no query).
	Endpoints map[string]string `json:"endpoints,omitempty"`
	// MCP describes each MCP server the daemon runs, one line each
	// (state, tools, restarts, last failure).
	MCP []string `json:"mcp,omitempty"`
	// Escaped are processes this daemon's commands left running outside
	// its process tree, where /stop and timeouts cannot reach them, as far
	// as the daemon can see (see SECURITY.md).
	Escaped []EscapedProcess `json:"escaped,omitempty"`
}

// EscapedProcess is one process of Status.Escaped.
type EscapedProcess struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
}

// Keys of Status.Endpoints.
const (
	EndpointTelegram = "telegram"
	EndpointDiscord  = "discord"
	EndpointModel    = "model"
)

// CommandsInCgroups is Status.Commands of a daemon that puts each command
// in a cgroup of its own.
const CommandsInCgroups = "a cgroup per command"

// MemoryInfo is the Go runtime's account of the daemon's memory.
type MemoryInfo struct {
	// HeapLive is the heap the last garbage collection found in use: what
	// a leak makes grow, without the freed memory the runtime still holds.
	HeapLive uint64 `json:"heap_live_bytes"`
	// Held is what the runtime has mapped and not returned to the system:
	// heap (live or free), stacks and the runtime's own structures.
	Held uint64 `json:"held_bytes"`
	// GCs counts the collections since start.
	GCs uint64 `json:"gcs"`
	// Goroutines counts the daemon's goroutines, and Stacks is the memory
	// their stacks take: at idle, what each waiting goroutine costs.
	Goroutines uint64 `json:"goroutines"`
	Stacks     uint64 `json:"stack_bytes"`
}

// GatewayStatus describes one gateway. It says whether a code is pending,
// never what it is.
type GatewayStatus struct {
	Name       string       `json:"name"`
	Configured bool         `json:"configured"`
	Connected  bool         `json:"connected"`
	BotName    string       `json:"bot_name,omitempty"`
	LastError  string       `json:"last_error,omitempty"`
	Latch      *LatchInfo   `json:"latch,omitempty"`
	Pending    *PendingInfo `json:"pending,omitempty"`
	// Waiting are redeemed codes whose latch waits for the owner's
	// approval in a latched chat.
	Waiting          []WaitingLatch `json:"waiting,omitempty"`
	Handled          uint64         `json:"handled"`
	StrangersDropped uint64         `json:"strangers_dropped"`
	FailedAttempts   uint64         `json:"failed_attempts"`
	Running          int            `json:"running"`
}

// LatchInfo is the chat a gateway is latched to.
type LatchInfo struct {
	ChatID   string    `json:"chat_id"`
	ChatName string    `json:"chat_name,omitempty"`
	ChatType string    `json:"chat_type"`
	UserID   string    `json:"user_id"`
	UserName string    `json:"user_name,omitempty"`
	Since    time.Time `json:"since"`
}

// PendingInfo is the state of a gateway's pending code, without the code.
type PendingInfo struct {
	ExpiresAt time.Time `json:"expires_at"`
	Burned    bool      `json:"burned"`
	Attempts  int       `json:"attempts"`
	// Approval and Replace are the code's (MintResult).
	Approval bool `json:"approval,omitempty"`
	Replace  bool `json:"replace,omitempty"`
}

// WaitingLatch is a chat that redeemed a code and waits for approval.
type WaitingLatch struct {
	ChatID    string    `json:"chat_id"`
	ChatName  string    `json:"chat_name,omitempty"`
	ChatType  string    `json:"chat_type"`
	UserID    string    `json:"user_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Peer is the process on the other end of a control connection, as the
// kernel saw it when it connected.
type Peer struct {
	UID, GID uint32
	PID      int32
}

type peerKey struct{}

// peerResult is stored in each connection's context: the credentials, or
// why they could not be read (which refuses every request on it).
type peerResult struct {
	peer Peer
	err  error
	// pidfd is the peer process's (see peerPIDFD), nil if none; closed
	// with the connection.
	pidfd *os.File
}

// PeerFromContext returns the verified peer of the request whose context
// ctx is. A Backend can use it for policy, such as refusing callers that
// descend from the daemon itself.
func PeerFromContext(ctx context.Context) (Peer, bool) {
	r, ok := ctx.Value(peerKey{}).(*peerResult)
	if !ok || r.err != nil {
		return Peer{}, false
	}
	return r.peer, true
}

// Error codes in JSON error bodies. The Client maps them back to the
// sentinels; the HTTP status alone is ambiguous (404 is also "no such
// route").
const (
	codeUnknownGateway = "unknown_gateway"
	codeNotLatched     = "not_latched"
	codeRefused        = "refused"
	codeLatched        = "latched"
	codeBadRequest     = "bad_request"
	codeTooLarge       = "too_large"
	codeNotFound       = "not_found"
	codeBadMethod      = "method_not_allowed"
	codeInternal       = "internal"
)

// errorBody is the JSON body of every non-200 response.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}
