//go:build !linux

package control

import (
	"errors"
	"net"
)

// peerCredentials is only implemented with Linux's SO_PEERCRED. Elsewhere
// the server cannot tell who connected, so it refuses everyone.
func peerCredentials(net.Conn) (Peer, error) {
	return Peer{}, errors.New("peer credentials: not supported on this platform")
}
