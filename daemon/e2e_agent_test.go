package daemon

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic"
	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/agent/provider/openai"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
)

const modelKey = "sk-ant-e2e-MODELkeyDoNotLeak"

func withModel(e *env) *anthropictest.Server {
	fake := anthropictest.New(modelKey)
	e.t.Cleanup(fake.Close)
	e.tweak = func(c *config.Config) {
		c.Agent.Provider = "anthropic"
		c.Agent.APIKey = modelKey
		c.Agent.BaseURL = fake.URL()
		c.Agent.Model = "claude-test"
	}
	return fake
}

var approvalID = regexp.MustCompile(`/approve (\w+)`)

// approveFrom waits for an approval request and returns its id.
func (e *env) approvalFor(want string) string {
	e.t.Helper()
	m := e.waitReply(owner.ID, want)
	for _, row := range m.Keyboard {
		for _, b := range row {
			if id, ok := strings.CutPrefix(b.CallbackData, "approve:"); ok {
				return id
			}
		}
	}
	id := approvalID.FindStringSubmatch(m.Current())
	if id == nil {
		e.t.Fatalf("no approval id in %q", m.Current())
	}
	return id[1]
}

func TestE2EAgentTurnWithApproval(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	e.pair()
	fake.Script(
		anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo agent-was-here > proof.txt"}`),
		anthropictest.Text("Done: proof.txt written."),
	)
	e.say(owner, "please write a proof file")
	id := e.approvalFor("Allow bash?")
	// A stranger cannot approve, even with the id.
	e.say(stranger, "/approve "+id)
	e.say(owner, "/approve "+id)
	e.waitReply(owner.ID, "Approved.")
	e.waitReply(owner.ID, "Done: proof.txt written.")
	b, err := os.ReadFile(filepath.Join(e.home, "workspace", "proof.txt"))
	if err != nil || string(b) != "agent-was-here\n" {
		t.Fatalf("proof.txt = %q, %v", b, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "agent-was-here") && !strings.Contains(string(reqs[1].Body), "exit 0") {
		t.Errorf("model requests: %d; last %s", len(reqs), reqs[len(reqs)-1].Body)
	}
	if len(e.tg.SentTo(stranger.ID)) != 0 {
		t.Error("stranger got a reply")
	}
	if strings.Contains(e.logs.String(), modelKey) {
		t.Error("model API key in the logs")
	}
}

func TestE2EAgentDenyAndSessionSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	r := e.start()
	e.pair()
	fake.Script(
		anthropictest.ToolUse("toolu_1", "write_file", `{"path":"x.txt","content":"nope"}`),
		anthropictest.Text("Understood, I left it alone."),
	)
	e.say(owner, "my name is Ada; write x.txt")
	id := e.approvalFor("Allow write_file?")
	e.say(owner, "/deny "+id)
	e.waitReply(owner.ID, "Understood, I left it alone.")
	if _, err := os.Stat(filepath.Join(e.home, "workspace", "x.txt")); err == nil {
		t.Fatal("denied write happened")
	}
	r.stop(t)

	e.start()
	fake.Script(anthropictest.Text("You are Ada."))
	e.say(owner, "who am I?")
	e.waitReply(owner.ID, "You are Ada.")
	reqs := fake.Requests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "my name is Ada") || !strings.Contains(body, "declined") {
		t.Errorf("the session did not survive the restart: %s", body)
	}
	e.say(owner, "/new")
	e.waitReply(owner.ID, "New session")
}

func TestE2EAgentStopKillsBash(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	e.pair()
	fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo $$ > pgid; sleep 60"}`))
	e.say(owner, "sleep a while")
	e.say(owner, "/always "+e.approvalFor("Allow bash?"))
	pgidFile := filepath.Join(e.home, "workspace", "pgid")
	waitFor(t, func() bool { b, _ := os.ReadFile(pgidFile); return len(b) > 0 })
	e.say(owner, "/stop")
	e.waitReply(owner.ID, "Stopped.")
	b, _ := os.ReadFile(pgidFile)
	var pgid int
	for _, c := range strings.TrimSpace(string(b)) {
		pgid = pgid*10 + int(c-'0')
	}
	waitFor(t, func() bool { return pgid > 1 && groupGone(pgid) })
}

func TestE2ENoModelExplainsHowToAddOne(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.pair()
	e.say(owner, "hello?")
	e.waitReply(owner.ID, "No model is configured")
}

