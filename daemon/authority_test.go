package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

// ownerTmux starts a tmux server the way the owner's own terminal has one:
// outside the daemon's process tree, so the control socket cannot tell a
// command it runs from the owner typing. It returns the server's socket.
func ownerTmux(t *testing.T, e *env) string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("LATCH_REQUIRE_ROOT_TESTS") != "" {
			t.Fatal("tmux is not installed; .ci/run installs it")
		}
		t.Skip("tmux is not installed (CI installs it and runs this)")
	}
	sock := filepath.Join(e.home, "tmux.sock")
	start := exec.Command("tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "owner", "sleep 600")
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	return sock
}

// viaTmux hands the client to the tmux server at sock, as the issue's
// reproduction did: `tmux new-window -d "latch pair … > out"`.
func viaTmux(sock string) func(client, out string) string {
	return func(client, out string) string {
		return "tmux -S " + sock + " new-window -d \"" + client + " > " + out + ".tmp 2>&1; mv " + out + ".tmp " + out + "\""
	}
}

var mintedCode = regexp.MustCompile(`MINTED ([A-Z0-9]{4}-[A-Z0-9]{4})`)

// TestE2EMintOutsideTheTreeWaitsForTheOwner: the latched chat has the
// owner's tmux mint a --replace code (nothing on the machine can tell that
// apart from the owner), and a stranger redeems it. The stranger is told
// only that it waits; the owner's chat gets an approval request naming the
// stranger, when the code was minted and where from; the stranger's own
// press of its button, or typing its command, does nothing; the owner's
// press moves the latch and tells the old chat. Before the approval rule
// the code would have worked at once for a gateway not latched, and a
// latched gateway could not be moved at all.
func TestE2EMintOutsideTheTreeWaitsForTheOwner(t *testing.T) {
	e := newEnv(t)
	e.startChild()
	e.pair()
	sock := ownerTmux(t, e)
	out := fromChat(e, "tmux-mint", "mint-replace", viaTmux(sock))
	m := mintedCode.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the tmux mint printed %q, want a code (nothing can refuse it)", out)
	}
	e.minted = append(e.minted, m[1])
	e.waitReply(owner.ID, "pairing code for the telegram bot")
	e.say(stranger, "/pair "+m[1])
	e.waitReply(stranger.ID, "waiting for the owner's approval")
	req := e.waitReply(owner.ID, "Approve a new latch?")
	for _, want := range []string{"Mallory", "mallory", "minted at", "tmux", "bash"} {
		if !strings.Contains(req.Current(), want) {
			t.Errorf("the approval request does not say %q:\n%s", want, req.Current())
		}
	}
	var ok, no string
	for _, row := range req.Keyboard {
		for _, b := range row {
			switch {
			case strings.HasPrefix(b.CallbackData, "latch-ok:"):
				ok = b.CallbackData
			case strings.HasPrefix(b.CallbackData, "latch-no:"):
				no = b.CallbackData
			}
		}
	}
	if ok == "" || no == "" {
		t.Fatalf("the approval request has no Approve/Deny buttons: %+v", req.Keyboard)
	}
	id := strings.TrimPrefix(ok, "latch-ok:")
	// The stranger (or a model that learnt the payload) presses Approve in
	// its own chat and types the fallback: both are dropped by the chat
	// lock, as every stranger's message is.
	before := e.status().StrangersDropped
	e.tg.SendCallback(telegramtest.Private(stranger), stranger, req.MessageID, ok)
	e.say(stranger, "/approvelatch "+id)
	// The adapter may drop the press before the Hub sees it; the typed
	// command, sent after it, is counted when it is dropped.
	waitFor(t, func() bool { return e.status().StrangersDropped >= before+1 })
	if st := e.status(); st.Latch == nil || st.Latch.ChatID != strconv.FormatInt(owner.ID, 10) {
		t.Fatalf("latch after the stranger's press = %+v, want still the owner's", st.Latch)
	} else if len(st.Waiting) != 1 || st.Waiting[0].ChatID != strconv.FormatInt(stranger.ID, 10) {
		t.Errorf("status shows waiting latches %+v, want the stranger's", st.Waiting)
	}
	e.tg.SendCallback(telegramtest.Private(owner), owner, req.MessageID, ok)
	e.waitReply(owner.ID, "This chat was unlatched")
	e.waitReply(stranger.ID, "Paired")
	if st := e.status(); st.Latch == nil || st.Latch.ChatID != strconv.FormatInt(stranger.ID, 10) {
		t.Fatalf("latch after the owner's approval = %+v, want the new chat", st.Latch)
	}
}

