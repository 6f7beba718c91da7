package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/schedule"
)

// testToken looks like a real bot token, so a leak is easy to grep for.
const testToken = "7012345678:AAF-e2eSECRETtokenVALUEdoNotLeak_x1"

var (
	owner    = telegramtest.User{ID: 1001, FirstName: "Owner", Username: "owner"}
	stranger = telegramtest.User{ID: 2002, FirstName: "Mallory", Username: "mallory"}
)

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is one latch home and a fake Telegram; daemons come and go on it.
type env struct {
	t    *testing.T
	home string
	tg   *telegramtest.Server
	logs *syncBuffer
	now  func() time.Time
	// tweak adjusts the loaded config before each start.
	tweak func(*config.Config)
	// grace is the daemons' shutdown grace; short, so tests that stop a
	// daemon mid-command do not wait.
	grace time.Duration
	// clock is the scheduled jobs' time; nil for the system's.
	clock schedule.Clock
	// stopNow is the daemons' StopNow (nil: none).
	stopNow chan struct{}

	// childEnv is added to a child daemon's environment (startChild).
	childEnv []string
	// sidecar is the daemons' MCPSidecar; "" for the one TestMain built.
	sidecar string

	mu     sync.Mutex
	offset time.Duration
	// pageOut has the daemon give back its start-up pages (of the test
	// binary) once ready, as latch run does.
	pageOut bool
	minted  []string // every pairing code minted, for the log scan
}

func newEnv(t *testing.T) *env {
	t.Helper()
	// Unix socket paths are short: keep the home near the root of /tmp.
	home, err := os.MkdirTemp("", "le")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Init(home); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, home: home, tg: telegramtest.New(testToken), logs: &syncBuffer{}, grace: 10 * time.Millisecond}
	e.now = func() time.Time {
		e.mu.Lock()
		defer e.mu.Unlock()
		return time.Now().Add(e.offset)
	}
	t.Cleanup(e.tg.Close)
	t.Cleanup(func() {
		// No secret in any log line, whatever the test did: the bot
		// tokens, the model keys, and every pairing code minted, in each
		// form a chat could have sent it.
		out := e.logs.String()
		secrets := map[string]string{
			"the Telegram token": testToken, "the Telegram token's secret part": strings.Split(testToken, ":")[1],
			"the Discord token": discordToken, "the Anthropic key": modelKey, "the OpenAI key": openaiKey,
			"the transcription key": transcribeKey,
		}
		e.mu.Lock()
		for _, c := range e.minted {
			bare := strings.ReplaceAll(c, "-", "")
			for _, form := range []string{bare, pairing.Format(bare)} {
				secrets["pairing code "+form] = form
				secrets["pairing code "+strings.ToLower(form)] = strings.ToLower(form)
			}
		}
		e.mu.Unlock()
		for what, secret := range secrets {
			if strings.Contains(out, secret) {
				t.Errorf("%s appears in the logs:\n%s", what, out)
			}
		}
	})
	return e
}

// advance moves the pairing clock forward.
func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.offset += d
	e.mu.Unlock()
}

func (e *env) config() *config.Config {
	e.t.Helper()
	vars := map[string]string{
		config.EnvTelegramToken:  testToken,
		config.EnvTelegramAPIURL: e.tg.URL(),
	}
	cfg, err := config.Loader{Getenv: func(k string) string { return vars[k] }}.Load(e.home)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.tweak != nil {
		e.tweak(cfg)
	}
	return cfg
}

// running is one in-process daemon.
type running struct {
	d      *Daemon
	cancel context.CancelFunc
	done   chan error
}

// start runs a daemon and waits until it is ready. The logger has no
// redaction, so the token test sees what the code itself logs.
func (e *env) start() *running {
	e.t.Helper()
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := e.config()
	d := New(cfg, log, "test")
	d.Now = e.now
	d.ShutdownGrace = e.grace
	d.Clock = e.clock
	d.StopNow = e.stopNow
	d.GiveBackStartup = e.pageOut
	d.MCPSidecar = e.sidecar
	if d.MCPSidecar == "" && len(cfg.MCP.Servers) > 0 {
		d.MCPSidecar = testSidecar.MustPath(e.t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-r.done:
		e.t.Fatalf("daemon exited before ready: %v\n%s", err, e.logs.String())
	case <-time.After(20 * time.Second):
		e.t.Fatal("daemon not ready within 20s")
	}
	e.t.Cleanup(func() { r.stop(e.t) })
	return r
}

// stop cancels the daemon and waits for Run to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("daemon Run: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not stop within 20s")
	}
}

func (e *env) client() *control.Client { return control.NewClient(config.SocketPath(e.home)) }

func (e *env) mint() string {
	e.t.Helper()
	return e.mintFor("telegram")
}

// mintFor mints a code for gateway through the control API, as `latch pair`
// does, and remembers it for the log scan.
func (e *env) mintFor(gateway string) string {
	e.t.Helper()
	return e.mintReq(control.MintRequest{Gateway: gateway})
}

// mintReq is mintFor with a whole request (--replace).
func (e *env) mintReq(req control.MintRequest) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := e.client().Mint(ctx, req)
	if err != nil {
		e.t.Fatalf("mint: %v", err)
	}
	e.mu.Lock()
	e.minted = append(e.minted, res.Code)
	e.mu.Unlock()
	return res.Code
}

func (e *env) status() control.GatewayStatus {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.client().Status(ctx)
	if err != nil || len(st.Gateways) != 1 {
		e.t.Fatalf("status: %+v, %v", st, err)
	}
	return st.Gateways[0]
}

// say sends text from u in u's private chat.
func (e *env) say(u telegramtest.User, text string) int {
	return e.tg.SendText(telegramtest.Private(u), u, text)
}

// waitReply waits for a message to chat whose visible text contains want.
func (e *env) waitReply(chatID int64, want string) telegramtest.Sent {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := e.tg.WaitSent(ctx, func(m telegramtest.Sent) bool {
		return m.ChatID == chatID && strings.Contains(m.Current(), want)
	})
	if err != nil {
		e.t.Fatalf("no reply to %d containing %q: %v\nsent: %s\nlogs:\n%s", chatID, want, err, e.describeSent(), e.logs.String())
	}
	return m
}

// waitConfirmed waits until the fake saw the bot confirm update id.
func (e *env) waitConfirmed(updateID int) {
	e.t.Helper()
	e.waitConfirmedWithin(updateID, 30*time.Second)
}

// waitConfirmedWithin is waitConfirmed with a deadline for long floods.
func (e *env) waitConfirmedWithin(updateID int, d time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := e.tg.Wait(ctx, func() bool { return e.tg.ConfirmedOffset() > updateID }); err != nil {
		e.t.Fatalf("update %d never confirmed (offset %d): %v", updateID, e.tg.ConfirmedOffset(), err)
	}
}

// repliesTo counts the messages sent to chatID whose text starts with prefix.
func (e *env) repliesTo(chatID int64, prefix string) int {
	n := 0
	for _, m := range e.tg.SentTo(chatID) {
		if strings.HasPrefix(m.Current(), prefix) {
			n++
		}
	}
	return n
}

func (e *env) describeSent() string {
	var b strings.Builder
	for _, m := range e.tg.Sent() {
		fmt.Fprintf(&b, "\n  → %d: %q", m.ChatID, m.Current())
	}
	return b.String()
}

// pair latches the owner's private chat.
func (e *env) pair() {
	e.t.Helper()
	e.say(owner, "/pair "+e.mint())
	e.waitReply(owner.ID, "Paired")
}
