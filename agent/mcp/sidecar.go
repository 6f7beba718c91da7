package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/latchd/latch/agent/mcp/wire"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/internal/pageout"
)

// SidecarName is the sidecar's file name, next to the latch binary.
const SidecarName = "latch-mcp"

// ErrNoSidecar marks a sidecar binary that is not there.
var ErrNoSidecar = errors.New("the MCP sidecar is missing")

// DefaultSidecar is where the sidecar is looked for: next to the running
// binary (os.Executable).
func DefaultSidecar() string {
	exe, err := os.Executable()
	if err != nil {
		return SidecarName
	}
	return filepath.Join(filepath.Dir(exe), SidecarName)
}

// CheckSidecar says whether path is an executable file, and if not how
// to build it (SidecarFix).
func CheckSidecar(path string) error {
	fi, err := os.Stat(path)
	if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return nil
	}
	return fmt.Errorf("%w at %s: MCP servers need it; %s", ErrNoSidecar, path, SidecarFix(path))
}

// SidecarFix is what builds the sidecar at path, from latch's source tree.
func SidecarFix(path string) string {
	return fmt.Sprintf("build it beside latch, in latch's source tree: CGO_ENABLED=0 go build -trimpath -ldflags=\"-s -w\" -o %s ./cmd/latch-mcp", filepath.Dir(path))
}

// sidecar keeps one sidecar process (cmd/latch-mcp) running while
// sessions need it: started on the first dial, started again on the next
// dial after it died, stopped by close.
type sidecar struct {
	m *Manager

	mu     sync.Mutex
	cur    *sidecarProc
	closed bool
}

// sidecarProc is one sidecar process and the daemon's ends of its pipes.
type sidecarProc struct {
	proc   *tools.Process
	fds    *net.UnixConn
	stderr *tools.StderrTail
	reader sync.WaitGroup

	wmu sync.Mutex // one request, with its pipes, at a time
	enc *json.Encoder

	mu       sync.Mutex
	nextID   uint64
	pending  map[uint64]chan wire.Reply
	sessions map[uint64]*session
	dead     chan struct{}
	err      error // why it died; set before dead closes
}

// session is one server's session in the sidecar.
type session struct {
	p     *sidecarProc
	id    uint64
	tools []wire.Tool
	// onTools receives the server's new tool list.
	onTools func([]wire.Tool)

	endOnce sync.Once
	ended   chan struct{}
	err     error // how it ended; set before ended closes
}

func (s *session) end(err error) {
	s.endOnce.Do(func() {
		s.err = err
		close(s.ended)
	})
}

// get returns the running sidecar, starting one if there is none.
func (sc *sidecar) get() (*sidecarProc, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closed {
		return nil, errors.New("the MCP client is stopping")
	}
	if p := sc.cur; p != nil {
		select {
		case <-p.dead:
			p.stop()
		default:
			return p, nil
		}
	}
	p, err := sc.start()
	if err != nil {
		return nil, err
	}
	sc.cur = p
	return p, nil
}

// start starts the sidecar as the servers are started: its own process
// group and cgroup, tracked by the reaper, in the workspace, with the
// minimal environment (no token or key reaches it), non-dumpable once it
// runs.
func (sc *sidecar) start() (*sidecarProc, error) {
	path := sc.m.opts.Sidecar
	if path == "" {
		path = DefaultSidecar()
	}
	if err := CheckSidecar(path); err != nil {
		return nil, err
	}
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("MCP sidecar socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "mcp-fds"), os.NewFile(uintptr(pair[1]), "mcp-fds-sidecar")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("MCP sidecar socket: %w", err)
	}
	p := &sidecarProc{fds: c.(*net.UnixConn), stderr: &tools.StderrTail{},
		pending: map[uint64]chan wire.Reply{}, sessions: map[uint64]*session{}, dead: make(chan struct{})}
	p.proc, err = tools.StartProcess(tools.ProcessOptions{
		Dir: sc.m.opts.Dir, Env: sidecarEnv(sc.m.opts.Environ), Stderr: p.stderr,
		Reaper: sc.m.opts.Reaper, Cgroups: sc.m.opts.Cgroups, ExtraFiles: []*os.File{theirs},
	}, path)
	if err != nil {
		p.fds.Close()
		return nil, fmt.Errorf("start the MCP sidecar: %w", err)
	}
	p.enc = json.NewEncoder(p.proc.Stdin())
	p.reader.Go(p.read)
	sc.m.log.Info("MCP sidecar started", "pid", p.proc.Pid())
	return p, nil
}

// close stops the sidecar: its input closes, then it is killed whole.
func (sc *sidecar) close() {
	sc.mu.Lock()
	sc.closed = true
	p := sc.cur
	sc.cur = nil
	sc.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// pid is the running sidecar's process id; 0 for none.
func (sc *sidecar) pid() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.cur == nil {
		return 0
	}
	return sc.cur.proc.Pid()
}

func (p *sidecarProc) stop() {
	p.proc.Stdin().Close()
	select {
	case <-p.proc.Done():
	case <-time.After(stopGrace):
	}
	p.proc.Kill()
	p.fds.Close()
	p.reader.Wait()
}

// read dispatches the sidecar's replies and events until its output
// ends; then every pending request fails and every session ends.
func (p *sidecarProc) read() {
	dec := json.NewDecoder(p.proc.Stdout())
	var err error
	for {
		var r wire.Reply
		if err = dec.Decode(&r); err != nil {
			break
		}
		p.dispatch(r)
	}
	why := errors.New("the MCP sidecar exited")
	if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
		why = fmt.Errorf("the MCP sidecar's output is broken: %w", err)
	}
	if line := p.stderr.LastLine(); line != "" {
		why = fmt.Errorf("%w (stderr: %s)", why, oneLine(line, 200))
	}
	p.mu.Lock()
	p.err = why
	close(p.dead)
	sessions := p.sessions
	p.sessions = map[uint64]*session{}
	p.mu.Unlock()
	for _, s := range sessions {
		s.end(why)
	}
}

