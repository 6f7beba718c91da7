package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/matrix/dendritetest"
)

// The Matrix end-to-end tests run latch against a real homeserver
// (Dendrite, see gateways/matrix/dendritetest) with the owner and a
// stranger as mautrix clients, in unencrypted DMs here and in encrypted
// ones with -tags goolm (e2e_matrix_dendrite_e2ee_test.go): things that
// work against the fake and not against a real server are defects.

// matrixWorld is one Dendrite with latch's account, an owner and a
// stranger, and a latch home whose daemons use that account.
type matrixWorld struct {
	e         *env
	s         *dendritetest.Server
	bot       dendritetest.User
	owner     *dendritetest.Client
	ownerUser dendritetest.User // the owner's account, for more devices
	stranger  *dendritetest.Client
	model     *anthropictest.Server // in-process daemons' model
	encrypted bool
	ctx       context.Context
}

func newMatrixWorld(t *testing.T, encrypted bool, opt dendritetest.Options) *matrixWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	s := dendritetest.Start(t, opt)
	w := &matrixWorld{e: newEnv(t), s: s, bot: s.Register(t, "latch"), encrypted: encrypted, ctx: ctx}
	w.model = withModel(w.e) // sets e.tweak, which the Matrix settings extend
	w.ownerUser = s.Register(t, "owner")
	w.owner = s.Login(t, w.ownerUser)
	w.stranger = s.Login(t, s.Register(t, "mallory"))
	if encrypted {
		w.owner.EnableE2EE(ctx)
		w.stranger.EnableE2EE(ctx)
	}
	w.owner.Run()
	w.stranger.Run()
	prev := w.e.tweak
	w.e.tweak = func(c *config.Config) {
		if prev != nil {
			prev(c)
		}
		c.Matrix.Homeserver, c.Matrix.UserID = s.URL, w.bot.UserID
		c.Matrix.Token, c.Matrix.TokenSource, c.Matrix.DeviceID = w.bot.AccessToken, config.EnvMatrixToken, w.bot.DeviceID
	}
	w.e.childEnv = append(w.e.childEnv, config.EnvMatrixToken+"="+w.bot.AccessToken, config.EnvMatrixHomeserver+"="+s.URL)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("latch's log:\n%s", w.e.logs.String())
		}
		if strings.Contains(w.e.logs.String(), w.bot.AccessToken) {
			t.Error("latch's Matrix access token is in the logs")
		}
		// Latch's events, for the owner: the stranger joins the owner's
		// room after its sessions were shared and need not read it, and
		// tests send events no one can decrypt.
		for _, u := range w.owner.Undecrypted() {
			if strings.Contains(u, " from "+w.bot.UserID+":") {
				t.Errorf("the owner could not decrypt latch's event %s", u)
			}
		}
	})
	return w
}

// writeConfig writes the home's config.toml: the [matrix] section a child
// daemon needs (the token and homeserver come from its environment), and
// extra.
func (w *matrixWorld) writeConfig(extra string) {
	w.e.t.Helper()
	text := fmt.Sprintf("[matrix]\nuser_id = %q\ndevice_id = %q\n\n%s", w.bot.UserID, w.bot.DeviceID, extra)
	if err := os.WriteFile(filepath.Join(w.e.home, "config.toml"), []byte(text), 0o600); err != nil {
		w.e.t.Fatal(err)
	}
}

func (w *matrixWorld) botID() id.UserID { return id.UserID(w.bot.UserID) }

// openDM has the owner open a DM with latch, as Element does, and waits
// until latch joined it.
func (w *matrixWorld) openDM() id.RoomID {
	w.e.t.Helper()
	dm := w.owner.CreateDM(w.ctx, w.botID(), w.encrypted)
	w.owner.WaitFor(dm, 30*time.Second, "latch to join the DM", func() bool {
		return w.owner.StateStore.IsInRoom(w.ctx, dm, w.botID())
	})
	return dm
}

// pair opens the owner's DM and pairs it with a code minted through the
// control API.
func (w *matrixWorld) pair() id.RoomID {
	w.e.t.Helper()
	dm := w.openDM()
	w.owner.Say(w.ctx, dm, "/pair "+w.e.mintFor("matrix"))
	w.reply(dm, "Paired")
	return dm
}

