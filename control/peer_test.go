package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// otherUIDEnv, when set in the environment, turns the test binary into
// the client of TestOtherUIDRefused: it calls Status on the socket the
// variable names and reports the result through its exit code.
const otherUIDEnv = "LATCH_CONTROL_TEST_OTHER_UID_SOCKET"

// Exit codes of the other-uid client.
const (
	exitAdmitted = 0
	exitRefused  = 3
	exitOther    = 4
)

func TestMain(m *testing.M) {
	if path := os.Getenv(otherUIDEnv); path != "" {
		os.Exit(otherUIDClient(path))
	}
	os.Exit(m.Run())
}

func otherUIDClient(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := NewClient(path).Status(ctx)
	fmt.Printf("client uid=%d err=%v\n", os.Getuid(), err)
	switch {
	case err == nil:
		return exitAdmitted
	case errors.Is(err, ErrRefused):
		return exitRefused
	default:
		return exitOther
	}
}

// TestPeerUIDMismatch shows a peer whose uid is not the daemon's gets 403
// on every route, before routing, and the backend is never called. The
// server is told to expect a uid other than the test's, so this runs
// without root; TestOtherUIDRefused does it with a real second user.
func TestPeerUIDMismatch(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, nil, func(s *Server) { s.uid = uint32(os.Getuid()) + 1 })
	for _, tc := range []struct{ method, url, body string }{
		{"POST", "/v1/pair", `{"gateway":"telegram","ttl":"10m"}`},
		{"POST", "/v1/unpair", `{"gateway":"telegram"}`},
		{"GET", "/v1/status", ``},
		{"GET", "/v1/pair", ``},
		{"GET", "/v1/nope", ``},
	} {
		status, eb := rawDo(t, ts.path, tc.method, tc.url, tc.body)
		if status != http.StatusForbidden || eb.Code != codeRefused {
			t.Errorf("%s %s: got %d %q, want 403 %q", tc.method, tc.url, status, eb.Code, codeRefused)
		}
	}
	c := NewClient(ts.path)
	_, err := c.Mint(t.Context(), MintRequest{Gateway: "telegram"})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), fmt.Sprintf("uid %d", os.Getuid())) {
		t.Errorf("Mint from the wrong uid = %v, want ErrRefused naming the caller's uid", err)
	}
	if n := b.callCount(); n != 0 {
		t.Errorf("backend called %d times for a refused peer, want 0", n)
	}
}

// TestPeerCredentialsUnreadable shows the server fails closed: when the
// peer's credentials cannot be read, every request is refused.
func TestPeerCredentialsUnreadable(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, nil, func(s *Server) {
		s.peerCred = func(net.Conn) (Peer, error) { return Peer{}, errors.New("getsockopt: bad file descriptor") }
	})
	status, eb := rawDo(t, ts.path, "POST", "/v1/pair", `{"gateway":"telegram"}`)
	if status != http.StatusForbidden || eb.Code != codeRefused {
		t.Errorf("got %d %q, want 403 %q", status, eb.Code, codeRefused)
	}
	if strings.Contains(eb.Error, "bad file descriptor") {
		t.Errorf("refusal leaks the internal error: %q", eb.Error)
	}
	if _, err := NewClient(ts.path).Status(t.Context()); !errors.Is(err, ErrRefused) {
		t.Errorf("Status = %v, want ErrRefused", err)
	}
	if n := b.callCount(); n != 0 {
		t.Errorf("backend called %d times without peer credentials, want 0", n)
	}
}

// TestPeerFromContext shows the backend sees the kernel's view of the
// caller: this very process.
func TestPeerFromContext(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, nil, nil)
	if _, err := NewClient(ts.path).Mint(t.Context(), MintRequest{Gateway: "telegram"}); err != nil {
		t.Fatal(err)
	}
	want := Peer{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), PID: int32(os.Getpid())}
	if got := b.seenPeers(); len(got) != 1 || got[0] != want {
		t.Errorf("backend saw peers %+v, want [%+v]", got, want)
	}
	if p, ok := PeerFromContext(context.Background()); ok {
		t.Errorf("PeerFromContext(no peer) = %+v, true; want false", p)
	}
}

func TestPeerCredentialsNotUnixConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if p, err := peerCredentials(a); err == nil {
		t.Errorf("peerCredentials(net.Pipe) = %+v, want an error", p)
	}
}

// TestOtherUIDRefused runs a real client as uid 65534 against a server
// running as root. The directory and socket are opened to everyone for
// this test only, so the peer uid check is all that stands in the way.
func TestOtherUIDRefused(t *testing.T) {
	requireRoot(t, "to run a client as another uid (65534)")
	var logs syncBuffer
	b := newFakeBackend()
	ts := startServer(t, b, testLogger(t, &logs), nil)
	dir := filepath.Dir(ts.path)
	for p, mode := range map[string]os.FileMode{dir: 0o777, ts.path: 0o777} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary sits in go's private build directory, which uid
	// 65534 cannot enter; run a copy.
	bin := filepath.Join(dir, "control.test")
	copyExecutable(t, bin)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = []string{otherUIDEnv + "=" + ts.path}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	code := -1
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err == nil {
		code = 0
	} else {
		t.Fatalf("run client as uid 65534: %v\n%s", err, out)
	}
	if code != exitRefused || !strings.Contains(string(out), "client uid=65534") {
		t.Errorf("client as uid 65534: exit %d, output %q; want exit %d (refused)", code, out, exitRefused)
	}
	if n := b.callCount(); n != 0 {
		t.Errorf("backend called %d times for uid 65534, want 0", n)
	}
	if !strings.Contains(logs.String(), "peer_uid=65534") {
		t.Errorf("refusal not logged with the kernel-reported uid; log:\n%s", logs.String())
	}
	// The same socket still serves its owner.
	if _, err := NewClient(ts.path).Status(t.Context()); err != nil {
		t.Errorf("Status as the owner: %v", err)
	}
}

func copyExecutable(t *testing.T, dst string) {
	t.Helper()
	src, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
