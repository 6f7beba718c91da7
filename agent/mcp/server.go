package mcp

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/latchd/latch/agent/mcp/wire"
	"github.com/latchd/latch/agent/provider"
	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/logkey"
)

// Restart back-off: the first retry after a second, doubling up to five
// minutes; a server that stayed up a minute starts again from a second.
const (
	firstBackoff = time.Second
	maxBackoff   = 5 * time.Minute
	healthyAfter = time.Minute
	// stopGrace is how long a stdio server has to exit after its stdin
	// closes before it is killed whole.
	stopGrace = 2 * time.Second
)

// server supervises one configured server: it starts it, lists its
// tools, and starts it again with back-off whenever it goes down.
type server struct {
	m       *Manager
	cfg     Server
	restart chan struct{}

	mu       sync.Mutex
	conn     *conn // nil while down
	state    string
	tools    []provider.Tool
	raw      map[string]bool
	skipped  []string
	restarts int
	err      string
	why      string // why a restart was asked for (not a failure)
}

// conn is one running session with the server, in the sidecar.
type conn struct {
	session *session
	proc    *tools.Process // stdio only
	stderr  *tools.StderrTail
}

func (s *server) run(ctx context.Context) {
	delay := firstBackoff
	for {
		s.setState("starting", nil)
		c, err := s.connect(ctx)
		if err == nil {
			up := time.Now()
			select {
			case <-c.session.ended:
			case <-ctx.Done():
			}
			err = s.down(c)
			if ctx.Err() != nil {
				return
			}
			if why := s.takeWhy(); why != "" {
				// Asked for (/new, a call that timed out): at once.
				s.m.log.Info("restarting MCP server", "mcp_server", s.cfg.Name, "why", why)
				continue
			}
			if time.Since(up) >= healthyAfter {
				delay = firstBackoff
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the session ended")
		}
		s.failed(err)
		s.m.log.Warn("MCP server is down; starting it again", "mcp_server", s.cfg.Name, logkey.Err, s.m.scrub(err.Error()), "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-s.restart:
			s.takeWhy()
		case <-time.After(delay):
		}
		delay = min(delay*2, maxBackoff)
	}
}

// connect starts the server (a stdio server's process is the daemon's;
// the sidecar gets its pipes), initialises the session and lists its
// tools, all within the server's timeout.
func (s *server) connect(ctx context.Context) (*conn, error) {
	c := &conn{}
	if s.cfg.Command != "" {
		path, err := exec.LookPath(s.cfg.Command)
		if err != nil {
			return nil, err
		}
		c.stderr = &tools.StderrTail{}
		p, err := tools.StartProcess(tools.ProcessOptions{
			Dir: s.m.opts.Dir, Env: minimalEnv(s.m.opts.Environ, s.cfg.Env), Stderr: c.stderr,
			Reaper: s.m.opts.Reaper, Cgroups: s.m.opts.Cgroups,
		}, path, s.cfg.Args...)
		if err != nil {
			return nil, err
		}
		c.proc = p
	}
	// The sidecar keeps the timeout itself; this one is for a sidecar
	// that does not answer.
	startCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout+stopGrace)
	defer cancel()
	session, err := s.m.sidecar.dial(startCtx, s.cfg, c.proc, func(list []wire.Tool) { s.relisted(c, list) })
	if err != nil {
		c.stop()
		return nil, s.explain(c, fmt.Errorf("start: %w", err))
	}
	c.session = session
	offered, raw, skipped := namespace(s.cfg.Name, s.cfg.Tools, session.tools)
	s.mu.Lock()
	s.conn, s.state, s.tools, s.raw, s.skipped = c, "running", offered, raw, skipped
	s.mu.Unlock()
	s.m.log.Info("MCP server running", "mcp_server", s.cfg.Name, "tools", len(offered), "not_offered", len(skipped))
	return c, nil
}