// reply waits for latch's message in room containing want; in an
// encrypted world it must have come encrypted.
func (w *matrixWorld) reply(room id.RoomID, want string) dendritetest.Message {
	w.e.t.Helper()
	m := w.owner.WaitMessage(room, w.botID(), want)
	if w.encrypted && !m.Encrypted {
		w.e.t.Errorf("latch answered %q in the clear in an encrypted room", m.Content.Body)
	}
	return m
}

// fromBot counts latch's messages in room containing want.
func (w *matrixWorld) fromBot(room id.RoomID, want string) int {
	return w.owner.Count(room, w.botID(), want)
}

// botFile is latch's last file message in room, or nil.
func (w *matrixWorld) botFile(room id.RoomID) *dendritetest.Message {
	var file *dendritetest.Message
	for _, m := range w.owner.Messages(room, w.botID()) {
		switch m.Content.MsgType {
		case event.MsgFile, event.MsgImage, event.MsgAudio, event.MsgVideo:
			file = &m
		}
	}
	return file
}

// TestDendriteMatrixStory: the whole story in an unencrypted DM.
func TestDendriteMatrixStory(t *testing.T) { matrixStory(t, false) }

// matrixStory: pairing by a minted code; !echo; an answer streamed by
// m.replace edits; a send_file approval that a stranger's ✅ does not
// answer and the owner's does, the file arriving byte for byte; a bash call
// the owner's ❌ denies, and the owner's ✅ from another room does not
// answer; a file from
// the owner saved in the workspace; and a stranger, in the owner's room and
// in a DM of their own, gets nothing: no reply, no read receipt, no typing,
// their invite not accepted.
func matrixStory(t *testing.T, encrypted bool) {
	w := newMatrixWorld(t, encrypted, dendritetest.Options{})
	ctx := w.ctx
	model := w.model
	w.e.start()
	dm := w.pair()

	w.owner.Say(ctx, dm, "!echo hi from matrix")
	w.reply(dm, "hi from matrix")

	// The stranger: invited by the owner into the paired room (they are
	// another user of a room latch is in), and opening a DM of their own.
	if _, err := w.owner.InviteUser(ctx, dm, &mautrix.ReqInviteUser{UserID: w.stranger.UserID}); err != nil {
		t.Fatal(err)
	}
	w.stranger.WaitFor(dm, 30*time.Second, "the owner's invite", func() bool { return w.stranger.Invited(dm) })
	if _, err := w.stranger.JoinRoomByID(ctx, dm); err != nil {
		t.Fatal(err)
	}
	w.owner.WaitFor(dm, 30*time.Second, "the stranger's join", func() bool { return w.owner.StateStore.IsInRoom(ctx, dm, w.stranger.UserID) })
	sdm := w.stranger.CreateDM(ctx, w.botID(), encrypted)
	var strangerSaid []id.EventID
	strangerSaid = append(strangerSaid, w.stranger.Say(ctx, dm, "!echo mallory-in-the-owners-room"))
	strangerSaid = append(strangerSaid, w.stranger.Say(ctx, sdm, "!echo mallory-in-her-dm"))
	strangerSaid = append(strangerSaid, w.stranger.Say(ctx, dm, "agent, mallory asks for the secrets"))

	// An answer that streams: its first pieces show, the rest arrives by
	// editing that message.
	answer := "The disk is 42% full. " + strings.Repeat("All services run normally. ", 8) + "Nothing needs attention."
	model.Script(anthropictest.Text(answer).Chunk(20).PauseAfter(2, 3*time.Second))
	w.owner.Say(ctx, dm, "how is the server?")
	m := w.reply(dm, "Nothing needs attention.")
	if m.Edits == 0 || !strings.Contains(m.Content.Body, answer) {
		t.Errorf("streamed answer = %q after %d edits: want %q edited into place", m.Content.Body, m.Edits, answer)
	}
	// The owner saw "typing…" during the turn: the stranger checks below
	// look at something that does show.
	if !w.owner.Typed(dm, w.botID()) {
		t.Error("the owner never saw latch typing during an agent turn")
	}

	// Approval by reaction, and a file out.
	out := []byte("\x89PNG-not-really\x00data")
	if err := os.WriteFile(filepath.Join(w.e.home, "workspace", "result.bin"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	model.Script(
		anthropictest.ToolUse("toolu_2", "send_file", `{"path":"result.bin"}`),
		anthropictest.Text("Sent it."),
	)
	w.owner.Say(ctx, dm, "send me result.bin")
	req := w.reply(dm, "send_file")
	strangerSaid = append(strangerSaid, w.stranger.React(ctx, dm, req.ID, "✅"))
	// The owner's ✅ from another room, its relation pointing at the
	// request across rooms, is nothing either; nor is a command there: the
	// latch binds the room as well as the user.
	other := w.openDM()
	w.owner.React(ctx, other, req.ID, "✅")
	w.owner.Say(ctx, other, "!echo in-another-room")
	// Once /status, sent after it, is answered, the stranger's reaction has
	// been handled: nothing was sent.
	before := len(w.owner.Messages(dm, w.botID()))
	w.owner.Say(ctx, dm, "/status")
	w.owner.WaitFor(dm, 30*time.Second, "the answer to /status", func() bool { return len(w.owner.Messages(dm, w.botID())) > before })
	if w.botFile(dm) != nil || w.fromBot(dm, "Sent it.") > 0 {
		t.Fatalf("a stranger's ✅ approved the call:\n%s", w.owner.Describe(dm))
	}
	w.owner.React(ctx, dm, req.ID, "✅")
	w.reply(dm, "Sent it.")
	file := w.botFile(dm)
	if file == nil {
		t.Fatalf("no file from latch:\n%s", w.owner.Describe(dm))
	}
	if encrypted && file.Content.File == nil {
		t.Errorf("the file came as a plain attachment in an encrypted room: %+v", file.Content)
	}
	if got, err := w.owner.Download(ctx, *file); err != nil || !bytes.Equal(got, out) {
		t.Errorf("downloaded %q, %v; want %q", got, err, out)
	}

	// ❌ denies: the command never runs.
	model.Script(
		anthropictest.ToolUse("toolu_3", "bash", `{"command":"echo no > denied.txt"}`),
		anthropictest.Text("Understood, not run."),
	)
	w.owner.Say(ctx, dm, "make denied.txt")
	deny := w.reply(dm, "denied.txt")
	w.owner.React(ctx, dm, deny.ID, "❌")
	w.reply(dm, "Understood, not run.")
	if _, err := os.Stat(filepath.Join(w.e.home, "workspace", "denied.txt")); err == nil {
		t.Error("the call the owner denied with ❌ ran")
	}

	// A file in.
	content := []byte("%PDF-1.7\x00\x01binary\xffcontent")
	model.Script(anthropictest.Text("Got your file."))
	w.owner.SendFile(ctx, dm, "report.pdf", "application/pdf", content)
	w.reply(dm, "Got your file.")
	reqs := model.Requests()
	body := string(reqs[len(reqs)-1].Body)
	_, rest, ok := strings.Cut(body, "saved in the workspace as ")
	if !ok {
		t.Fatalf("the agent was not told about the file: %s", body)
	}
	rel := rest[:strings.IndexAny(rest, "]\\\"")]
	if saved, err := os.ReadFile(filepath.Join(w.e.home, "workspace", rel)); err != nil || !bytes.Equal(saved, content) {
		t.Errorf("saved %s = %q, %v; want %q", rel, saved, err, content)
	}

	// The stranger got nothing: an answer from the owner's later command
	// shows everything before it was handled.
	w.owner.Say(ctx, dm, "!echo last")
	w.reply(dm, "last")
	if n := len(w.owner.Messages(other, w.botID())); n > 0 {
		t.Errorf("latch answered %d times in a room that is not the latched one:\n%s", n, w.owner.Describe(other))
	}
	if n := w.fromBot(dm, "mallory"); n > 0 {
		t.Errorf("latch answered the stranger %d times:\n%s", n, w.owner.Describe(dm))
	}
	for _, r := range model.Requests() {
		if strings.Contains(string(r.Body), "mallory") {
			t.Errorf("the stranger's message reached the agent: %s", r.Body)
		}
	}
	for _, r := range w.owner.Receipts(dm, w.botID()) {
		if slices.Contains(strangerSaid, r) {
			t.Errorf("latch sent a read receipt for the stranger's event %s", r)
		}
	}
	if w.stranger.Typed(sdm, w.botID()) || len(w.stranger.Messages(sdm, w.botID())) > 0 || len(w.stranger.Receipts(sdm, w.botID())) > 0 {
		t.Errorf("latch typed, answered or sent a receipt in the stranger's DM:\n%s", w.stranger.Describe(sdm))
	}
	if w.stranger.StateStore.IsInRoom(ctx, sdm, w.botID()) {
		t.Error("latch joined the stranger's DM")
	}
	w.stranger.WaitFor(sdm, 30*time.Second, "latch to decline the stranger's invite", func() bool {
		return w.stranger.StateStore.IsMembership(ctx, sdm, w.botID(), event.MembershipLeave)
	})
}

// TestDendriteMatrixKill9: kill -9 in the middle of a command and in the
// middle of an agent turn. After each restart the command is reported, not
// run again, what the owner sent while no daemon ran is answered exactly
// once, and the turn resumes from its last completed step.
func TestDendriteMatrixKill9(t *testing.T) { matrixKill9(t, false) }

func matrixKill9(t *testing.T, encrypted bool) {
	w := newMatrixWorld(t, encrypted, dendritetest.Options{})
	ctx := w.ctx
	w.writeConfig(agentTOML(w.model.URL()))
	child := w.e.startChild()
	dm := w.pair()
	marker := filepath.Join(w.e.home, "ran")
	pidfile := filepath.Join(w.e.home, "pgid")
	w.owner.Say(ctx, dm, "!echo $$ > "+pidfile+"; echo x >> "+marker+"; sleep 30")
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return len(b) > 0 })
	child.Process.Kill()
	child.Wait()
	killGroup(pidfile)
	w.owner.Say(ctx, dm, "!echo while-down")

	child = w.e.startChild()
	w.reply(dm, "interrupted by a restart")
	w.reply(dm, "while-down")
	w.owner.Say(ctx, dm, "!echo after")
	w.reply(dm, "after")
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the interrupted command ran again", b)
	}
	if n := w.fromBot(dm, "while-down"); n != 1 {
		t.Errorf("the message sent while down was answered %d times:\n%s", n, w.owner.Describe(dm))
	}

	// Mid-turn: the agent's tool call is running.
	toolMarker := filepath.Join(w.e.home, "workspace", "ran")
	w.model.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo $$ > pgid; echo x >> ran; sleep 30"}`))
	w.owner.Say(ctx, dm, "run the long job")
	waitFor(t, func() bool { b, _ := os.ReadFile(toolMarker); return len(b) > 0 })
	child.Process.Kill()
	child.Wait()
	killGroup(filepath.Join(w.e.home, "workspace", "pgid"))
	w.model.Script(anthropictest.Text("The job was cut by a restart. Shall I start it again?"))
	w.e.startChild()
	w.reply(dm, "continuing from the last completed step")
	w.reply(dm, "Shall I start it again?")
	if b, _ := os.ReadFile(toolMarker); string(b) != "x\n" {
		t.Errorf("tool marker = %q: the tool call ran again", b)
	}
	for _, want := range []string{"Paired", "while-down", "Shall I start it again?"} {
		if n := w.fromBot(dm, want); n != 1 {
			t.Errorf("%q was answered %d times:\n%s", want, n, w.owner.Describe(dm))
		}
	}
}

