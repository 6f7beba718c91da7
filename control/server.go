package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/latchd/latch/logkey"
)

const (
	// maxSocketPath is sizeof(sun_path) on Linux minus the trailing NUL.
	maxSocketPath = 107
	// probeTimeout bounds the check for a live daemon on an existing
	// socket; a daemon answers a local connect at once.
	probeTimeout = time.Second
	// shutdownTimeout is how long Serve lets in-flight requests finish
	// after its context ends.
	shutdownTimeout = 5 * time.Second

	// Limits on what a caller can make the daemon hold or wait for. The
	// callers are the owner's own processes, but a stuck or buggy one
	// must not pin a goroutine or memory forever.
	maxBodyBytes      = 64 << 10
	maxHeaderBytes    = 16 << 10
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
)

// Server serves the control API on a Unix socket. Create it with Listen,
// run it with Serve.
type Server struct {
	log     *slog.Logger
	backend Backend
	path    string
	ln      *net.UnixListener
	sock    os.FileInfo // the socket file Listen created; only it is removed
	http    *http.Server

	// uid is the only peer uid admitted: the daemon's own. It is a field,
	// not a call to os.Getuid per request, so tests can make the server
	// refuse them without a second account.
	uid uint32
	// peerCred asks the kernel who is on the other end of a connection.
	// A field so tests can make it fail and see the server fail closed.
	peerCred func(net.Conn) (Peer, error)

	serving    atomic.Bool
	removeOnce sync.Once
	// pidfds are the open connections' peer pidfds, closed with them.
	pidfds sync.Map // net.Conn → *os.File
}

// Listen creates the control socket at path and returns a Server ready to
// Serve. It refuses to start unless path's directory is owned by the
// current user and closed to group and others, and it never removes
// anything at path but a stale socket that nobody answers on.
func Listen(path string, b Backend, log *slog.Logger) (*Server, error) {
	if b == nil {
		return nil, errors.New("control: nil Backend")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("control socket path %s is %d bytes, but Unix sockets allow at most %d: use a shorter LATCH_HOME", path, len(path), maxSocketPath)
	}
	uid := os.Getuid()
	if err := checkSocketDir(filepath.Dir(path), uid); err != nil {
		return nil, err
	}
	if err := clearStaleSocket(path); err != nil {
		return nil, err
	}
	ln, fi, err := bindSocket(path)
	if err != nil {
		return nil, err
	}
	s := &Server{
		log:      log,
		backend:  b,
		path:     path,
		ln:       ln,
		sock:     fi,
		uid:      uint32(uid),
		peerCred: peerCredentials,
	}
	s.http = &http.Server{
		Handler:           s.authorize(s.routes()),
		ConnContext:       s.connContext,
		ConnState:         s.connState,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// checkSocketDir refuses a socket directory that someone other than uid
// could enter: connect(2) needs search permission on every directory of
// the path, so a private directory keeps other users away from the socket
// whatever the socket's own mode is.
func checkSocketDir(dir string, uid int) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("control socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("control socket directory %s is not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("control socket directory %s: cannot read its owner", dir)
	}
	if int(st.Uid) != uid {
		return fmt.Errorf("control socket directory %s is owned by uid %d, not by uid %d that runs latch; the socket must live in a directory only you can enter: run \"chown %d %s\" or use a LATCH_HOME you own", dir, st.Uid, uid, uid, dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("control socket directory %s has mode %#o, so other users could reach the socket; it must be 0700: run \"chmod 700 %s\"", dir, perm, dir)
	}
	return nil
}

// clearStaleSocket makes path free for bind: nothing there, or a socket
// nobody answers on (a daemon that died), which it removes. A live daemon
// or anything that is not a socket is left alone and reported.
//
// Two daemons starting at the same instant could both find the same stale
// socket; the daemon opens latch.db (bbolt holds an exclusive flock on it)
// before listening, which serializes them.
func clearStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control socket path %s exists and is not a socket; refusing to remove it: move it away and start again", path)
	}
	conn, err := net.DialTimeout("unix", path, probeTimeout)
	switch {
	case err == nil:
		conn.Close()
		return fmt.Errorf("%w: a daemon answers on %s", ErrAlreadyRunning, path)
	case errors.Is(err, syscall.ENOENT):
		return nil // removed since the Lstat
	case !errors.Is(err, syscall.ECONNREFUSED):
		// Not provably stale (e.g. a busy daemon with a full backlog):
		// removing it could orphan a live daemon.
		return fmt.Errorf("control socket %s exists and its owner could not be reached, so it is left in place: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale control socket: %w", err)
	}
	return nil
}

