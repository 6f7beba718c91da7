// Package mcpsdk is the side of latch's MCP client that speaks MCP, with
// the official go-sdk: the sidecar (cmd/latch-mcp) runs Serve, which takes
// the daemon's requests (agent/mcp/wire) and holds one SDK session per
// server. The daemon starts, owns and kills the servers' processes; the
// sidecar only gets their pipes. Only the sidecar links this package.
package mcpsdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchd/latch/agent/mcp/wire"
)

// maxFrame bounds one message a server sends (8 MiB): a bigger one ends
// the connection, and the daemon starts the server again.
const maxFrame = 8 << 20

// sidecar serves one daemon.
type sidecar struct {
	fds *net.UnixConn

	wmu sync.Mutex
	enc *json.Encoder

	mu       sync.Mutex
	sessions map[uint64]*session
	calls    map[uint64]context.CancelFunc
	wg       sync.WaitGroup

	// ready runs once, after the first server is dialled and its tools
	// listed (see dial); nil for none.
	ready     func()
	readyOnce sync.Once
}

// session is one server's.
type session struct {
	cs    *sdk.ClientSession
	files []*os.File // a stdio server's pipes
}

// Serve answers the requests read from in on out until in ends, then
// closes every session. fds is the socket stdio servers' pipes come on.
func Serve(in io.Reader, out io.Writer, fds *net.UnixConn) error {
	return serve(in, out, fds, nil)
}

