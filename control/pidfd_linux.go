package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// peerPIDFD returns a pidfd for the process that connected c, so that its
// pid, read from /proc when a request is handled, can be checked to be
// still that process's and not a reused one: SO_PEERPIDFD (Linux 6.5)
// names the process the kernel saw at connect(2); where the kernel lacks
// it, pidfd_open(pid) at accept narrows the window to the time between
// connect and accept. nil where neither is there (Linux before 5.3): the
// pid is then all there is.
func peerPIDFD(c net.Conn, pid int32) *os.File {
	if uc, ok := c.(*net.UnixConn); ok && soPeerPIDFD != 0 {
		if raw, err := uc.SyscallConn(); err == nil {
			fd, gerr := -1, error(nil)
			if err := raw.Control(func(s uintptr) { fd, gerr = unix.GetsockoptInt(int(s), unix.SOL_SOCKET, soPeerPIDFD) }); err == nil && gerr == nil && fd >= 0 {
				return os.NewFile(uintptr(fd), "peer pidfd")
			}
		}
	}
	if pid <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(int(pid), 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "peer pidfd")
}

// errCallerGone: the caller exited before its request was decided, so its
// pid may name another process by now.
var errCallerGone = errors.New("the caller exited before its request was checked")

// CallerStillThere reports whether the peer of the request whose context
// ctx is still runs, and so still owns the pid a Backend checked in /proc.
// A Backend calls it after such a check: should the caller have exited
// meanwhile, a new process could have taken its pid and the check could
// have looked at the wrong one. Without a pidfd (old kernels) it answers
// nil: there is nothing more to know.
func CallerStillThere(ctx context.Context) error {
	r, ok := ctx.Value(peerKey{}).(*peerResult)
	if !ok || r.err != nil {
		return fmt.Errorf("%w: caller unknown", ErrRefused)
	}
	if r.pidfd == nil {
		return nil
	}
	if err := unix.PidfdSendSignal(int(r.pidfd.Fd()), 0, nil, 0); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, errCallerGone)
	}
	return nil
}
