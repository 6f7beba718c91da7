package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/agent/mcp/mcptest"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/store"
)

// childEnv marks a test binary started as a daemon by TestE2EKill9.
const childEnv = "LATCH_TEST_DAEMON_CHILD"

// noHardenEnv makes a child daemon skip Harden: the control of
// TestE2ESecretsNotInTheDaemonsEnviron.
const noHardenEnv = "LATCH_TEST_NO_HARDEN"

// testSidecar is the latch-mcp binary of the daemons that have MCP
// servers.
var testSidecar mcptest.Sidecar

func TestMain(m *testing.M) {
	// A client first: one a child daemon's command starts inherits
	// childEnv.
	if op := os.Getenv(operatorClientEnv); op != "" {
		os.Exit(runOperatorClient(op))
	}
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	mcptest.Main() // the MCP server of e2e_mcp_test.go
	code := m.Run()
	testSidecar.Remove()
	os.Exit(code)
}

// runChild is a whole daemon in its own process, configured from the
// environment like `latch run`, so the test can kill it with SIGKILL.
func runChild() int {
	getenv := os.Getenv
	if os.Getenv(noHardenEnv) == "" {
		// As `latch run` does.
		var err error
		if getenv, err = Harden(); err != nil {
			os.Stderr.WriteString(err.Error())
			return 1
		}
	}
	home := os.Getenv(config.EnvHome)
	cfg, err := config.Loader{Getenv: getenv}.Load(home)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := New(cfg, log, "child").Run(ctx); err != nil {
		return 1
	}
	return 0
}

// TestE2EKill9 kills the daemon process with SIGKILL in the middle of a
// command, and again while messages wait in the platform's queue. After a
// restart the command is reported, not re-run, and the waiting messages run
// exactly once.
func TestE2EKill9(t *testing.T) {
	e := newEnv(t)
	child := e.startChild()
	e.pair()
	marker := filepath.Join(e.home, "ran")
	pidfile := filepath.Join(e.home, "pgid")
	e.say(owner, "!echo $$ > "+pidfile+"; echo x >> "+marker+"; sleep 30")
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return len(b) > 0 })
	child.Process.Kill()
	child.Wait()
	killGroup(pidfile)
	// Sent while no daemon runs: kept by the platform, handled after start.
	e.say(owner, "!echo while-down")

	e.startChild()
	e.waitReply(owner.ID, "interrupted by a restart")
	e.waitReply(owner.ID, "while-down")
	e.say(owner, "!echo after")
	e.waitReply(owner.ID, "after")
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the interrupted command ran again", b)
	}
	if n := e.repliesTo(owner.ID, "while-down"); n != 1 {
		t.Errorf("message sent while down answered %d times:%s", n, e.describeSent())
	}
}

// killGroup kills the process group whose id a killed daemon's command
// wrote to pidfile: the orphan would finish on its own; do not leave it
// behind.
func killGroup(pidfile string) {
	if b, err := os.ReadFile(pidfile); err == nil {
		if pgid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pgid > 1 {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
}

// agentTOML is a config.toml section for a child daemon's agent on the
// model fake at url, bash allowed.
func agentTOML(url string) string {
	return fmt.Sprintf("[agent]\nprovider = \"anthropic\"\nmodel = \"claude-test\"\nbase_url = %q\napi_key = %q\n\n[agent.permissions]\nbash = \"allow\"\n",
		url, modelKey)
}

// startChild runs the test binary as a daemon process on e's home and waits
// until its control socket answers.
func (e *env) startChild() *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1",
		config.EnvHome+"="+e.home,
		config.EnvTelegramToken+"="+testToken,
		config.EnvTelegramAPIURL+"="+e.tg.URL())
	cmd.Env = append(cmd.Env, e.childEnv...)
	cmd.Stderr = e.logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := e.client().Status(ctx)
		cancel()
		if err == nil {
			return cmd
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("child daemon not ready: %v\n%s", err, e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EKill9MidTurnResumes: SIGKILL while an agent tool runs. After the
// restart the turn resumes from its last completed step: the tool call is
// not run again, the model is told it was interrupted and decides what to
// do, and the chat is told.
func TestE2EKill9MidTurnResumes(t *testing.T) {
	e := newEnv(t)
	fake := anthropictest.New(modelKey)
	t.Cleanup(fake.Close)
	if err := os.WriteFile(filepath.Join(e.home, "config.toml"), []byte(agentTOML(fake.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	child := e.startChild()
	e.pair()
	marker := filepath.Join(e.home, "workspace", "ran")
	fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo $$ > pgid; echo x >> ran; sleep 30"}`))
	e.say(owner, "run the long job")
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return len(b) > 0 })
	child.Process.Kill()
	child.Wait()
	killGroup(filepath.Join(e.home, "workspace", "pgid"))

	fake.Script(anthropictest.Text("The job was cut by a restart. Shall I start it again?"))
	e.startChild()
	e.waitReply(owner.ID, "continuing from the last completed step")
	e.waitReply(owner.ID, "Shall I start it again?")
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the tool call ran again", b)
	}
	reqs := fake.Requests()
	if last := string(reqs[len(reqs)-1].Body); !strings.Contains(last, "interrupted by a restart") {
		t.Errorf("the model was not told: %s", last)
	}
}

// TestE2EKill9DuringStrangerFlood kills the daemon while strangers flood
// it, so batches of theirs are held in memory, confirmed to Telegram but
// not stored (see gateways.Hub.Ingest). After the restart the owner's
// command from before the kill has not run again, the one sent while down
// runs once, and no stranger was ever answered.
func TestE2EKill9DuringStrangerFlood(t *testing.T) {
	e := newEnv(t)
	child := e.startChild()
	e.pair()
	marker := filepath.Join(e.home, "ran")
	e.say(owner, "!echo x >> "+marker)
	e.waitReply(owner.ID, "exit 0")

	flood := func(stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			u := stranger
			u.ID += int64(i % 50)
			e.say(u, "!id")
			time.Sleep(time.Millisecond)
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	base := e.tg.ConfirmedOffset()
	go flood(stop, done)
	// Let the daemon take part of the flood, then kill it mid-flood.
	waitFor(t, func() bool { return e.tg.ConfirmedOffset() > base+300 })
	child.Process.Kill()
	child.Wait()
	close(stop)
	<-done
	confirmed := e.tg.ConfirmedOffset()
	db, err := store.Open(config.DBPath(e.home), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var cursor string
	db.View(func(tx *store.Tx) (err error) { cursor, err = tx.Cursor("telegram"); return err })
	db.Close()
	// Usually behind: what was held died with the process.
	t.Logf("at the kill Telegram had confirmed up to %d; the store's cursor was %s", confirmed, cursor)
	e.say(owner, "!echo while-down")

	e.startChild()
	e.waitReply(owner.ID, "while-down")
	e.say(owner, "!echo after")
	e.waitReply(owner.ID, "after")
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the owner's command ran again", b)
	}
	if n := e.repliesTo(owner.ID, "while-down"); n != 1 {
		t.Errorf("message sent while down answered %d times:%s", n, e.describeSent())
	}
	for i := range 50 {
		if got := e.tg.SentTo(stranger.ID + int64(i)); len(got) != 0 {
			t.Errorf("stranger %d got %d replies", i, len(got))
		}
	}
	if st := e.status(); st.StrangersDropped == 0 || st.Latch == nil {
		t.Errorf("status after the restart = %+v", st)
	}
}
