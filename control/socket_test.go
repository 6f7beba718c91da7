package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSocketMode0600 shows the socket file is 0600 whatever the umask;
// bind alone would leave it 0777 under umask 0.
func TestSocketMode0600(t *testing.T) {
	for _, umask := range []int{0, 0o022, 0o077} {
		t.Run(fmt.Sprintf("umask %#o", umask), func(t *testing.T) {
			path := filepath.Join(socketDir(t), "latch.sock")
			old := syscall.Umask(umask)
			srv, err := Listen(path, newFakeBackend(), nil)
			syscall.Umask(old)
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			defer srv.Close()
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
				t.Errorf("socket mode = %v, want a socket with 0600", fi.Mode())
			}
		})
	}
}

func TestListenRefusesLooseDir(t *testing.T) {
	for _, mode := range []os.FileMode{0o750, 0o710, 0o705, 0o701, 0o770, 0o777, 0o777 | os.ModeSticky} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := socketDir(t)
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "latch.sock")
			srv, err := Listen(path, newFakeBackend(), nil)
			if err == nil {
				srv.Close()
				t.Fatalf("Listen in a %v directory succeeded, want a refusal", mode)
			}
			for _, want := range []string{dir, "chmod 700 " + dir} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a socket was created despite the refusal (Lstat: %v)", err)
			}
		})
	}
}

// TestCheckSocketDirOwner shows a directory owned by another uid is
// refused, without needing root: the check is asked about a uid that is not
// the directory's owner.
func TestCheckSocketDirOwner(t *testing.T) {
	dir := socketDir(t)
	if err := checkSocketDir(dir, os.Getuid()); err != nil {
		t.Fatalf("own 0700 directory refused: %v", err)
	}
	err := checkSocketDir(dir, os.Getuid()+1)
	if err == nil {
		t.Fatal("directory owned by another uid accepted")
	}
	for _, want := range []string{dir, "owned by uid", "chown"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestListenRefusesForeignDir is TestCheckSocketDirOwner through Listen,
// with a directory really owned by someone else; creating one takes root.
func TestListenRefusesForeignDir(t *testing.T) {
	requireRoot(t, "to chown a directory to another uid")
	dir := socketDir(t)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	srv, err := Listen(filepath.Join(dir, "latch.sock"), newFakeBackend(), nil)
	if err == nil {
		srv.Close()
		t.Fatal("Listen in a directory owned by uid 65534 succeeded")
	}
	if !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("error %q does not name the owner", err)
	}
}

func TestListenBadPaths(t *testing.T) {
	dir := socketDir(t)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing dir", filepath.Join(dir, "nope", "latch.sock"), "no such file"},
		{"dir is a file", filepath.Join(file, "latch.sock"), "not a directory"},
		{"too long", filepath.Join(dir, strings.Repeat("x", 120)), "at most 107"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Listen(tc.path, newFakeBackend(), nil)
			if err == nil {
				srv.Close()
				t.Fatal("Listen succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// staleSocket leaves a socket file at path that nobody listens on, as a
// daemon killed with SIGKILL does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("stale socket not left behind: %v %v", fi, err)
	}
}

func TestListenRemovesStaleSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "latch.sock")
	staleSocket(t, path)
	srv, err := Listen(path, newFakeBackend(), nil)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := NewClient(path).Status(t.Context()); err != nil {
		t.Errorf("Status after replacing the stale socket: %v", err)
	}
}

func TestListenLiveDaemon(t *testing.T) {
	ts := startServer(t, newFakeBackend(), nil, nil)
	srv, err := Listen(ts.path, newFakeBackend(), nil)
	if err == nil {
		srv.Close()
		t.Fatal("second Listen on a live socket succeeded")
	}
	if !errors.Is(err, ErrAlreadyRunning) || !strings.Contains(err.Error(), "already running") {
		t.Errorf("error = %q, want ErrAlreadyRunning saying \"already running\"", err)
	}
	if _, err := NewClient(ts.path).Status(t.Context()); err != nil {
		t.Errorf("first daemon unreachable after the refused second Listen: %v", err)
	}
}

// TestListenKeepsNonSocket shows that whatever else sits at the socket
// path is reported and left in place, never removed.
func TestListenKeepsNonSocket(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir, path string)
	}{
		{"regular file", func(t *testing.T, _, path string) {
			if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", func(t *testing.T, _, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink to a stale socket", func(t *testing.T, dir, path string) {
			target := filepath.Join(dir, "other.sock")
			staleSocket(t, target)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := socketDir(t)
			path := filepath.Join(dir, "latch.sock")
			tc.make(t, dir, path)
			before, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := Listen(path, newFakeBackend(), nil)
			if err == nil {
				srv.Close()
				t.Fatal("Listen succeeded")
			}
			if !strings.Contains(err.Error(), "not a socket") {
				t.Errorf("error %q does not say the path is not a socket", err)
			}
			after, err := os.Lstat(path)
			if err != nil || !os.SameFile(before, after) {
				t.Errorf("%s at the socket path was removed or replaced (Lstat: %v)", tc.name, err)
			}
		})
	}
}

