package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/mcp"
	"github.com/latchd/latch/agent/mcp/mcptest"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
)

// mcpSidecar is the latch-mcp binary the tests run.
var mcpSidecar mcptest.Sidecar

func TestMain(m *testing.M) {
	mcptest.Main() // this test binary is also the MCP server the tests run
	code := m.Run()
	mcpSidecar.Remove()
	os.Exit(code)
}

// withMCP adds the Go test server as MCP server "go" to the fixture's
// toolbox, running until the test ends; dir gets the server's notes.
func withMCP(t *testing.T, perm string, perms map[string]string) (tweak func(*Config), dir string) {
	dir = t.TempDir()
	m := mcp.New(mcp.Options{Dir: t.TempDir(), Permissions: perms, Sidecar: mcpSidecar.MustPath(t), Servers: []mcp.Server{{
		Name: "go", Command: os.Args[0], Timeout: 20 * time.Second, Permission: perm,
		Env: map[string]string{mcptest.EnvServer: "1", mcptest.EnvDir: dir},
	}}})
	m.Start(context.Background())
	t.Cleanup(m.Close)
	waitFor(t, "the MCP server to run", func() bool { return len(m.Tools()) > 0 })
	return func(c *Config) { c.Tools.MCP = m }, dir
}

func TestMCPToolAskedThenCalled(t *testing.T) {
	tweak, _ := withMCP(t, "ask", map[string]string{"go.env": "deny"})
	f := newFixture(t, tweak)
	f.fake.Script(anthropictest.ToolUse("t1", "go__echo", `{"text":"hi there"}`), anthropictest.Text("done"))
	ev := &recorder{}
	ev.onAsk = func(a Approval) { f.agent.Decide(chat, a.ID, Approve) }
	if err := f.turn(t, "echo", ev); err != nil {
		t.Fatal(err)
	}
	_, _, approvals := ev.snapshot()
	if len(approvals) != 1 || approvals[0].Tool != "go__echo" ||
		!strings.Contains(approvals[0].Detail, `MCP server "go", tool "echo"`) || !strings.Contains(approvals[0].Detail, `"text": "hi there"`) {
		t.Fatalf("approvals %+v, want one naming server, tool and arguments", approvals)
	}
	reqs := f.fake.Requests()
	var offered []string
	for _, tl := range reqs[0].Params.Tools {
		offered = append(offered, tl.Name)
	}
	if !slices.Contains(offered, "go__echo") || slices.Contains(offered, "go__env") || !slices.Contains(offered, ToolRead) {
		t.Errorf("offered %v: want go__echo beside latch's tools, and not the denied go__env", offered)
	}
	msgs := reqs[1].Params.Messages
	if got := msgs[len(msgs)-1].Content[0].ResultText(); got != "echo: hi there" {
		t.Errorf("the model got %q, want the server's answer", got)
	}
}

func TestMCPDeniedToolIsNotRun(t *testing.T) {
	tweak, _ := withMCP(t, "allow", map[string]string{"go.env": "deny"})
	f := newFixture(t, tweak)
	f.fake.Script(anthropictest.ToolUse("t1", "go__env", `{}`), anthropictest.Text("ok"))
	ev := &recorder{}
	if err := f.turn(t, "env", ev); err != nil {
		t.Fatal(err)
	}
	msgs := f.fake.Requests()[1].Params.Messages
	if got := msgs[len(msgs)-1].Content[0].ResultText(); !strings.HasPrefix(got, "denied") || strings.Contains(got, "PATH=") {
		t.Errorf("a denied MCP tool answered %q", got)
	}
}

