package discord

import (
	"context"
	"net"
	"sync"
	"time"
)

// netGuard dials the gateway's connections. Each gets a deadline that
// lasts until the handshake is done (Connect), so a silent server cannot
// wedge discordgo's Open, which has no timeout of its own. Once closed it
// refuses to dial, so discordgo's reconnect loop cannot bring a closed
// gateway back.
type netGuard struct {
	mu      sync.Mutex
	pending map[net.Conn]bool
	closed  bool
}

func (n *netGuard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	c, err := (&net.Dialer{Timeout: openTimeout}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(openTimeout))
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		c.Close()
		return nil, errClosed
	}
	n.pending[c] = true
	return c, nil
}

// established lifts the handshake deadline: the session is up.
func (n *netGuard) established() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.pending {
		_ = c.SetDeadline(time.Time{})
	}
	clear(n.pending)
}

// refuse refuses further dials. It reports whether this call did it (the
// guard was open).
func (n *netGuard) refuse() bool {
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	was := n.closed
	n.closed = true
	return !was
}

// cut ends a handshake in progress: its reads and writes fail at once.
func (n *netGuard) cut() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.pending {
		_ = c.SetDeadline(time.Unix(1, 0))
	}
	clear(n.pending)
}

func (n *netGuard) isClosed() bool {
	if n == nil {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}
