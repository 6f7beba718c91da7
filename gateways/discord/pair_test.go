package discord

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

// TestPairCommandRegistered: Start registers /pair as the application's
// one global command, for DMs with the bot, with one required string
// option; starting again overwrites it with the same.
func TestPairCommandRegistered(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	cmds := srv.Commands()
	if len(cmds) != 1 {
		t.Fatalf("registered %+v, want one command", cmds)
	}
	c := cmds[0]
	wantOpt := discordtest.CommandOption{Type: discordtest.OptionString, Name: "code", Description: c.Options[0].Description,
		Required: true, MaxLength: maxPairOption}
	if c.Name != "pair" || c.Type != 1 || !slices.Equal(c.Contexts, []int{discordtest.ContextBotDM}) ||
		!slices.Equal(c.IntegrationTypes, []int{0}) || len(c.Options) != 1 || c.Options[0] != wantOpt {
		t.Errorf("command = %+v, want /pair <code> for DMs with the bot", c)
	}
	calls := srv.Calls(discordtest.RouteCommands)
	if len(calls) != 1 || calls[0].Path != "/api/v10/applications/"+srv.Bot().ID+"/commands" {
		t.Errorf("registration calls = %+v", calls)
	}
	if err := g.Start(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if again := srv.Commands(); len(again) != 1 || again[0].ID != c.ID || srv.Count(discordtest.RouteCommands) != 2 {
		t.Errorf("after a second start: %+v", again)
	}
}

// TestPairCommandRegistrationFails: a refused or failed registration is a
// warning; the gateway runs and "/pair CODE" as text still reaches the
// sink.
func TestPairCommandRegistrationFails(t *testing.T) {
	for _, status := range []int{http.StatusForbidden, http.StatusInternalServerError} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			srv := newFake(t)
			srv.Inject(discordtest.RouteCommands, discordtest.Fault{Status: status})
			g, logs := started(t, srv)
			if len(logs.lines("WARN", "registering the /pair command failed")) != 1 {
				t.Errorf("no warning about the registration:\n%s", logs)
			}
			sink := newSink("")
			run(t, g, sink)
			srv.SendDM(alice, "/pair ABCD-EFGH")
			if got := sink.waitStored(t, 1); got[0].Text != "/pair ABCD-EFGH" {
				t.Errorf("stored %q", texts(got))
			}
		})
	}
}

