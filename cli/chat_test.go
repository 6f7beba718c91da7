package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/daemon"
)

const testModelKey = "sk-ant-cli-MODELkeyDoNotLeak"

// modelHome makes a latch home whose config.toml points the agent at a
// fake Anthropic API.
func modelHome(t *testing.T) (*anthropictest.Server, string) {
	t.Helper()
	home := testHome(t)
	if _, errOut, code := cli(t, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errOut)
	}
	fake := anthropictest.New(testModelKey)
	t.Cleanup(fake.Close)
	toml := fmt.Sprintf("[agent]\nprovider = \"anthropic\"\napi_key = %q\nbase_url = %q\nmodel = \"claude-test\"\n",
		testModelKey, fake.URL())
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return fake, home
}

// chatCLI runs `latch chat` through Main with stdin fed from a pipe, as a
// script would.
func chatCLI(t *testing.T, stdin string) (string, string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString(stdin); err != nil {
		t.Fatal(err)
	}
	w.Close()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old }()
	return cli(t, "chat")
}

// lastBody is the body of the model request the fake received last.
func lastBody(fake *anthropictest.Server) string {
	reqs := fake.Requests()
	if len(reqs) == 0 {
		return ""
	}
	return string(reqs[len(reqs)-1].Body)
}

func TestChatStandaloneTextTurn(t *testing.T) {
	fake, _ := modelHome(t)
	fake.Script(anthropictest.Text("Hello from the model."))
	out, errOut, code := chatCLI(t, "hi there\n")
	if code != 0 {
		t.Fatalf("chat: exit %d, stderr %q", code, errOut)
	}
	// No prompt or banner on a pipe: just the answer.
	if want := "Hello from the model.\n"; out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	if !strings.Contains(lastBody(fake), "hi there") {
		t.Errorf("the model did not get the text: %s", lastBody(fake))
	}
}

func TestChatStandaloneApproval(t *testing.T) {
	writeA := anthropictest.ToolUse("toolu_1", "write_file", `{"path":"a.txt","content":"made by the agent"}`)
	writeB := anthropictest.ToolUse("toolu_2", "write_file", `{"path":"b.txt","content":"and this"}`)
	for _, tc := range []struct {
		name, stdin string
		script      []anthropictest.Reply
		asks        int      // approval prompts shown
		files       []string // files that must exist afterwards
		noFiles     []string
		wantOut     []string
	}{
		{name: "yes", stdin: "write a\ny\n", script: []anthropictest.Reply{writeA, anthropictest.Text("Done.")},
			asks: 1, files: []string{"a.txt"},
			wantOut: []string{"🔐 Allow write_file?\n   │ a.txt (17 bytes)\n   │ made by the agent\n", "y(es) / n(o) / a(lways): y\n", "⚙ write_file: a.txt", "Done.\n"}},
		{name: "no", stdin: "write a\nn\n", script: []anthropictest.Reply{writeA, anthropictest.Text("Left it.")},
			asks: 1, noFiles: []string{"a.txt"},
			wantOut: []string{"✗ write_file: denied: the owner declined this call", "Left it.\n"}},
		{name: "asks again until it understands", stdin: "write a\nmaybe\nYES\n", script: []anthropictest.Reply{writeA, anthropictest.Text("Done.")},
			asks: 1, files: []string{"a.txt"}},
		{name: "end of input denies", stdin: "write a\n", script: []anthropictest.Reply{writeA, anthropictest.Text("Left it.")},
			asks: 1, noFiles: []string{"a.txt"}, wantOut: []string{"denied"}},
		{name: "always stops asking for the tool", stdin: "write both\na\n",
			script: []anthropictest.Reply{writeA, writeB, anthropictest.Text("Both.")},
			asks:   1, files: []string{"a.txt", "b.txt"}, wantOut: []string{"⚙ write_file: b.txt", "Both.\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, home := modelHome(t)
			fake.Script(tc.script...)
			out, errOut, code := chatCLI(t, tc.stdin)
			if code != 0 {
				t.Fatalf("chat: exit %d, stderr %q, stdout %q", code, errOut, out)
			}
			if n := strings.Count(out, "🔐 Allow"); n != tc.asks {
				t.Errorf("asked %d times, want %d:\n%s", n, tc.asks, out)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			ws := filepath.Join(home, "workspace")
			for _, f := range tc.files {
				if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
					t.Errorf("%s was not written: %v", f, err)
				}
			}
			for _, f := range tc.noFiles {
				if _, err := os.Stat(filepath.Join(ws, f)); err == nil {
					t.Errorf("%s was written though the call was denied", f)
				}
			}
		})
	}
}