func TestE2EAgentApprovalTimeoutAndMaxSteps(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	model := e.tweak
	e.tweak = func(c *config.Config) {
		model(c)
		c.Agent.ApprovalTimeout = 300 * time.Millisecond
		c.Agent.MaxSteps = 2
	}
	e.start()
	e.pair()
	fake.Script(
		anthropictest.ToolUse("toolu_1", "bash", `{"command":"touch never"}`),
		anthropictest.Text("Nobody answered, so I did nothing."),
	)
	e.say(owner, "touch a file")
	e.approvalFor("Allow bash?")
	e.waitReply(owner.ID, "Nobody answered")
	if _, err := os.Stat(filepath.Join(e.home, "workspace", "never")); err == nil {
		t.Fatal("the command ran without approval")
	}
	reqs := fake.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "did not answer within") {
		t.Errorf("the model was not told about the timeout: %s", reqs[len(reqs)-1].Body)
	}

	fake.Script(
		anthropictest.ToolUse("toolu_2", "list_files", `{}`),
		anthropictest.ToolUse("toolu_3", "list_files", `{}`),
	)
	e.say(owner, "loop forever")
	e.waitReply(owner.ID, "step limit")
}

// TestE2EButtonsAndFilesBothWays: a document sent from the chat lands in the
// workspace inbox byte for byte and the agent is told where; a workspace
// file goes out with send_file, approved by a button press, byte for byte;
// a press from a stranger changes nothing.
func TestE2EButtonsAndFilesBothWays(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	e.pair()
	content := []byte("%PDF-1.7\x00\x01binary\xffcontent")
	fake.Script(anthropictest.Text("Got your file."))
	e.tg.SendDocument(telegramtest.Private(owner), owner, e.tg.AddFile(content, "report.pdf"), "keep this")
	e.waitReply(owner.ID, "Got your file.")
	body := string(fake.Requests()[0].Body)
	_, rest, ok := strings.Cut(body, "saved in the workspace as ")
	if !ok || !strings.Contains(body, "keep this") {
		t.Fatalf("the agent was not told about the file: %s", body)
	}
	rel := rest[:strings.IndexAny(rest, "]\\\"")]
	if saved, err := os.ReadFile(filepath.Join(e.home, "workspace", rel)); err != nil || string(saved) != string(content) {
		t.Fatalf("saved %s = %q, %v", rel, saved, err)
	}

	out := []byte("\x89PNG-not-really\x00data")
	os.WriteFile(filepath.Join(e.home, "workspace", "result.bin"), out, 0o600)
	fake.Script(
		anthropictest.ToolUse("toolu_2", "send_file", `{"path":"result.bin"}`),
		anthropictest.Text("Sent it."),
	)
	e.say(owner, "send me result.bin")
	m := e.waitReply(owner.ID, "Allow send_file?")
	var approve string
	for _, row := range m.Keyboard {
		for _, b := range row {
			if strings.HasPrefix(b.CallbackData, "approve:") {
				approve = b.CallbackData
			}
		}
	}
	if approve == "" {
		t.Fatalf("no approve button on %q: %+v", m.Current(), m.Keyboard)
	}
	before := e.status().StrangersDropped
	up, _ := e.tg.SendCallback(telegramtest.Private(owner), stranger, m.MessageID, approve)
	e.waitConfirmed(up)
	if e.status().StrangersDropped != before+1 {
		t.Fatal("a stranger's button press was not dropped")
	}
	e.tg.SendCallback(telegramtest.Private(owner), owner, m.MessageID, approve)
	e.waitReply(owner.ID, "Sent it.")
	var sent *telegramtest.SentFile
	for _, s := range e.tg.SentTo(owner.ID) {
		if s.File != nil {
			sent = s.File
		}
	}
	if sent == nil || string(sent.Data) != string(out) || sent.Name != "result.bin" {
		t.Fatalf("file sent = %+v;%s", sent, e.describeSent())
	}
}

// TestE2EApprovalSurvivesRestart: a stop while an approval waits leaves the
// turn resumable; after the restart the same approval id (the button already
// in the chat) still works, applies once, and the turn finishes.
func TestE2EApprovalSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	r := e.start()
	e.pair()
	fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo once >> count"}`))
	e.say(owner, "count once")
	id := e.approvalFor("Allow bash?")
	r.stop(t)
	// Pressed while latch is down: the press waits at Telegram and comes
	// in right after the start, before the resumed turn reaches the
	// request again. It must count, once, and not be called expired.
	e.say(owner, "/approve "+id)

	fake.Script(anthropictest.Text("Counted."))
	e.start()
	e.waitReply(owner.ID, "continuing from the last completed step")
	e.waitReply(owner.ID, "Counted.")
	if n := e.repliesTo(owner.ID, "Approved."); n != 1 {
		t.Errorf("%d replies \"Approved.\", want 1:%s", n, e.describeSent())
	}
	for _, bad := range []string{"expired", "✗", "denied", "Denied"} {
		if strings.Contains(e.describeSent(), bad) {
			t.Errorf("the chat was told %q:%s", bad, e.describeSent())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "workspace", "count")); string(b) != "once\n" {
		t.Errorf("count = %q", b)
	}
}

