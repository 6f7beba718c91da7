package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

const (
	dialTimeout = 5 * time.Second
	// requestTimeout caps a call whose ctx has no deadline, so a wedged
	// daemon cannot hang the CLI forever.
	requestTimeout = 30 * time.Second
	// maxResponseBytes bounds what the client reads from the daemon.
	maxResponseBytes = 1 << 20
	// baseURL's host is never resolved: every connection goes to the
	// socket.
	baseURL = "http://latch.sock"
)

// Client talks to a daemon's control socket. It is safe for concurrent use.
type Client struct {
	path string
	http *http.Client
}

// NewClient returns a Client for the socket at path. It does not connect
// until the first call.
func NewClient(path string) *Client {
	c := &Client{path: path}
	c.http = &http.Client{
		Transport: &http.Transport{
			// Every request goes to the socket whatever the URL says,
			// and never through a proxy from the environment.
			DialContext:        c.dial,
			Proxy:              nil,
			DisableCompression: true,
			MaxIdleConns:       1,
			IdleConnTimeout:    idleTimeout,
		},
		Timeout: requestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("control: the daemon does not redirect")
		},
	}
	return c
}

func (c *Client) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil && (errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)) {
		return nil, &noDaemonError{err: err}
	}
	return conn, err
}

// Mint asks the daemon for a pairing code.
func (c *Client) Mint(ctx context.Context, req MintRequest) (MintResult, error) {
	var res MintResult
	if err := c.do(ctx, http.MethodPost, "/v1/pair", req, &res); err != nil {
		return MintResult{}, fmt.Errorf("pair: %w", err)
	}
	return res, nil
}

// Unpair drops a gateway's latch.
func (c *Client) Unpair(ctx context.Context, gateway string) error {
	if err := c.do(ctx, http.MethodPost, "/v1/unpair", unpairRequest{Gateway: gateway}, nil); err != nil {
		return fmt.Errorf("unpair: %w", err)
	}
	return nil
}

// Status reports the daemon and its gateways.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	if err := c.do(ctx, http.MethodGet, "/v1/status", nil, &st); err != nil {
		return Status{}, fmt.Errorf("status: %w", err)
	}
	return st, nil
}

// do sends one request and decodes a 200 answer into out, or turns any
// other answer into an error carrying the daemon's message and sentinel.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, baseURL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if nd, ok := errors.AsType[*noDaemonError](err); ok {
			return nd // its message says it all; drop the URL noise
		}
		return err
	}
	defer resp.Body.Close()
	r := io.LimitReader(resp.Body, maxResponseBytes)
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp.StatusCode, r)
	}
	if out == nil {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	if err := json.NewDecoder(r).Decode(out); err != nil {
		return fmt.Errorf("decode daemon response: %w", err)
	}
	return nil
}

// decodeError builds the error for a non-200 answer.
func decodeError(status int, r io.Reader) error {
	var eb errorBody
	if err := json.NewDecoder(r).Decode(&eb); err != nil || eb.Error == "" {
		eb.Error = fmt.Sprintf("daemon answered %d %s", status, http.StatusText(status))
	}
	e := &apiError{msg: eb.Error}
	switch eb.Code {
	case codeUnknownGateway:
		e.sentinel = ErrUnknownGateway
	case codeNotLatched:
		e.sentinel = ErrNotLatched
	case codeRefused:
		e.sentinel = ErrRefused
	case codeBadJob:
		e.sentinel = ErrBadJob
	case codeLatched:
		e.sentinel = ErrLatched
	default:
		e.sentinel = chatSentinel(eb.Code)
	}
	return e
}

// apiError is an error answer from the daemon: its message, and the
// sentinel its code stands for, so errors.Is works across the socket.
type apiError struct {
	msg      string
	sentinel error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.sentinel }

// noDaemonError is a failed connect that means no daemon is running.
type noDaemonError struct{ err error }

func (e *noDaemonError) Error() string {
	return fmt.Sprintf("%v (%v)", ErrNoDaemon, e.err)
}

func (e *noDaemonError) Is(target error) bool { return target == ErrNoDaemon }
func (e *noDaemonError) Unwrap() error        { return e.err }