// serve is Serve that runs ready once the sidecar is ready.
func serve(in io.Reader, out io.Writer, fds *net.UnixConn, ready func()) error {
	s := &sidecar{fds: fds, ready: ready, enc: json.NewEncoder(out), sessions: map[uint64]*session{}, calls: map[uint64]context.CancelFunc{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer s.wg.Wait()
	defer cancel()
	defer s.closeAll()
	dec := json.NewDecoder(in)
	for {
		var req wire.Request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read request: %w", err)
		}
		if err := s.handle(ctx, req); err != nil {
			return err
		}
	}
}

func (s *sidecar) handle(ctx context.Context, req wire.Request) error {
	switch req.Op {
	case wire.OpDial:
		if req.Server == nil {
			s.send(wire.Reply{ID: req.ID, Err: "dial without a server"})
			return nil
		}
		var files []*os.File
		if req.Server.Stdio {
			var err error
			if files, err = s.receivePipes(req.Conn); err != nil {
				return err // out of step with the daemon: it starts another sidecar
			}
		}
		s.wg.Go(func() { s.dial(ctx, req, files) })
	case wire.OpCall:
		callCtx, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		s.calls[req.ID] = cancel
		s.mu.Unlock()
		s.wg.Go(func() {
			defer s.endCall(req.ID)
			s.send(s.call(callCtx, req))
		})
	case wire.OpCancel:
		s.endCall(req.Target)
	case wire.OpClose:
		s.wg.Go(func() {
			s.closeSession(req.Conn)
			s.send(wire.Reply{ID: req.ID})
		})
	default:
		s.send(wire.Reply{ID: req.ID, Err: "unknown op " + req.Op})
	}
	return nil
}

// receivePipes reads the message that carries conn's pipes: the server's
// stdout, then its stdin.
func (s *sidecar) receivePipes(conn uint64) ([]*os.File, error) {
	buf := make([]byte, 16)
	oob := make([]byte, syscall.CmsgSpace(2*4))
	n, oobn, _, _, err := s.fds.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("receive pipes: %w", err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	var fds []int
	for _, m := range msgs {
		if err == nil {
			rights, rerr := syscall.ParseUnixRights(&m)
			err = rerr
			fds = append(fds, rights...)
		}
	}
	files := make([]*os.File, 0, len(fds))
	for _, fd := range fds {
		files = append(files, os.NewFile(uintptr(fd), "mcp-server-pipe"))
	}
	if err != nil || len(files) != 2 || string(buf[:n]) != string(wire.FDPayload(conn)) {
		closeFiles(files)
		return nil, fmt.Errorf("receive pipes of connection %d: got %d descriptors (%v)", conn, len(files), err)
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// dial starts the session: initialise and list the tools within the
// server's timeout.
func (s *sidecar) dial(ctx context.Context, req wire.Request, files []*os.File) {
	srv := req.Server
	var transport sdk.Transport
	if srv.Stdio {
		transport = &sdk.IOTransport{Reader: files[0], Writer: files[1], MaxLineLength: maxFrame}
	} else {
		transport = &sdk.StreamableClientTransport{
			Endpoint:             srv.URL,
			HTTPClient:           &http.Client{Transport: headerTransport{headers: srv.Headers}},
			DisableStandaloneSSE: true,
			MaxRetries:           -1,
			MaxEventSize:         maxFrame,
		}
	}
	startCtx, cancel := context.WithTimeout(ctx, srv.Timeout)
	defer cancel()
	sess := &session{files: files}
	client := sdk.NewClient(&sdk.Implementation{Name: "latch", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		// Not from the SDK's goroutine, which the listing's answer needs.
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			s.wg.Go(func() { s.relist(ctx, req.Conn, srv, sess) })
		},
	})
	cs, err := client.Connect(startCtx, transport, nil)
	if err != nil {
		closeFiles(files)
		s.send(wire.Reply{ID: req.ID, Err: fmt.Sprintf("start: %v", err)})
		return
	}
	s.mu.Lock()
	sess.cs = cs
	s.mu.Unlock()
	list, err := listTools(startCtx, cs)
	if err != nil {
		s.endSession(sess)
		s.send(wire.Reply{ID: req.ID, Err: err.Error()})
		return
	}
	s.mu.Lock()
	s.sessions[req.Conn] = sess
	s.mu.Unlock()
	s.send(wire.Reply{ID: req.ID, Tools: list})
	// Start-up is over: the SDK's client, its transports' set-up, the
	// JSON schemas of a listing and the request loop have all run once.
	// What runs from here (calls, listings, the wire) runs again and
	// faults back the few pages it needs.
	if s.ready != nil {
		s.readyOnce.Do(s.ready)
	}
	s.wg.Go(func() {
		err := cs.Wait()
		s.closeSession(req.Conn)
		r := wire.Reply{Event: wire.EventEnded, Conn: req.Conn}
		if err != nil {
			r.Err = err.Error()
		}
		s.send(r)
	})
}

func listTools(ctx context.Context, cs *sdk.ClientSession) ([]wire.Tool, error) {
	var list []wire.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			schema = nil
		}
		list = append(list, wire.Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return list, nil
}

// relist reads the tools again: the server said its list changed.
func (s *sidecar) relist(ctx context.Context, conn uint64, srv *wire.Server, sess *session) {
	ctx, cancel := context.WithTimeout(ctx, srv.Timeout)
	defer cancel()
	s.mu.Lock()
	cs := sess.cs
	s.mu.Unlock()
	if cs == nil {
		return // the notification came before the session was set up
	}
	list, err := listTools(ctx, cs)
	if err != nil {
		return // the daemon keeps the old list; a dead session is reported as ended
	}
	s.send(wire.Reply{Event: wire.EventTools, Conn: conn, Tools: list})
}

func (s *sidecar) call(ctx context.Context, req wire.Request) wire.Reply {
	s.mu.Lock()
	sess := s.sessions[req.Conn]
	s.mu.Unlock()
	if sess == nil {
		return wire.Reply{ID: req.ID, Err: "the session has ended"}
	}
	res, err := sess.cs.CallTool(ctx, &sdk.CallToolParams{Name: req.Tool, Arguments: req.Args})
	if err != nil {
		return wire.Reply{ID: req.ID, Err: err.Error()}
	}
	return wire.Reply{ID: req.ID, Text: render(res), IsError: res.IsError}
}

func (s *sidecar) endCall(id uint64) {
	s.mu.Lock()
	cancel := s.calls[id]
	delete(s.calls, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (s *sidecar) closeSession(conn uint64) {
	s.mu.Lock()
	sess := s.sessions[conn]
	delete(s.sessions, conn)
	s.mu.Unlock()
	if sess != nil {
		s.endSession(sess)
	}
}

func (s *sidecar) endSession(sess *session) {
	if sess.cs != nil {
		_ = sess.cs.Close()
	}
	closeFiles(sess.files)
}

func (s *sidecar) closeAll() {
	s.mu.Lock()
	conns := make([]uint64, 0, len(s.sessions))
	for c := range s.sessions {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		s.closeSession(c)
	}
}

func (s *sidecar) send(r wire.Reply) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.enc.Encode(r) // a daemon that went away ends the input too
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	headers map[string]string
}

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(req)
}