// TestDendriteMatrixRateLimited: with Dendrite's rate limits on (its
// client API refuses typing, joins, invites and leaves past a few a second
// per device with M_LIMIT_EXCEEDED), a flood of invites from strangers is
// declined, every one, while the owner's commands and a streamed answer
// (typing notices) still arrive, and no stranger hears anything.
func TestDendriteMatrixRateLimited(t *testing.T) {
	w := newMatrixWorld(t, false, dendritetest.Options{RateLimit: true, Threshold: 3, CooloffMS: 1000})
	ctx := w.ctx
	w.e.start()
	dm := w.pair()

	const strangers = 12
	var rooms []id.RoomID
	var people []*dendritetest.Client
	for i := range strangers {
		c := w.s.Login(t, w.s.Register(t, fmt.Sprintf("flood%d", i)))
		c.Run()
		room := c.CreateDM(ctx, w.botID(), false)
		c.Say(ctx, room, "!echo flood")
		people, rooms = append(people, c), append(rooms, room)
	}
	answer := "Streamed while strangers knock. " + strings.Repeat("Still fine. ", 10) + "Done."
	w.model.Script(anthropictest.Text(answer).Chunk(16).PauseAfter(2, 2*time.Second))
	w.owner.Say(ctx, dm, "status please")
	w.reply(dm, "Done.")
	w.owner.Say(ctx, dm, "!echo owner-still-heard")
	w.reply(dm, "owner-still-heard")
	for i, c := range people {
		c.WaitFor(rooms[i], time.Minute, "latch to decline the invite", func() bool {
			return c.StateStore.IsMembership(ctx, rooms[i], w.botID(), event.MembershipLeave)
		})
		if n := len(c.Messages(rooms[i], w.botID())); n > 0 || c.Typed(rooms[i], w.botID()) {
			t.Errorf("stranger %d got %d messages (typing: %v)", i, n, c.Typed(rooms[i], w.botID()))
		}
	}
}

