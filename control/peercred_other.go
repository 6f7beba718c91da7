//go:build !linux

package control

import (
	"context"
	"errors"
	"net"
	"os"
)

// peerCredentials is only implemented with Linux's SO_PEERCRED. Elsewhere
// the server cannot tell who connected, so it refuses everyone.
func peerCredentials(net.Conn) (Peer, error) {
	return Peer{}, errors.New("peer credentials: not supported on this platform")
}

func peerPIDFD(net.Conn, int32) *os.File { return nil }

// CallerStillThere: without peer credentials no request gets this far.
func CallerStillThere(ctx context.Context) error { return ErrRefused }
