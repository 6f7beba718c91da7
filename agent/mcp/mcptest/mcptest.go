// Package mcptest is a real MCP server for tests, built with the same
// go-sdk latch's client uses: a test binary runs it as a stdio server
// (Main, when EnvServer is set), or serves it over streamable HTTP on
// loopback (Handler). Its tools misbehave on request: they sleep, crash,
// hang with a grandchild, return huge or binary results, and echo what
// they were sent.
package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Environment of a stdio run.
const (
	// EnvServer makes Main serve over stdio: "1", or "garbage" to print a
	// line that is not JSON on stdout first.
	EnvServer = "LATCH_TEST_MCP_SERVER"
	// EnvDir is a directory the server writes its notes in: "sleeping"
	// when a sleep began, "cancelled" when a sleep was cancelled, "grandchild" with the pid of the
	// process hang started, "started" appended at every start.
	EnvDir = "LATCH_TEST_MCP_DIR"
)

// Sidecar is the latch-mcp binary (cmd/latch-mcp) a test binary builds,
// once, the first time a test asks for it (go build's cache makes that
// quick after the first time): not in TestMain, which also runs when a
// test re-executes its binary as a server or a client, maybe outside the
// module. The zero value is ready; Remove it after m.Run.
type Sidecar struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds the sidecar if it is not built yet and returns its path.
func (s *Sidecar) Path() (string, error) {
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "latch-mcp-"); s.err != nil {
			return
		}
		s.path = filepath.Join(s.dir, "latch-mcp")
		cmd := exec.Command("go", "build", "-o", s.path, "github.com/latchd/latch/cmd/latch-mcp")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			s.err = fmt.Errorf("go build ./cmd/latch-mcp: %w\n%s", err, out)
		}
	})
	return s.path, s.err
}

// MustPath is Path, failing t when the build fails.
func (s *Sidecar) MustPath(t testing.TB) string {
	t.Helper()
	path, err := s.Path()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Remove removes the built binary, if any.
func (s *Sidecar) Remove() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// Main serves over stdio and exits when EnvServer is set; otherwise it
// returns. Call it first in TestMain.
func Main() {
	mode := os.Getenv(EnvServer)
	if mode == "" {
		return
	}
	note("started", strconv.Itoa(os.Getpid())+"\n", true)
	if mode == "garbage" {
		fmt.Println("Starting server… this is not JSON")
	}
	err := NewServer().Run(context.Background(), &sdk.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func note(name, text string, appendTo bool) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		return
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(dir+"/"+name, flags, 0o600)
	if err != nil {
		return
	}
	f.WriteString(text)
	f.Close()
}

// Handler serves the server over streamable HTTP, to requests that carry
// header name with value want; others get 401.
func Handler(name, want string) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return NewServer() }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(name) != want {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

type echoArgs struct {
	Text string `json:"text"`
}

type sleepArgs struct {
	Seconds float64 `json:"seconds"`
}

type sizeArgs struct {
	Bytes int `json:"bytes"`
}

type none struct{}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// NewServer returns the server with its tools.
func NewServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo text back."},
		func(_ context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, any, error) {
			return text("echo: " + a.Text), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "sleep", Description: "Sleep, noting a cancellation."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a sleepArgs) (*sdk.CallToolResult, any, error) {
			note("sleeping", "sleeping\n", false)
			select {
			case <-time.After(time.Duration(a.Seconds * float64(time.Second))):
				return text("slept"), nil, nil
			case <-ctx.Done():
				note("cancelled", "cancelled\n", false)
				return nil, nil, ctx.Err()
			}
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exit at once."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Start a grandchild in a session of its own, then never answer."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			cmd := exec.Command("sleep", "1000")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			note("grandchild", strconv.Itoa(cmd.Process.Pid), false)
			for { // deaf to cancellation, as a wedged server is
				time.Sleep(time.Hour)
			}
		})
	sdk.AddTool(s, &sdk.Tool{Name: "huge", Description: "Return a text of the given size."},
		func(_ context.Context, _ *sdk.CallToolRequest, a sizeArgs) (*sdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", a.Bytes)), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "env", Description: "List the environment."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			env := os.Environ()
			slices.Sort(env)
			return text(strings.Join(env, "\n")), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "headers", Description: "List the HTTP request's headers."},
		func(_ context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
			var b strings.Builder
			if req.Extra != nil {
				for k, v := range req.Extra.Header {
					fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(v, ", "))
				}
			}
			return text(b.String()), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "image", Description: "Return a small PNG."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "a picture:"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nfake")},
			}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "grow", Description: "Add the tool extra (the server announces its changed list)."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(s, &sdk.Tool{Name: "extra", Description: "Added later."},
				func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
					return text("extra"), nil, nil
				})
			return text("grown"), nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Fail with an error result."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it failed"}}}, nil, nil
		})
	return s
}