func (p *sidecarProc) dispatch(r wire.Reply) {
	p.mu.Lock()
	if r.ID != 0 {
		if ch := p.pending[r.ID]; ch != nil {
			delete(p.pending, r.ID)
			ch <- r
		}
		p.mu.Unlock()
		return
	}
	s := p.sessions[r.Conn]
	if s != nil && r.Event == wire.EventEnded {
		delete(p.sessions, r.Conn)
	}
	p.mu.Unlock()
	if s == nil {
		return
	}
	switch r.Event {
	case wire.EventEnded:
		err := errors.New("the connection ended")
		if r.Err != "" {
			err = fmt.Errorf("the connection ended: %s", r.Err)
		}
		s.end(err)
	case wire.EventTools:
		s.onTools(r.Tools)
	}
}

// send writes req (after the pipes of a stdio dial) and returns where its
// reply will come; a cancel has none.
func (p *sidecarProc) send(req wire.Request, pipes ...*os.File) (uint64, chan wire.Reply, error) {
	p.mu.Lock()
	p.nextID++
	req.ID = p.nextID
	var ch chan wire.Reply
	if req.Op != wire.OpCancel {
		ch = make(chan wire.Reply, 1)
		p.pending[req.ID] = ch
	}
	p.mu.Unlock()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if len(pipes) > 0 {
		fds := make([]int, len(pipes))
		for i, f := range pipes {
			fds[i] = int(f.Fd())
		}
		if _, _, err := p.fds.WriteMsgUnix(wire.FDPayload(req.Conn), syscall.UnixRights(fds...), nil); err != nil {
			p.forget(req.ID)
			return 0, nil, fmt.Errorf("pass the server's pipes to the MCP sidecar: %w", err)
		}
	}
	if err := p.enc.Encode(req); err != nil {
		p.forget(req.ID)
		return 0, nil, fmt.Errorf("the MCP sidecar does not listen: %w", err)
	}
	return req.ID, ch, nil
}

func (p *sidecarProc) forget(id uint64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// roundTrip sends req and waits for its reply, ctx or the sidecar's end;
// a request ctx gives up on is cancelled in the sidecar.
func (p *sidecarProc) roundTrip(ctx context.Context, req wire.Request, pipes ...*os.File) (wire.Reply, error) {
	id, ch, err := p.send(req, pipes...)
	if err != nil {
		return wire.Reply{}, err
	}
	select {
	case r := <-ch:
		if r.Err != "" {
			return r, errors.New(r.Err)
		}
		return r, nil
	case <-p.dead:
		return wire.Reply{}, p.err
	case <-ctx.Done():
		p.forget(id)
		if req.Op == wire.OpCall {
			_, _, _ = p.send(wire.Request{Op: wire.OpCancel, Target: id})
		}
		return wire.Reply{}, context.Cause(ctx)
	}
}

// dial starts a session with srv in the sidecar: over proc's pipes for a
// stdio server, else over HTTP.
func (sc *sidecar) dial(ctx context.Context, srv Server, proc *tools.Process, onTools func([]wire.Tool)) (*session, error) {
	p, err := sc.get()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.nextID++
	s := &session{p: p, id: p.nextID, onTools: onTools, ended: make(chan struct{})}
	p.sessions[s.id] = s
	p.mu.Unlock()
	req := wire.Request{Op: wire.OpDial, Conn: s.id,
		Server: &wire.Server{Name: srv.Name, URL: srv.URL, Headers: srv.Headers, Timeout: srv.Timeout}}
	var pipes []*os.File
	if proc != nil {
		req.Server.Stdio = true
		pipes = []*os.File{proc.Stdout().(*os.File), proc.Stdin().(*os.File)}
	}
	r, err := p.roundTrip(ctx, req, pipes...)
	if err != nil {
		p.mu.Lock()
		delete(p.sessions, s.id)
		p.mu.Unlock()
		// A start the sidecar still finishes ends with the process, or,
		// over HTTP, within the sidecar's own timeout.
		return nil, err
	}
	s.tools = r.Tools
	return s, nil
}

// call runs tool in the session; ctx ending cancels it in the server.
func (s *session) call(ctx context.Context, tool string, args json.RawMessage) (wire.Reply, error) {
	return s.p.roundTrip(ctx, wire.Request{Op: wire.OpCall, Conn: s.id, Tool: tool, Args: args})
}

// close ends the session in the sidecar, which closes its copies of the
// server's pipes, within stopGrace.
func (s *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	_, _ = s.p.roundTrip(ctx, wire.Request{Op: wire.OpClose, Conn: s.id})
	s.p.mu.Lock()
	delete(s.p.sessions, s.id)
	s.p.mu.Unlock()
	s.end(errors.New("closed"))
}

// sidecarEnv is the sidecar's environment: the minimal one, plus the
// daemon's LATCH_NO_PAGEOUT=1, which keeps the sidecar's start-up pages
// as it keeps the daemon's.
func sidecarEnv(environ []string) []string {
	if environ == nil {
		environ = os.Environ()
	}
	var extra map[string]string
	if slices.Contains(environ, pageout.EnvNoPageOut+"=1") {
		extra = map[string]string{pageout.EnvNoPageOut: "1"}
	}
	return minimalEnv(environ, extra)
}