func TestChatNewForgets(t *testing.T) {
	fake, _ := modelHome(t)
	fake.Script(anthropictest.Text("One."), anthropictest.Text("Two."))
	out, errOut, code := chatCLI(t, "my name is Ada\n/new\nwho am I?\n/exit\nnever sent\n")
	if code != 0 {
		t.Fatalf("chat: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "New session") {
		t.Errorf("no word of the new session:\n%s", out)
	}
	if body := lastBody(fake); strings.Contains(body, "Ada") || !strings.Contains(body, "who am I?") {
		t.Errorf("the second turn's request: %s", body)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2 (nothing after /exit)", n)
	}
}

func TestChatWithoutModel(t *testing.T) {
	testHome(t)
	out, errOut, code := chatCLI(t, "hello\n")
	if code != 0 || !strings.Contains(out, "No model is configured") || !strings.Contains(out, "provider = \"anthropic\"") {
		t.Errorf("chat without a model: exit %d, stdout %q, stderr %q; want 0 and the guidance", code, out, errOut)
	}
}

// startDaemon runs a daemon in-process on the current LATCH_HOME and
// returns what stops it (the test's cleanup stops it too).
func startDaemon(t *testing.T, home string) (stop func()) {
	t.Helper()
	cfg, err := config.Load(home)
	if err != nil {
		t.Fatal(err)
	}
	d := daemon.New(cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), "test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("daemon exited: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("daemon not ready within 20s")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestChatThroughDaemon: with a daemon running (it holds the store, so the
// chat cannot have run on its own), the turn and the approval go through
// the control socket.
func TestChatThroughDaemon(t *testing.T) {
	fake, home := modelHome(t)
	startDaemon(t, home)
	fake.Script(
		anthropictest.ToolUse("toolu_1", "write_file", `{"path":"d.txt","content":"via the daemon"}`),
		anthropictest.Text("Written through the daemon."),
	)
	out, errOut, code := chatCLI(t, "write d\ny\n")
	if code != 0 {
		t.Fatalf("chat: exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	for _, want := range []string{"🔐 Allow write_file?\n   │ d.txt (14 bytes)\n   │ via the daemon\n", "⚙ write_file: d.txt", "Written through the daemon.\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, "workspace", "d.txt")); string(b) != "via the daemon" {
		t.Errorf("d.txt = %q, %v", b, err)
	}
}

// watched is an io.Writer whose content a test can wait for.
type watched struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor polls cond until it holds, failing the test after 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestChatCtrlCStopsTurn: Ctrl-C during a turn stops the turn — its
// command's whole process group is killed — and the chat goes on; at the
// prompt, Ctrl-C leaves. On its own and through the daemon.
func TestChatCtrlCStopsTurn(t *testing.T) {
	for _, mode := range []string{"standalone", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			fake, home := modelHome(t)
			var backend control.ChatBackend
			if mode == "daemon" {
				startDaemon(t, home)
				backend = control.NewClient(config.SocketPath(home))
			} else {
				cfg, err := config.Load(home)
				if err != nil {
					t.Fatal(err)
				}
				chat, err := daemon.OpenChat(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { chat.Close() })
				backend = chat
			}
			lines := make(chan string)
			ints := make(chan os.Signal, 1)
			out := &watched{}
			ui := &chatUI{backend: backend, lines: lines, out: out, interrupts: ints}
			done := make(chan error, 1)
			go func() { done <- ui.run(t.Context()) }()

			fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo $$ > pgid; sleep 60"}`))
			lines <- "sleep a while"
			waitFor(t, "the approval prompt", func() bool { return strings.Contains(out.String(), "a(lways): ") })
			lines <- "y"
			pgidFile := filepath.Join(home, "workspace", "pgid")
			waitFor(t, "the command to start", func() bool { b, _ := os.ReadFile(pgidFile); return strings.HasSuffix(string(b), "\n") })
			ints <- os.Interrupt
			waitFor(t, "the turn to stop", func() bool { return strings.Contains(out.String(), "Stopped.") })
			b, _ := os.ReadFile(pgidFile)
			pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pgid <= 1 {
				t.Fatalf("pgid file: %q", b)
			}
			waitFor(t, "the command's process group to go", func() bool { return syscall.Kill(-pgid, 0) == syscall.ESRCH })

			// The chat goes on, on the same session.
			fake.Script(anthropictest.Text("Still here."))
			lines <- "are you there?"
			waitFor(t, "the next answer", func() bool { return strings.Contains(out.String(), "Still here.\n") })
			if body := lastBody(fake); !strings.Contains(body, "stopped") {
				t.Errorf("the model was not told the turn was stopped: %s", body)
			}
			ints <- os.Interrupt
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Ctrl-C at the prompt did not leave")
			}
		})
	}
}