// TestE2EUnpairThenMintOutsideTheTree: the reproduction's second half.
// The chat has the owner's tmux unpair the gateway and mint a fresh code;
// the unpair goes through (it is the brake), but nothing is latched to
// approve a new latch, so no code is minted during the grace period and the
// gateway cannot be handed to whoever the code would have gone to. Fails
// on the code before the approval rule: the mint printed a code.
func TestE2EUnpairThenMintOutsideTheTree(t *testing.T) {
	e := newEnv(t)
	e.startChild()
	e.pair()
	sock := ownerTmux(t, e)
	// The chat hears nothing once unpaired, so the output is read here.
	file := filepath.Join(e.home, "tmux-unpair-mint.out")
	client := operatorClientEnv + "=unpair-mint " + config.EnvHome + "=" + e.home + " " + os.Args[0]
	e.say(owner, "!"+viaTmux(sock)(client, file))
	waitFor(t, func() bool { _, err := os.Stat(file); return err == nil })
	b, _ := os.ReadFile(file)
	out := string(b)
	if !strings.Contains(out, "UNPAIRED") || !strings.Contains(out, "REFUSED") || strings.Contains(out, "MINTED") {
		t.Fatalf("unpair, then mint from tmux printed %q; want UNPAIRED, then REFUSED", out)
	}
	if st := e.status(); st.Latch != nil || st.Pending != nil {
		t.Fatalf("after it: latch %+v, pending %+v; want neither", st.Latch, st.Pending)
	}
}

// TestE2EOfflineUnpairThenMint: `!kill -9 $PPID; latch unpair; latch
// pair` — the CLI writes the store itself once no daemon answers, and
// checked nothing there. The unpair stands (and is announced at the next
// start); the mint is refused as it is through the socket. Fails on the
// code before the approval rule (the orphan minted a code).
func TestE2EOfflineUnpairThenMint(t *testing.T) {
	e := newEnv(t)
	e.startChild()
	e.pair()
	out := filepath.Join(e.home, "offline.out")
	client := operatorClientEnv + "=unpair-mint " + config.EnvHome + "=" + e.home + " " + os.Args[0]
	// The daemon kills a command's shell when it dies (Pdeathsig), so the
	// orphan that mints is a double-forked one, as in the issue.
	e.say(owner, "!(setsid sh -c 'sleep 0.5; "+client+" > "+out+".tmp 2>&1; mv "+out+".tmp "+out+"' &); kill -9 $PPID")
	waitFor(t, func() bool { _, err := os.Stat(out); return err == nil })
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "UNPAIRED") || !strings.Contains(string(b), "REFUSED") || strings.Contains(string(b), "MINTED") {
		t.Fatalf("the orphan's unpair and mint printed %q; want UNPAIRED, then REFUSED", b)
	}
	e.startChild()
	e.waitReply(owner.ID, "unpaired from latch on the machine while latch was stopped")
	if st := e.status(); st.Latch != nil || st.Pending != nil {
		t.Fatalf("after the restart: latch %+v, pending %+v; want neither", st.Latch, st.Pending)
	}
}

// TestE2ESecretsNotInTheDaemonsEnviron: the issue's reproduction, `!tr
// '\0' '\n' < /proc/$PPID/environ`, against a real daemon process that got
// its bot token and model key from its environment, as under systemd. The
// command's own environment was clean already; the daemon's, read from
// /proc by a real child, was not. With Harden the daemon is non-dumpable
// (its /proc files are root's; an unprivileged command cannot read them)
// and the variables' bytes are gone from the block /proc shows (what root,
// as in CI, still reads). The control run without Harden shows the test
// sees the secrets when they are there; the daemon still pairs with the
// token it took out of its environment.
func TestE2ESecretsNotInTheDaemonsEnviron(t *testing.T) {
	const apiKey = "sk-ant-test-environ-4f1c9a"
	for _, harden := range []bool{false, true} {
		e := newEnv(t)
		e.childEnv = []string{"ANTHROPIC_API_KEY=" + apiKey}
		if !harden {
			e.childEnv = append(e.childEnv, noHardenEnv+"=1")
		}
		e.startChild()
		e.pair()
		label := "environ-" + strconv.FormatBool(harden)
		e.say(owner, "!echo "+label+"; tr '\\0' '\\n' < /proc/$PPID/environ; grep -c '' /proc/$PPID/environ")
		r := e.waitReply(owner.ID, label).Current()
		leaked := strings.Contains(r, apiKey) || strings.Contains(r, testToken)
		switch {
		case !harden && !leaked:
			t.Fatalf("without Harden the command could not read the secrets from the daemon's environ, so this test proves nothing:\n%s", r)
		case harden && leaked:
			t.Fatalf("the command read a secret from /proc/$PPID/environ:\n%s", r)
		}
	}
}

// TestE2EEscapedProcessIsListed: a command hands a process to the owner's
// tmux, outside the daemon's tree, where /stop cannot end it. latch cannot
// prevent that between processes of one uid; it reports it, in `latch
// status` and the chat's /status, where the process kept the daemon's
// marker (here tmux is told to pass it).
func TestE2EEscapedProcessIsListed(t *testing.T) {
	e := newEnv(t)
	e.startChild()
	e.pair()
	sock := ownerTmux(t, e)
	e.say(owner, "!tmux -S "+sock+" new-window -d -e LATCH_DAEMON=$LATCH_DAEMON 'sleep 321'; echo handed-off")
	e.waitReply(owner.ID, "handed-off")
	var found bool
	waitFor(t, func() bool {
		st, err := e.client().Status(t.Context())
		if err != nil {
			return false
		}
		for _, p := range st.Escaped {
			found = found || strings.Contains(p.Command, "sleep 321")
		}
		return found
	})
	e.say(owner, "/status")
	e.waitReply(owner.ID, "left running outside latch's reach")
}