// bindSocket creates the listening socket at path with mode 0600.
//
// bind(2) creates the file as 0777 &^ umask, and connect(2) needs only
// write permission on it, so between bind and chmod a loose umask would
// leave it open. We do not narrow the umask around bind: the umask belongs
// to the process, not the thread, so changing it would race with every
// other goroutine of the daemon that creates files. The window is closed
// instead by checkSocketDir, which ran first: nobody but us can resolve a
// path inside a 0700 directory we own, so the socket is unreachable to
// other users from the moment it exists. The chmod then makes the file say
// 0600 too, so the socket stays private even if the directory is loosened
// later; and SO_PEERCRED checks every connection regardless of both.
func bindSocket(path string) (*net.UnixListener, os.FileInfo, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("listen on control socket: %w", err)
	}
	// Serve and Close remove the file themselves, and only if it is still
	// the one created here.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, os.FileInfo, error) {
		ln.Close()
		os.Remove(path)
		return nil, nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		return fail(fmt.Errorf("mode is %v after chmod, want a socket with 0600", fi.Mode()))
	}
	return ln, fi, nil
}

// connContext records the peer's credentials once per connection, when it
// is accepted. A failure is recorded too, and every request on that
// connection is then refused.
//
// A pid of 0 or less is refused too: SO_PEERCRED reports 0 for a peer in
// another pid namespace, whose ancestry cannot be looked at.
func (s *Server) connContext(ctx context.Context, c net.Conn) context.Context {
	p, err := s.peerCred(c)
	if err == nil && p.PID <= 0 {
		err = fmt.Errorf("peer credentials: pid %d (a process in another pid namespace?)", p.PID)
	}
	res := &peerResult{peer: p, err: err}
	if err == nil {
		if res.pidfd = peerPIDFD(c, p.PID); res.pidfd != nil {
			s.pidfds.Store(c, res.pidfd)
		}
	}
	return context.WithValue(ctx, peerKey{}, res)
}

// connState closes a connection's peer pidfd when it ends.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	if f, ok := s.pidfds.LoadAndDelete(c); ok {
		f.(*os.File).Close()
	}
}

// Serve answers requests until ctx ends, then shuts down gracefully
// (in-flight requests get a few seconds to finish) and removes the socket
// file. It returns nil after a shutdown through ctx or Close.
func (s *Server) Serve(ctx context.Context) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("control: Serve called twice")
	}
	defer s.removeSocket()
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(s.ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		s.http.Close() // drop connections the failed accept loop leaves behind
		return fmt.Errorf("control: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := s.http.Shutdown(sctx)
	if err != nil {
		s.http.Close()
	}
	<-errc
	if err != nil {
		return fmt.Errorf("control: shutdown: %w", err)
	}
	return nil
}

// Close stops the server at once, dropping in-flight requests, and removes
// the socket file. It is safe to call more than once and with or without
// Serve.
func (s *Server) Close() error {
	err := s.http.Close()
	// http.Server.Close only closes listeners Serve has started using.
	if cerr := s.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
		err = cerr
	}
	s.removeSocket()
	return err
}

// removeSocket deletes the socket file if it is still the one Listen
// created; a file some other process has put there since is not ours.
func (s *Server) removeSocket() {
	s.removeOnce.Do(func() {
		fi, err := os.Lstat(s.path)
		if err != nil || !os.SameFile(fi, s.sock) {
			return
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("control: remove socket", "path", s.path, logkey.Err, err)
		}
	})
}