// TestChatSpellsOutControlCharacters: the model's text and a tool's name
// reach the terminal with escape sequences and other control characters
// spelled out, so a steered model cannot redraw the screen or retitle it.
func TestChatSpellsOutControlCharacters(t *testing.T) {
	fake, _ := modelHome(t)
	fake.Script(
		anthropictest.ToolUse("toolu_1", "write_file", `{"path":"a\u001b[2J.txt","content":"x"}`),
		anthropictest.Text("Done.\u001b]0;pwned\u0007 \u001b[1A\rAllow"),
	)
	out, errOut, code := chatCLI(t, "write\ny\n")
	if code != 0 {
		t.Fatalf("chat: exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("stdout carries raw control characters: %q", out)
	}
	if !strings.Contains(out, `Done.\u{001B}]0;pwned\u{0007}`) {
		t.Errorf("stdout does not spell out the escape sequence: %q", out)
	}
}

// TestChatRunsCommands: `!ls -la` typed in latch chat runs in the
// workspace as it does from the chat, without approval; it used to go to
// the model. With no model configured, chat still runs commands and
// answers plain text with the hint, where it used to exit 78. (Through a
// daemon the command runs the same way, in the chat's own process: a
// daemon in this test's process would reap its shell, as the subreaper it
// is, so that case is not run here.)
func TestChatRunsCommands(t *testing.T) {
	t.Run("with a model", func(t *testing.T) {
		fake, home := modelHome(t)
		os.WriteFile(filepath.Join(home, "workspace", "here.txt"), []byte("x"), 0o600)
		out, errOut, code := chatCLI(t, "!ls -la\n!exit 3\n")
		if code != 0 || !strings.Contains(out, "here.txt") || !strings.Contains(out, "exit 3") {
			t.Errorf("chat !ls: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if n := len(fake.Requests()); n != 0 {
			t.Errorf("the model got %d requests for !commands", n)
		}
	})
	t.Run("without a model", func(t *testing.T) {
		home := testHome(t)
		cli(t, "init")
		out, errOut, code := chatCLI(t, "hello\n!pwd\n")
		if code != 0 || !strings.Contains(out, "No model is configured") || !strings.Contains(out, filepath.Join(home, "workspace")) {
			t.Errorf("chat without a model: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}
