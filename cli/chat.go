package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/latchd/latch/turn"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/daemon"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/logkey"
)

const (
	// busyWait is how long a new turn waits for the daemon to finish
	// unwinding the turn Ctrl-C just stopped.
	busyWait = 10 * time.Second
	// maxInputLine bounds one line typed or piped in.
	maxInputLine = 1 << 20
)

func newChatCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "chat",
		Short: "Chat with the agent in this terminal",
		Long: "chat talks to the agent from this terminal, in a session of its own (not the\n" +
			"Telegram chat's). When the daemon runs, the turns run there; otherwise chat\n" +
			"runs the agent itself with the same configuration, and `latch run` cannot\n" +
			"start until it ends.\n\n" +
			"!<command> runs a shell command in the workspace, as it does from the chat;\n" +
			"typed here, by the owner at the machine, it needs no approval, and it works\n" +
			"without a model too. Tool calls that need approval are answered y(es), n(o)\n" +
			"or a(lways). /new starts a fresh conversation, /exit or end of input leaves,\n" +
			"and Ctrl-C stops the turn or command that is running.",
		Args: cobra.NoArgs,
		RunE: runChat,
	}
}

func runChat(cmd *cobra.Command, _ []string) error {
	ctx := cmd.Context()
	tgt, err := openChat(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer tgt.close()
	in := cmd.InOrStdin()
	f, ok := in.(*os.File)
	interactive := ok && isTerminal(f)
	// Ctrl-C stops the running turn, not latch.
	ints := make(chan os.Signal, 1)
	signal.Notify(ints, os.Interrupt)
	defer signal.Stop(ints)
	done := make(chan struct{})
	defer close(done)
	ui := &chatUI{backend: tgt.backend, lines: readLines(in, done), out: cmd.OutOrStdout(),
		interrupts: ints, prompt: interactive, workspace: tgt.info.Workspace,
		noModel: !tgt.info.Enabled, shell: localShell(tgt.info.Workspace, tgt.bashTimeout)}
	if interactive {
		info := tgt.info
		if info.Enabled {
			fmt.Fprintf(ui.out, "latch chat · %s %s · %s\nworkspace: %s\n", info.Provider, info.Model, tgt.where, info.Workspace)
		} else {
			fmt.Fprintf(ui.out, "latch chat · no model is configured: !<command> runs a shell command · %s\nworkspace: %s\n", tgt.where, info.Workspace)
		}
		if info.Messages > 0 {
			fmt.Fprintf(ui.out, "Continuing a conversation of %d messages.\n", info.Messages)
		}
		fmt.Fprintln(ui.out, "!<command> runs a command, /new starts over, /exit leaves, Ctrl-C stops a turn or command.")
	}
	return ui.run(ctx)
}

// chatTarget is what runs the terminal's turns.
type chatTarget struct {
	backend control.ChatBackend
	info    control.ChatInfo
	where   string // for the banner
	close   func()
	// bashTimeout bounds a !command, as agent.bash_timeout does in the
	// chat.
	bashTimeout time.Duration
}

// openChat returns the daemon's chat, or, when no daemon runs, one that
// runs the agent in this process.
func openChat(ctx context.Context, stderr io.Writer) (*chatTarget, error) {
	home, err := config.HomeDir()
	if err != nil {
		return nil, err
	}
	client := control.NewClient(config.SocketPath(home))
	info, err := client.ChatInfo(ctx)
	if !errors.Is(err, control.ErrNoDaemon) {
		if err != nil {
			return nil, err
		}
		// The daemon's config, as far as this shell can tell: one that
		// no longer loads leaves the default.
		timeout := config.DefaultBashTimeout
		if cfg, err := config.Load(home); err == nil {
			timeout = cfg.Agent.BashTimeout
		}
		return &chatTarget{backend: client, info: info, where: "through the daemon", close: func() {}, bashTimeout: timeout}, nil
	}
	// Set up like a first `latch run` would; init never overwrites.
	if _, err := config.Init(home); err != nil {
		return nil, err
	}
	cfg, err := config.Load(home)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", daemon.ErrConfig, err)
	}
	secrets := &daemon.Secrets{}
	secrets.Add(configSecrets(cfg)...)
	log, err := newLogger(stderr, "text", "warn", secrets)
	if err != nil {
		return nil, err
	}
	chat, err := daemon.OpenChat(cfg, log)
	if err != nil {
		return nil, err
	}
	tgt := &chatTarget{backend: chat, where: "no daemon runs, so the agent runs here", bashTimeout: cfg.Agent.BashTimeout, close: func() {
		if err := chat.Close(); err != nil {
			log.Warn("closing the chat", logkey.Err, err)
		}
	}}
	if tgt.info, err = chat.ChatInfo(ctx); err != nil {
		tgt.close()
		return nil, err
	}
	return tgt, nil
}