// TestMCPStopDuringCall: /stop while an MCP tool sleeps ends the turn at
// once, and the server is told (notifications/cancelled).
func TestMCPStopDuringCall(t *testing.T) {
	tweak, dir := withMCP(t, "allow", nil)
	f := newFixture(t, tweak)
	f.fake.Script(anthropictest.ToolUse("t1", "go__sleep", `{"seconds":600}`))
	ctx, cancel := context.WithCancelCause(context.Background())
	ev := &recorder{}
	done := make(chan error, 1)
	go func() { done <- f.agent.Turn(ctx, chat, "sleep", ev) }()
	waitFor(t, "the call to start", func() bool { s, _, _ := ev.snapshot(); return len(s) == 1 })
	// The tool's start is shown before the call reaches the server
	// (through the sidecar): /stop once the server sleeps, so that there
	// is a call for it to cancel.
	waitFor(t, "the server to begin the call", func() bool {
		_, err := os.Stat(filepath.Join(dir, "sleeping"))
		return err == nil
	})
	cancel(errors.New("/stop"))
	if err := <-done; err == nil {
		t.Fatal("the stopped turn ended without an error")
	}
	waitFor(t, "the server to see the cancellation", func() bool {
		_, err := os.Stat(filepath.Join(dir, "cancelled"))
		return err == nil
	})
}

// TestMCPCallCutByARestartIsNotRepeated: an MCP call running when latch
// stopped (or died) is reported to the model as interrupted after the
// restart, never sent to the server again; the call that had finished
// keeps its result.
func TestMCPCallCutByARestartIsNotRepeated(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "shutdown", true: "crash"}[crash], func(t *testing.T) {
			tweak, dir := withMCP(t, "allow", nil)
			f := newFixture(t, tweak)
			f.fake.Script(anthropictest.ToolUse("t1", "go__echo", `{"text":"first"}`).
				AndToolUse("t2", "go__sleep", `{"seconds":600}`))
			cfg := cutWhileSecondCallRuns(t, f, "go", crash)
			// The cut can come before the call reached the server (the
			// tool's start is shown first); a call the server began is
			// cancelled there.
			if _, err := os.Stat(filepath.Join(dir, "sleeping")); err == nil {
				waitFor(t, "the cut call's cancellation", func() bool {
					_, err := os.Stat(filepath.Join(dir, "cancelled"))
					return err == nil
				})
			}
			os.Remove(filepath.Join(dir, "cancelled"))

			f.fake.Script(anthropictest.Text("The wait was cut."))
			resumed := &recorder{}
			if err := New(cfg).Resume(context.Background(), chat, resumed); err != nil {
				t.Fatal(err)
			}
			if len(resumed.started) != 0 {
				t.Errorf("the resumed step called %q again", resumed.started)
			}
			reqs := f.fake.Requests()
			msgs := reqs[len(reqs)-1].Params.Messages
			got := map[string]string{}
			for _, c := range msgs[len(msgs)-1].Content {
				got[c.ToolUseID] = c.ResultText()
			}
			if got["t1"] != "echo: first" || got["t2"] != noteInterrupted {
				t.Errorf("results after the restart %q, want the echo kept and the sleep %q", got, noteInterrupted)
			}
		})
	}
}

func TestMCPSeparator(t *testing.T) {
	if mcpSeparator != mcp.Separator {
		t.Fatalf("the agent splits MCP names at %q, agent/mcp joins them with %q", mcpSeparator, mcp.Separator)
	}
}

func TestMCPApprovalDetailRedacts(t *testing.T) {
	d := ApprovalDetail("notes__save", []byte(`{"title":"x","api_key":"sk-live-123456789","nested":{"Authorization":"Bearer abcdefghijk"},"h":"Bearer zzzzzzzzzz"}`))
	for _, leak := range []string{"sk-live", "abcdefghijk", "zzzzzzzzzz"} {
		if strings.Contains(d, leak) {
			t.Errorf("detail shows %q:\n%s", leak, d)
		}
	}
	if !strings.Contains(d, `MCP server "notes", tool "save"`) || !strings.Contains(d, `"title": "x"`) {
		t.Errorf("detail %q, want server, tool and the other arguments", d)
	}
	if s := Summary("notes__save", []byte(`{"password":"hunter2hunter2"}`)); strings.Contains(s, "hunter2") || !strings.HasPrefix(s, "notes › save") {
		t.Errorf("summary %q", s)
	}
}