func TestClientNoDaemon(t *testing.T) {
	dir := socketDir(t)
	stale := filepath.Join(dir, "stale.sock")
	staleSocket(t, stale)
	for _, tc := range []struct{ name, path string }{
		{"missing socket", filepath.Join(dir, "latch.sock")},
		{"missing dir", filepath.Join(dir, "gone", "latch.sock")},
		{"stale socket", stale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(tc.path)
			_, merr := c.Mint(t.Context(), MintRequest{Gateway: "telegram"})
			_, serr := c.Status(t.Context())
			uerr := c.Unpair(t.Context(), "telegram")
			for _, err := range []error{merr, serr, uerr} {
				if !errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), "not running") {
					t.Errorf("error = %v, want ErrNoDaemon", err)
				}
			}
		})
	}
}

func TestServeStopsOnCancel(t *testing.T) {
	b := newFakeBackend()
	ts := startServer(t, b, nil, nil)
	c := NewClient(ts.path)
	if _, err := c.Status(t.Context()); err != nil {
		t.Fatalf("Status: %v", err)
	}
	ts.stop()
	if err := ts.wait(t); err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	if _, err := os.Lstat(ts.path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file still there after Serve returned (Lstat: %v)", err)
	}
	if _, err := c.Status(t.Context()); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Status after shutdown = %v, want ErrNoDaemon", err)
	}
}

// blockingBackend holds Status until released, to catch a request in
// flight during shutdown.
type blockingBackend struct {
	*fakeBackend
	entered, release chan struct{}
}

func (b *blockingBackend) Status(ctx context.Context) (Status, error) {
	close(b.entered)
	<-b.release
	return b.fakeBackend.Status(ctx)
}

func TestServeFinishesInFlightRequest(t *testing.T) {
	b := &blockingBackend{newFakeBackend(), make(chan struct{}), make(chan struct{})}
	ts := startServer(t, b, nil, nil)
	got := make(chan error, 1)
	go func() {
		_, err := NewClient(ts.path).Status(context.Background())
		got <- err
	}()
	<-b.entered
	ts.stop()
	// Wait until shutdown has begun: it closes the listener first, so
	// connecting fails from then on.
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("unix", ts.path)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 5s after cancel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(b.release)
	if err := <-got; err != nil {
		t.Errorf("in-flight Status during shutdown: %v", err)
	}
	if err := ts.wait(t); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

func TestCloseRemovesSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "latch.sock")
	srv, err := Listen(path, newFakeBackend(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still there after Close (Lstat: %v)", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := srv.Serve(t.Context()); err != nil {
		t.Errorf("Serve after Close = %v, want nil", err)
	}
}

// TestShutdownKeepsOthersSocket shows Serve removes only the socket file
// it created, not one that has since replaced it.
func TestShutdownKeepsOthersSocket(t *testing.T) {
	ts := startServer(t, newFakeBackend(), nil, nil)
	if err := os.Remove(ts.path); err != nil {
		t.Fatal(err)
	}
	staleSocket(t, ts.path)
	before, err := os.Lstat(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	ts.stop()
	ts.wait(t)
	after, err := os.Lstat(ts.path)
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("shutdown removed a socket it did not create (Lstat: %v)", err)
	}
}

// requireRoot skips a test that needs root, saying why, unless
// LATCH_REQUIRE_ROOT_TESTS is set (as in the CI job that runs as root),
// where skipping would hide a security test and so fails instead.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Getuid() == 0 {
		return
	}
	msg := "needs root " + why + "; run as root (e.g. sudo -E go test -race ./control/)"
	if os.Getenv("LATCH_REQUIRE_ROOT_TESTS") != "" {
		t.Fatal(msg + ", LATCH_REQUIRE_ROOT_TESTS is set")
	}
	t.Skip(msg)
}