// readLines delivers r's lines until r ends or done is closed. Nobody
// waits for its goroutine: a read from a terminal cannot be interrupted,
// and the process exits once chat returns.
func readLines(r io.Reader, done <-chan struct{}) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 4096), maxInputLine)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-done:
				return
			}
		}
	}()
	return lines
}

// chatUI is the terminal's side of the chat: it reads lines, runs turns
// and renders their events.
type chatUI struct {
	backend    control.ChatBackend
	lines      <-chan string
	out        io.Writer
	interrupts <-chan os.Signal
	prompt     bool // stdin is a terminal
	workspace  string
	noModel    bool // plain text gets MsgNoModel; !commands still run
	// shell runs a !command and returns its output and summary.
	shell func(ctx context.Context, command string) string

	// The fields below belong to the goroutine running the turn while
	// it runs, and to run otherwise.
	midLine bool // the last output did not end its line
	// dirty: the terminal echoed ^C after our output, so the next line
	// must start afresh. Set on Ctrl-C while the turn's goroutine runs.
	dirty    atomic.Bool
	streamed bool // answer text arrived since the last tool line
	ended    bool // the turn's final or error event arrived
	stopped  bool // the last turn was stopped with Ctrl-C
}

// run reads and handles lines until /exit, the end of input, or Ctrl-C at
// the prompt.
func (u *chatUI) run(ctx context.Context) error {
	for {
		if u.prompt {
			fmt.Fprint(u.out, "> ")
		}
		var line string
		var ok bool
		select {
		case line, ok = <-u.lines:
		case <-u.interrupts:
			ok = false
		case <-ctx.Done():
			return nil
		}
		if !ok {
			if u.prompt {
				fmt.Fprintln(u.out)
			}
			return nil
		}
		switch text := strings.TrimSpace(line); text {
		case "":
		case "/exit", "/quit":
			return nil
		case "/help":
			fmt.Fprintln(u.out, "Type a message for the agent, or !<command> for a shell command in the workspace.\n"+
				"/new starts a fresh conversation, /exit leaves, Ctrl-C stops the turn or command\n"+
				"that is running. Approvals: y(es), n(o), a(lways).")
		case "/new":
			if err := u.reset(ctx); err != nil {
				return err
			}
		default:
			if command, ok := strings.CutPrefix(text, "!"); ok {
				u.command(ctx, command)
				continue
			}
			if u.noModel {
				fmt.Fprintln(u.out, gateways.MsgNoModel)
				continue
			}
			if err := u.turn(ctx, text); err != nil {
				return err
			}
		}
	}
}

func (u *chatUI) reset(ctx context.Context) error {
	err := u.whenFree(ctx, func() error { return u.backend.ChatReset(ctx) })
	switch {
	case errors.Is(err, control.ErrChatBusy):
		fmt.Fprintln(u.out, "⚠ A turn is still running in the terminal chat; try again when it has finished.")
	case err != nil:
		return err
	default:
		fmt.Fprintln(u.out, "New session: the conversation so far is forgotten.")
	}
	return nil
}

// turn runs one turn; Ctrl-C meanwhile stops it and chat goes on.
func (u *chatUI) turn(ctx context.Context, text string) error {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u.midLine, u.streamed, u.ended = false, false, false
	done := make(chan error, 1)
	go func() { done <- u.start(tctx, text) }()
	interrupted := false
	for {
		select {
		case <-u.interrupts:
			interrupted = true
			u.dirty.Store(u.prompt)
			cancel()
		case err := <-done:
			return u.finish(err, interrupted)
		}
	}
}

// command runs a !command as the chat runs one, in the workspace, with
// the bash timeout and without latch's secrets in its environment; Ctrl-C
// meanwhile kills it, every process of it, and chat goes on.
func (u *chatUI) command(ctx context.Context, command string) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan string, 1)
	go func() { done <- u.shell(cctx, command) }()
	for {
		select {
		case <-u.interrupts:
			u.dirty.Store(u.prompt)
			cancel()
		case out := <-done:
			u.midLine = false
			u.endLine()
			u.write(out)
			u.endLine()
			return
		}
	}
}

// localShell runs !commands in this process: the terminal is the owner's
// at the machine, so nothing asks for approval, and the daemon is not
// needed (nor a model).
func localShell(workspace string, timeout time.Duration) func(context.Context, string) string {
	return func(ctx context.Context, command string) string {
		return daemon.Shell(ctx, tools.BashOptions{Dir: workspace, Timeout: timeout}, command)
	}
}

// start runs the turn on the backend.
func (u *chatUI) start(ctx context.Context, text string) error {
	return u.whenFree(ctx, func() error { return u.backend.ChatTurn(ctx, text, u.render(ctx)) })
}