// TestE2EUnpairSilencesTheTurn: after `latch unpair` the old chat hears
// nothing of a turn that was streaming, not even the last edit that ends
// a stopped turn's answer. The model stalls mid-answer; the unpair cuts
// the turn; the chat gets the unpair notice and nothing else: no new
// message, no edit. Shown to fail with the renderer under the Hub's
// context instead of the job's out.
func TestE2EUnpairSilencesTheTurn(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	e.pair()
	fake.Script(anthropictest.Text("The first part of the **answer** streams, and then the rest never comes.").Chunk(10).StallAfter(5))
	e.say(owner, "tell me everything")
	e.waitReply(owner.ID, "The first part")
	// Let the renderer bring the chat up to date with what streamed.
	time.Sleep(1500 * time.Millisecond)
	shown := func() (msgs, edits int) {
		for _, m := range e.tg.SentTo(owner.ID) {
			msgs++
			edits += len(m.Edits)
		}
		return msgs, edits
	}
	msgs, edits := shown()
	if err := e.client().Unpair(context.Background(), "telegram"); err != nil {
		t.Fatal(err)
	}
	e.waitReply(owner.ID, "This chat was unpaired")
	waitFor(t, func() bool { return e.status().Running == 0 })
	time.Sleep(300 * time.Millisecond) // room for a last edit
	if m, ed := shown(); m != msgs+1 || ed != edits {
		t.Errorf("after the unpair the chat got %d messages (want only the notice) and %d edits (want none):%s", m-msgs, ed-edits, e.describeSent())
	}
}

// TestE2ECommandsRunInCgroupsOfTheirOwn: where the machine lets latch make
// cgroups (CI runs as root without systemd), both a chat command and the
// agent's bash run each in a cgroup of its own, below the daemon's.
func TestE2ECommandsRunInCgroupsOfTheirOwn(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	cgroups := e.start().d.cgroups // written before Ready is closed
	e.pair()
	if cgroups == nil {
		msg := "the daemon has no cgroups here: " + e.logs.String()
		if os.Getenv("LATCH_REQUIRE_ROOT_TESTS") != "" {
			t.Fatal(msg + "; LATCH_REQUIRE_ROOT_TESTS is set")
		}
		t.Skip(msg)
	}
	if st, err := e.client().Status(t.Context()); err != nil || st.Commands != control.CommandsInCgroups {
		t.Errorf("status says commands are ended by %q (%v), want %q", st.Commands, err, control.CommandsInCgroups)
	}
	tree := regexp.MustCompile("/" + regexp.QuoteMeta(filepath.Base(cgroups.Dir())) + "/cmd-[0-9a-f]{16}\n")
	e.say(owner, "!grep ^0:: /proc/self/cgroup")
	if got := e.waitReply(owner.ID, "0::").Current(); !tree.MatchString(got) {
		t.Errorf("the chat command ran in %q, want a cgroup matching %s", got, tree)
	}
	fake.Script(
		anthropictest.ToolUse("toolu_1", "bash", `{"command":"grep ^0:: /proc/self/cgroup > cgroup.txt"}`),
		anthropictest.Text("Looked."),
	)
	e.say(owner, "which cgroup?")
	e.say(owner, "/approve "+e.approvalFor("Allow bash?"))
	e.waitReply(owner.ID, "Looked.")
	b, err := os.ReadFile(filepath.Join(e.home, "workspace", "cgroup.txt"))
	if err != nil || !tree.Match(b) {
		t.Errorf("the agent's command ran in %q (%v), want a cgroup matching %s", b, err, tree)
	}
}

// TestStatusEndpoints: the status names the API roots the daemon talks to,
// so that latch doctor can tell a daemon that reaches other servers than
// the shell's configuration names.
func TestStatusEndpoints(t *testing.T) {
	e := newEnv(t)
	fake := withModel(e)
	e.start()
	st, err := e.client().Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{control.EndpointTelegram: e.tg.URL(), control.EndpointModel: fake.URL()}
	if !maps.Equal(st.Endpoints, want) {
		t.Errorf("endpoints %v, want %v", st.Endpoints, want)
	}
}

// TestModelURLDefaultsAreTheProviders: config's idea of where a model call
// goes without a base URL is where the providers' clients send it.
func TestModelURLDefaultsAreTheProviders(t *testing.T) {
	if config.DefaultAnthropicBaseURL != anthropic.DefaultBaseURL || config.DefaultOpenAIBaseURL != openai.DefaultBaseURL {
		t.Errorf("config's defaults %q and %q, the providers' %q and %q", config.DefaultAnthropicBaseURL, config.DefaultOpenAIBaseURL,
			anthropic.DefaultBaseURL, openai.DefaultBaseURL)
	}
}
