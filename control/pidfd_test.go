package control

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPeerPIDNotPositiveRefused: SO_PEERCRED reports pid 0 for a peer in
// another pid namespace; its ancestry cannot be read, so it is refused
// before any route runs. Shown to fail without the check in connContext.
func TestPeerPIDNotPositiveRefused(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, nil, func(s *Server) {
		s.peerCred = func(net.Conn) (Peer, error) { return Peer{UID: uint32(os.Getuid()), PID: 0}, nil }
	})
	_, err := NewClient(ts.path).Mint(t.Context(), MintRequest{Gateway: "telegram"})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("mint from pid 0: err = %v, want ErrRefused", err)
	}
	if n := len(b.seenPeers()); n != 0 {
		t.Errorf("backend called %d times for pid 0, want 0", n)
	}
}

// TestCallerStillThere: the pidfd taken at accept tells a live caller from
// one that exited (whose pid another process may have taken).
func TestCallerStillThere(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		cmd.Wait()
		t.Skipf("no pidfd_open here: %v", err)
	}
	gone := os.NewFile(uintptr(fd), "pidfd")
	defer gone.Close()
	cmd.Wait()
	ctx := context.WithValue(context.Background(), peerKey{}, &peerResult{peer: Peer{PID: int32(cmd.Process.Pid)}, pidfd: gone})
	if err := CallerStillThere(ctx); !errors.Is(err, ErrRefused) {
		t.Errorf("exited caller: err = %v, want ErrRefused", err)
	}
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	alive := os.NewFile(uintptr(self), "pidfd")
	defer alive.Close()
	ctx = context.WithValue(context.Background(), peerKey{}, &peerResult{peer: Peer{PID: int32(os.Getpid())}, pidfd: alive})
	if err := CallerStillThere(ctx); err != nil {
		t.Errorf("live caller: err = %v, want nil", err)
	}
}

// TestPeerPIDFDOfARealConnection: the server gets a pidfd for a real
// client (SO_PEERPIDFD, or pidfd_open where the kernel lacks it) that
// names the client process.
func TestPeerPIDFDOfARealConnection(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: dir + "/s", Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	f := peerPIDFD(sc, int32(os.Getpid()))
	if f == nil {
		t.Skip("neither SO_PEERPIDFD nor pidfd_open on this kernel")
	}
	defer f.Close()
	if err := unix.PidfdSendSignal(int(f.Fd()), 0, nil, 0); err != nil {
		t.Errorf("pidfd of this live process: %v", err)
	}
}