// invokePair has a user use /pair with a code and returns the interaction.
func invokePair(t *testing.T, srv *discordtest.Server, u discordtest.User, code string) discordtest.Interaction {
	t.Helper()
	in, err := srv.InvokeCommand(discordtest.CommandUse{User: u, Name: "pair", Options: map[string]string{"code": code}})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestPairCommand: /pair in a DM becomes the message "/pair CODE" from that
// DM, is not acknowledged before the Hub has a reply (a latched gateway has
// none for a stranger, and "thinking…" would be an answer), and the reply
// is the command's ephemeral response instead of going to the channel.
func TestPairCommand(t *testing.T) {
	srv, g, sink := running(t)
	in := invokePair(t, srv, alice, " abcd-efgh ")
	m := sink.waitStored(t, 1)[0]
	want := gateways.Message{Gateway: "discord", ID: in.ID, ChatID: srv.DMChannel(alice), ChatType: gateways.ChatPrivate,
		ChatName: "Alice", UserID: alice.ID, UserName: "alice", Text: "/pair abcd-efgh", Time: m.Time}
	if !equalMessage(m, want) {
		t.Errorf("stored %+v\nwant %+v", m, want)
	}
	if got, _ := srv.Interaction(in.ID); got.ResponseType != 0 {
		t.Errorf("answered with type %d before the Hub replied", got.ResponseType)
	}

	if _, err := g.Send(testContext(t), m.ChatID, gateways.Reply{Text: "That code is not valid.", ReplyTo: m.ID}); err != nil {
		t.Fatal(err)
	}
	got, _ := srv.Interaction(in.ID)
	r, ok := srv.Response(in.ID)
	if got.ResponseType != discordtest.ResponseChannelMessage || !ok || r.Text() != "That code is not valid." || !r.Ephemeral || !r.NoPings() {
		t.Errorf("response type %d = %+v, want the reply as an ephemeral message", got.ResponseType, r)
	}
	if got := shownIn(srv, m.ChatID); len(got) != 0 {
		t.Errorf("the channel shows %q, want nothing", got)
	}
	// Only the first reply goes there.
	if _, err := g.Send(testContext(t), m.ChatID, gateways.Reply{Text: "again", ReplyTo: m.ID}); err != nil {
		t.Fatal(err)
	}
	if got := shownIn(srv, m.ChatID); !slices.Equal(got, []string{"again"}) {
		t.Errorf("the channel shows %q, want the second reply", got)
	}
}

// TestPairCommandNoReply: without a reply in time (a latched gateway is
// silent to strangers; the Hub rate-limits failure replies) the use is
// never answered — no "thinking…", no neutral text — and a reply after
// that goes to the channel.
func TestPairCommandNoReply(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	g.pairWait = 20 * time.Millisecond
	sink := newSink("")
	run(t, g, sink)
	in := invokePair(t, srv, alice, "ABCD-EFGH")
	m := sink.waitStored(t, 1)[0]
	time.Sleep(2 * g.pairWait) // past the wait: not a timing assertion, only a precondition
	if _, err := g.Send(testContext(t), m.ChatID, gateways.Reply{Text: "late", ReplyTo: m.ID}); err != nil {
		t.Fatal(err)
	}
	if got := shownIn(srv, m.ChatID); !slices.Equal(got, []string{"late"}) {
		t.Errorf("the channel shows %q", got)
	}
	if got, _ := srv.Interaction(in.ID); got.ResponseType != 0 {
		t.Errorf("the /pair was answered (type %d); want no answer", got.ResponseType)
	}
}

// TestPairCommandAnswerFails: when the response to a /pair fails, the
// reply goes to the channel as a message.
func TestPairCommandAnswerFails(t *testing.T) {
	srv := newFake(t)
	g, logs := started(t, srv)
	sink := newSink("")
	run(t, g, sink)
	srv.Inject(discordtest.RouteInteractionCallback, discordtest.Fault{Status: http.StatusInternalServerError})
	invokePair(t, srv, alice, "ABCD-EFGH")
	m := sink.waitStored(t, 1)[0]
	if _, err := g.Send(testContext(t), m.ChatID, gateways.Reply{Text: "That code is not valid.", ReplyTo: m.ID}); err != nil {
		t.Fatal(err)
	}
	if len(logs.lines("WARN", "answering a /pair in place failed")) != 1 {
		t.Errorf("no warning:\n%s", logs)
	}
	if got := shownIn(srv, m.ChatID); !slices.Equal(got, []string{"That code is not valid."}) {
		t.Errorf("the channel shows %q", got)
	}
}

// TestPairCommandElsewhere: /pair anywhere but a DM with the bot (which
// Discord should not even allow), another command, and a bot's use are
// dropped unanswered.
func TestPairCommandElsewhere(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv, func(c *Config) { c.AllowGroups = true })
	sink := newSink("")
	run(t, g, sink)
	uses := []discordtest.CommandUse{
		{User: alice, Name: "pair", Options: map[string]string{"code": "ABCD-EFGH"}, GuildID: "900000000000000001", Unchecked: true},
		{User: alice, Name: "unpair", Unchecked: true},
		{User: robot, Name: "pair", Options: map[string]string{"code": "ABCD-EFGH"}},
	}
	var ids []string
	for _, u := range uses {
		in, err := srv.InvokeCommand(u)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	srv.SendDM(alice, "marker")
	if got := sink.waitStored(t, 1); !slices.Equal(texts(got), []string{"marker"}) {
		t.Errorf("stored %q, want only the marker", texts(got))
	}
	for _, id := range ids {
		if in, _ := srv.Interaction(id); in.ResponseType != 0 {
			t.Errorf("interaction %s was answered (type %d)", id, in.ResponseType)
		}
	}
}

func equalMessage(a, b gateways.Message) bool {
	return a.Gateway == b.Gateway && a.ID == b.ID && a.ChatID == b.ChatID && a.ChatType == b.ChatType &&
		a.ChatName == b.ChatName && a.UserID == b.UserID && a.UserName == b.UserName && a.Text == b.Text &&
		a.Callback == nil && len(a.Files) == 0
}