// relisted takes c's new tool list: the server said it changed.
func (s *server) relisted(c *conn, list []wire.Tool) {
	offered, raw, skipped := namespace(s.cfg.Name, s.cfg.Tools, list)
	s.mu.Lock()
	if s.conn == c {
		s.tools, s.raw, s.skipped = offered, raw, skipped
	}
	s.mu.Unlock()
	s.m.log.Info("MCP server's tools changed", "mcp_server", s.cfg.Name, "tools", len(offered))
}

// explain adds the last line the server wrote to stderr, if any.
func (s *server) explain(c *conn, err error) error {
	if c.stderr != nil {
		if line := c.stderr.LastLine(); line != "" {
			return fmt.Errorf("%w (stderr: %s)", err, oneLine(line, 200))
		}
	}
	return err
}

// down ends c: the session, then the process with all it started. It
// returns why the server went down when it was not asked to.
func (s *server) down(c *conn) error {
	s.mu.Lock()
	if s.conn == c {
		s.conn, s.tools, s.raw = nil, nil, nil
	}
	s.mu.Unlock()
	var err error
	select {
	case <-c.session.ended:
		err = c.session.err
		if c.proc != nil {
			select {
			case <-c.proc.Done():
				err = fmt.Errorf("it exited (%v)", c.proc.Err())
				if c.proc.Err() == nil {
					err = errors.New("it exited")
				}
			case <-time.After(stopGrace):
			}
		}
	default:
	}
	c.stop()
	if err != nil {
		return s.explain(c, err)
	}
	return nil
}

// stop closes the session (the sidecar closes its copies of the pipes)
// and kills the process whole: closing stdin first, as the protocol asks,
// then everything after stopGrace.
func (c *conn) stop() {
	if c.session != nil {
		c.session.close()
	}
	if c.proc != nil {
		c.proc.Stdin().Close()
		select {
		case <-c.proc.Done():
		case <-time.After(stopGrace):
		}
		c.proc.Kill()
	}
}

// kill ends c at once (a call timed out): the supervisor starts the
// server again.
func (s *server) kill(c *conn, why string) {
	s.mu.Lock()
	s.err, s.state = why, "down"
	s.restarts++
	if s.conn == c {
		s.conn, s.tools, s.raw = nil, nil, nil
	}
	s.mu.Unlock()
	if c.proc != nil {
		c.proc.Kill()
	}
	s.requestRestart(why)
}

func (s *server) requestRestart(why string) {
	s.mu.Lock()
	s.why = why
	c := s.conn
	s.mu.Unlock()
	if c != nil && c.session != nil {
		c.session.end(errors.New("closed")) // the supervisor sees it and stops c
	}
	select {
	case s.restart <- struct{}{}:
	default:
	}
}

func (s *server) takeWhy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	why := s.why
	s.why = ""
	// A wake-up left over from a request the supervisor already saw.
	select {
	case <-s.restart:
	default:
	}
	return why
}

func (s *server) setState(state string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = state
	if err != nil {
		s.err = s.m.scrub(err.Error())
	}
}

func (s *server) failed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = "down"
	s.err = s.m.scrub(err.Error())
	s.restarts++
}

func (s *server) current() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

func (s *server) lastError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == "" {
		return s.state
	}
	return s.err
}

func (s *server) hasTool(tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw[tool] || (s.conn == nil && (s.cfg.Tools == nil || slices.Contains(s.cfg.Tools, tool)))
}

func (s *server) toolList() []provider.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.cfg.Name, Transport: "http", State: s.state, Tools: len(s.tools),
		Restarts: s.restarts, Err: s.err, Skipped: slices.Clone(s.skipped)}
	for _, t := range s.tools {
		st.Offered = append(st.Offered, t.Name)
	}
	if s.cfg.Command != "" {
		st.Transport = "stdio"
	}
	if st.State == "" {
		st.State = "starting"
	}
	return st
}

// minimalEnv is what a stdio server's environment holds (see
// tools.MinimalEnv): no bot token, API key or LATCH_* variable reaches it
// unless the configuration names it.
func minimalEnv(environ []string, extra map[string]string) []string {
	return tools.MinimalEnv(environ, extra)
}