// TestDendriteMatrixLongAnswer: a long streamed answer, heavy with what
// grows in JSON and HTML (markup characters, quotes, emoji), reaches the
// owner whole and once, though an event is at most 65,536 bytes and an
// edit carries the text twice.
func TestDendriteMatrixLongAnswer(t *testing.T) { matrixLongAnswer(t, false) }

func matrixLongAnswer(t *testing.T, encrypted bool) {
	w := newMatrixWorld(t, encrypted, dendritetest.Options{})
	ctx := w.ctx
	w.e.start()
	dm := w.pair()
	const lines = 1200
	var b strings.Builder
	for i := range lines {
		fmt.Fprintf(&b, "line %04d: <tag a=\"b\"> & 'q' ✅ ünï \\ </tag>\n", i)
	}
	b.WriteString("The end.")
	w.model.Script(anthropictest.Text(b.String()).Chunk(4000).PauseAfter(3, 2*time.Second))
	w.owner.Say(ctx, dm, "a long one, please")
	w.reply(dm, "The end.")
	var all strings.Builder
	for _, m := range w.owner.Messages(dm, w.botID()) {
		all.WriteString(m.Content.Body)
	}
	for i := range lines {
		if n := strings.Count(all.String(), fmt.Sprintf("line %04d:", i)); n != 1 {
			t.Fatalf("line %d shows %d times in latch's messages (%d bytes in all)", i, n, all.Len())
		}
	}
}

// TestDendriteMatrixTokenRevoked: the bot's access token logged out on
// the server while latch runs (M_UNKNOWN_TOKEN on the next call) stops
// the daemon with a configuration error, which restarting cannot fix (exit
// 78), saying so without the token.
func TestDendriteMatrixTokenRevoked(t *testing.T) {
	w := newMatrixWorld(t, false, dendritetest.Options{})
	r := w.e.start()
	w.pair()
	bot, err := mautrix.NewClient(w.s.URL, w.botID(), w.bot.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bot.Logout(w.ctx); err != nil {
		t.Fatalf("log the bot's device out: %v", err)
	}
	select {
	case err := <-r.done:
		close(r.done)
		if !errors.Is(err, ErrConfig) || !errors.Is(err, gateways.ErrUnauthorized) {
			t.Fatalf("after the token was revoked the daemon ended with %v; want a configuration error, unauthorized", err)
		}
		if strings.Contains(err.Error(), w.bot.AccessToken) {
			t.Errorf("the error shows the token: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the daemon still runs a minute after its token was revoked")
	}
}