// whenFree calls fn. Right after Ctrl-C the daemon may still be unwinding
// the stopped turn (killing its command, saving the session), so then a
// busy answer is retried for a while.
func (u *chatUI) whenFree(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(busyWait)
	for {
		err := fn()
		if !errors.Is(err, control.ErrChatBusy) || !u.stopped || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (u *chatUI) finish(err error, interrupted bool) error {
	u.stopped = interrupted
	u.endLine()
	switch {
	case interrupted:
		if !u.ended {
			fmt.Fprintln(u.out, "⚠ Stopped.")
		}
		return nil
	case err == nil:
		return nil
	case errors.Is(err, control.ErrChatBusy):
		fmt.Fprintln(u.out, "⚠ Another `latch chat` is running a turn; try again when it has finished.")
		return nil
	case errors.Is(err, control.ErrNoModel):
		return &codeError{code: exitConfig, err: errors.New(gateways.MsgNoModel)}
	}
	return err
}

// render returns the event handler of a turn whose context is ctx.
func (u *chatUI) render(ctx context.Context) func(control.ChatEvent) error {
	return func(ev control.ChatEvent) error {
		switch ev.Type {
		case control.EventText:
			u.write(ev.Text)
			u.streamed = true
			return nil
		case control.EventToolStarted:
			u.line("⚙ %s: %s", ev.Tool, ev.Summary)
		case control.EventToolFinished:
			if ev.Error != "" {
				u.line("✗ %s: %s", ev.Tool, turn.OneLine(ev.Error, 300))
			}
		case control.EventApproval:
			u.streamed = false
			return u.approve(ctx, ev)
		case control.EventFile:
			where := ev.Path
			if where == "" {
				where = u.workspace
			}
			u.line("📎 %s (%s) is in the workspace: %s", ev.Name, size(ev.Size), where)
		case control.EventFinal:
			// The answer streamed already, unless the model sent none.
			if !u.streamed {
				u.write(ev.Text)
			}
			u.ended = true
		case control.EventError:
			u.line("⚠ %s", ev.Text)
			u.ended = true
		}
		u.streamed = false
		return nil
	}
}

// approve asks the owner about a tool call and passes the answer on. The
// end of input denies.
func (u *chatUI) approve(ctx context.Context, ev control.ChatEvent) error {
	// The detail, not the one-line summary: a newline or the summary's
	// cut could hide a second command. It comes with control characters
	// spelled out, so it cannot redraw the terminal either.
	detail := ev.Detail
	if detail == "" {
		detail = ev.Summary
	}
	u.line("🔐 Allow %s?", ev.Tool)
	for _, l := range strings.Split(detail, "\n") {
		u.line("   │ %s", l)
	}
	for {
		u.write("   y(es) / n(o) / a(lways): ")
		var line string
		var ok bool
		select {
		case line, ok = <-u.lines:
		case <-ctx.Done():
			u.endLine()
			return nil
		}
		u.midLine = false // the answer's echo ended the line
		decision := control.DecisionDeny
		if ok {
			if !u.prompt {
				fmt.Fprintln(u.out, line) // echo what a terminal would have shown
			}
			if decision = answer(line); decision == "" {
				continue
			}
		} else {
			fmt.Fprintln(u.out, "n (end of input)")
		}
		err := u.backend.ChatDecide(ctx, ev.ID, decision)
		if errors.Is(err, control.ErrNoApproval) {
			u.line("⚠ That approval has expired or was already answered.")
			return nil
		}
		return err
	}
}

// answer reads an answer to an approval prompt; "" means it is none.
func answer(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "y", "yes":
		return control.DecisionApprove
	case "n", "no":
		return control.DecisionDeny
	case "a", "always":
		return control.DecisionAlways
	}
	return ""
}

// write prints streamed text and remembers whether it ended its line.
func (u *chatUI) write(s string) {
	if s == "" {
		return
	}
	fmt.Fprint(u.out, termSafe(s))
	u.midLine = !strings.HasSuffix(s, "\n")
}

// line prints a line of its own.
func (u *chatUI) line(format string, args ...any) {
	u.endLine()
	fmt.Fprint(u.out, termSafe(fmt.Sprintf(format, args...))+"\n")
}

// termSafe spells out the control characters of s other than newline and
// tab. What the daemon sends comes from the model, which a web page or a
// file can steer; raw, an escape sequence in it could move the cursor,
// rewrite what the terminal shows (an approval prompt among it) or set
// the window title.
func termSafe(s string) string {
	if !strings.ContainsFunc(s, isTermControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isTermControl(r) {
			fmt.Fprintf(&b, `\u{%04X}`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isTermControl(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }

func (u *chatUI) endLine() {
	if dirty := u.dirty.Swap(false); u.midLine || dirty {
		fmt.Fprintln(u.out)
		u.midLine = false
	}
}

// size is n bytes for people: "812 B", "12.3 KB", "4.0 MB".
func size(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1000*1000))
}
