package discord

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

func TestRunTranslatesMessages(t *testing.T) {
	srv, g, sink := running(t)

	photo := discordtest.File{Name: "cat.png", ContentType: "image/png", Data: []byte("png")}
	notes := discordtest.File{Name: "notes.txt", ContentType: "text/plain; charset=utf-8", Data: []byte("hello notes")}
	hello := srv.SendDM(alice, "hello")
	srv.SendDM(robot, "beep")                                                                       // another bot
	srv.Post(discordtest.Post{Author: alice, Content: "joined", Type: discordtest.MessageUserJoin}) // a system message
	files := srv.SendDM(bob, "look", photo, notes)
	if _, err := g.Send(testContext(t), hello.ChannelID, gateways.Reply{Text: "hi alice"}); err != nil {
		t.Fatal(err) // the fake dispatches the bot's own message back to it
	}
	last := srv.SendDM(alice, "last")

	got := sink.waitStored(t, 3)
	want := []gateways.Message{
		{Gateway: "discord", ID: hello.ID, ChatID: hello.ChannelID, ChatType: gateways.ChatPrivate, ChatName: "Alice",
			UserID: alice.ID, UserName: "alice", Text: "hello", Time: hello.Time.UTC().Truncate(time.Microsecond)},
		{Gateway: "discord", ID: files.ID, ChatID: files.ChannelID, ChatType: gateways.ChatPrivate, ChatName: "bob",
			UserID: bob.ID, UserName: "bob", Text: "look", Time: files.Time.UTC().Truncate(time.Microsecond),
			Files: []gateways.Attachment{
				{ID: files.Attachments[0].URL, Name: "cat.png", Size: 3, Kind: "photo", MIME: "image/png"},
				{ID: files.Attachments[1].URL, Name: "notes.txt", Size: 11, Kind: "document", MIME: "text/plain; charset=utf-8"},
			}},
		{Gateway: "discord", ID: last.ID, ChatID: last.ChannelID, ChatType: gateways.ChatPrivate, ChatName: "Alice",
			UserID: alice.ID, UserName: "alice", Text: "last", Time: last.Time.UTC().Truncate(time.Microsecond)},
	}
	if len(got) != len(want) {
		t.Fatalf("stored %d messages, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("message %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	c, ok := parseCursor(sink.storedCursor())
	if !ok || c.last(hello.ChannelID) != mustID(t, last.ID) || c.last(files.ChannelID) != mustID(t, files.ID) {
		t.Errorf("cursor = %s, want alice's DM at %s and bob's at %s", sink.storedCursor(), last.ID, files.ID)
	}
}

// TestRunIngestsMessageDeliveredTwiceOnce: after downtime a message comes
// both from the backfill and live (Discord may deliver again); it is
// stored once, and everything in order.
func TestRunIngestsMessageDeliveredTwiceOnce(t *testing.T) {
	srv := newFake(t)
	sink := newSink("")
	g, _ := started(t, srv)
	stop := run(t, g, sink)
	srv.SendDM(alice, "one")
	sink.waitStored(t, 1)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	waitFake(t, srv, "the gateway to close", func() bool { return !srv.Connected() })

	two := srv.SendDM(alice, "two") // offline: history only
	srv.SendDM(alice, "three")
	srv.DeliverAgain(two) // dispatched right after the next READY

	g2, logs := started(t, srv)
	run(t, g2, sink)
	sink.waitStored(t, 3)
	srv.SendDM(alice, "four") // live, after the duplicate
	got := sink.waitStored(t, 4)
	if want := []string{"one", "two", "three", "four"}; !slices.Equal(texts(got), want) {
		t.Errorf("stored %q, want %q", texts(got), want)
	}
	if len(logs.lines("skipping a message handled already", two.ID)) != 1 {
		t.Errorf("the live copy of %s was not seen and dropped; logs:\n%s", two.ID, logs)
	}
}

// TestRunBackfillsDowntime: messages sent while latch was down are read
// from the channel's history after the cursor, in order, exactly once,
// across pages, skipping the bot's own replies.
func TestRunBackfillsDowntime(t *testing.T) {
	srv := newFake(t)
	sink := newSink("")
	g, _ := started(t, srv)
	stop := run(t, g, sink)
	before := srv.SendDM(alice, "before")
	sink.waitStored(t, 1)
	if _, err := g.Send(testContext(t), before.ChannelID, gateways.Reply{Text: "a reply in the history", ReplyTo: before.ID}); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	waitFake(t, srv, "the gateway to close", func() bool { return !srv.Connected() })

	var want []string
	var lastID string
	for i := range 150 {
		want = append(want, fmt.Sprintf("m%03d", i))
		lastID = srv.AddDMHistory(alice, want[i]).ID
	}
	g2, _ := started(t, srv)
	run(t, g2, sink)
	got := sink.waitStored(t, 151)
	srv.SendDM(alice, "live")
	got = sink.waitStored(t, 152)
	if w := append(append([]string{"before"}, want...), "live"); !slices.Equal(texts(got), w) {
		t.Errorf("stored %d messages %q, want %d in order", len(got), texts(got), len(w))
	}
	calls := srv.Calls(discordtest.RouteMessages)
	if len(calls) != 2 || calls[0].Query["after"] != before.ID || calls[0].Query["limit"] != "100" {
		t.Errorf("history requests = %+v, want 2 pages, the first after %s", calls, before.ID)
	}
	c, _ := parseCursor(sink.ingestCalls()[len(sink.ingestCalls())-2].cursor)
	if c.last(before.ChannelID) != mustID(t, lastID) {
		t.Errorf("cursor after the backfill = %+v, want the last message %s", c, lastID)
	}
}

func TestRunResumesAfterDroppedConnection(t *testing.T) {
	srv := newFake(t)
	g, logs := started(t, srv)
	sink := newSink("")
	run(t, g, sink)
	srv.SendDM(alice, "one")
	sink.waitStored(t, 1)

	if n := srv.DropConnection(); n != 1 {
		t.Fatalf("dropped %d connections, want 1", n)
	}
	srv.SendDM(alice, "while away") // kept for RESUME
	waitFake(t, srv, "a RESUME", func() bool { return len(srv.Resumes()) > 0 })
	sink.waitStored(t, 2)
	srv.SendDM(alice, "after")
	got := sink.waitStored(t, 3)
	if want := []string{"one", "while away", "after"}; !slices.Equal(texts(got), want) {
		t.Errorf("stored %q, want %q", texts(got), want)
	}
	if r := srv.Resumes(); !r[0].OK || r[0].SessionID == "" || r[0].Seq == 0 {
		t.Errorf("RESUME = %+v, want an accepted one with session id and sequence", r[0])
	}
	if n := len(srv.Identifies()); n != 1 {
		t.Errorf("%d IDENTIFYs, want 1: the session resumed", n)
	}
	if srv.Count(discordtest.RouteMessages) != 0 {
		t.Error("a resumed session was backfilled; RESUME replays what was missed")
	}
	eventually(t, "Info to show the connection again", func() bool { return g.Info().Connected })
	for _, want := range []string{"lost the gateway connection", "gateway session resumed"} {
		if len(logs.lines(want)) == 0 {
			t.Errorf("no log line %q; logs:\n%s", want, logs)
		}
	}
}

// TestRunBackfillsWhenResumeFails: Discord refuses the RESUME (op 9), so
// discordgo identifies anew; what was sent meanwhile is backfilled.
func TestRunBackfillsWhenResumeFails(t *testing.T) {
	srv := newFake(t)
	g, logs := started(t, srv)
	sink := newSink("")
	run(t, g, sink)
	srv.SendDM(alice, "one")
	sink.waitStored(t, 1)

	srv.InvalidateSession()
	srv.DropConnection()
	srv.SendDM(alice, "while away") // no session can take it: history only
	waitFake(t, srv, "a new session", func() bool { return len(srv.Identifies()) == 2 })
	sink.waitStored(t, 2)
	srv.SendDM(alice, "after")
	got := sink.waitStored(t, 3)
	if want := []string{"one", "while away", "after"}; !slices.Equal(texts(got), want) {
		t.Errorf("stored %q, want %q", texts(got), want)
	}
	if r := srv.Resumes(); len(r) != 1 || r[0].OK {
		t.Errorf("RESUMEs = %+v, want one refused", r)
	}
	if len(logs.lines("could not be resumed")) != 1 {
		t.Errorf("the new session was not logged; logs:\n%s", logs)
	}
}

func TestRunRetriesSameBatchWhenIngestFails(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	sink := newSink("")
	sink.ingestErrs = 2
	run(t, g, sink)
	m := srv.SendDM(alice, "one")
	sink.waitStored(t, 1)
	calls := sink.ingestCalls()
	if len(calls) != 3 {
		t.Fatalf("%d Ingest calls, want 2 failures then a success", len(calls))
	}
	for i, c := range calls {
		if c.cursor != calls[0].cursor || len(c.msgs) != 1 || c.msgs[0].ID != m.ID {
			t.Errorf("call %d = %+v, want the same batch and cursor each time", i, c)
		}
	}
}

func TestRunStopsOnUnauthorizedAndForgetsLostChannels(t *testing.T) {
	srv := newFake(t)
	ch := srv.DMChannel(alice)
	cursor := fmt.Sprintf(`{"channels":[{"id":%q,"last":"1"},{"id":"999"  ,"last":"5"}]}`, ch)

	// A channel latch can no longer read (the fake knows no channel 999)
	// is forgotten.
	g, _ := started(t, srv)
	sink := newSink(cursor)
	stop := run(t, g, sink)
	eventually(t, "the lost channel to be forgotten", func() bool {
		c, _ := parseCursor(sink.storedCursor())
		return len(c.Channels) == 1 && c.Channels[0].ID == ch
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A token revoked meanwhile stops Run.
	g2, _ := started(t, srv)
	srv.Inject(discordtest.RouteMessages, discordtest.Fault{Status: 401})
	if err := g2.Run(testContext(t), newSink(cursor)); !errors.Is(err, ErrUnauthorized) || !errors.Is(err, gateways.ErrUnauthorized) {
		t.Errorf("Run = %v, want ErrUnauthorized", err)
	}
}

func TestGuildMessages(t *testing.T) {
	tests := []struct {
		name        string
		allowGroups bool
		text        func(mention string) string
		want        string // "" = ignored
	}{
		{"ignored without allow_groups", false, func(m string) string { return m + " hi" }, ""},
		{"no mention", true, func(string) string { return "just chatting" }, ""},
		{"mention stripped", true, func(m string) string { return m + " /pair ABCD-1234" }, "/pair ABCD-1234"},
		{"mention inside", true, func(m string) string { return "hey " + m + " what's up" }, "hey what's up"},
		{"bare mention", true, func(m string) string { return m }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			g, _ := started(t, srv, func(c *Config) { c.AllowGroups = tt.allowGroups })
			sink := newSink("")
			run(t, g, sink)
			gm := srv.SendGuildMessage("800000000000000001", "800000000000000002", alice, tt.text(srv.BotMention()))
			srv.SendDM(alice, "marker")
			got := sink.waitStored(t, 1)
			if tt.want == "" {
				if len(got) != 1 || got[0].Text != "marker" {
					t.Errorf("stored %+v, want only the marker", got)
				}
				return
			}
			got = sink.waitStored(t, 2)
			m := got[0]
			if m.Text != tt.want || m.ChatType != gateways.ChatGroup || m.ChatID != gm.ChannelID || m.UserID != alice.ID || m.ChatName != "" {
				t.Errorf("stored %+v, want text %q from alice in group %s", m, tt.want, gm.ChannelID)
			}
		})
	}
}

func mustID(t *testing.T, id string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRunBackfillOutlastsTransientErrors: the history route fails, for
// longer than any one call retries, the ways that go away by themselves —
// 429s (one of them global), a 500, 502s, a dropped connection — and then
// answers. The backfill keeps the channel throughout and stores what was
// sent while latch was down exactly once, before the live message.
func TestRunBackfillOutlastsTransientErrors(t *testing.T) {
	srv := newFake(t)
	ch := srv.DMChannel(alice)
	first := srv.AddDMHistory(alice, "stored before")
	cursor := fmt.Sprintf(`{"channels":[{"id":%q,"last":%q,"answered":true}]}`, ch, first.ID)
	srv.AddDMHistory(alice, "sent while down")
	faults := []discordtest.Fault{
		{Status: 429, RetryAfter: 0.01, Times: maxAttempts + 2},
		{Status: 429, RetryAfter: 0.01, Global: true},
		{Status: 500},
		{Status: 502, Times: 4}, // discordgo tries a 502 four times itself
		{Hangup: true},
	}
	srv.Inject(discordtest.RouteMessages, faults...)
	g, _ := started(t, srv)
	sink := newSink(cursor)
	run(t, g, sink)
	sink.waitStored(t, 1)
	srv.SendDM(alice, "live after")
	got := sink.waitStored(t, 2)
	if want := []string{"sent while down", "live after"}; !slices.Equal(texts(got), want) {
		t.Errorf("stored %q, want %q", texts(got), want)
	}
	for i, c := range sink.ingestCalls() {
		if cur, _ := parseCursor(c.cursor); cur.last(ch) == 0 {
			t.Errorf("Ingest call %d stored cursor %s: the channel was forgotten", i, c.cursor)
		}
	}
	if n, want := srv.Count(discordtest.RouteMessages), maxAttempts+2+1+1+4+1+1; n != want {
		t.Errorf("%d history requests, want %d: every fault, then the page", n, want)
	}
}

// TestRunKeepsLatchedChannelInCursor: after the owner's turn, strangers
// who each got an answer (a refused pairing code) fill the cursor; the
// owner's channel stays in it, so what they send while latch is down is
// still backfilled.
func TestRunKeepsLatchedChannelInCursor(t *testing.T) {
	srv, g, sink := running(t)
	in := srv.SendDM(alice, "hello")
	sink.waitStored(t, 1)
	ev := g.RenderTurn(testContext(t), in.ChannelID, in.ID)
	ev.Final("hi")
	ev.(interface{ End() }).End()
	stored := 1
	for i := range maxTracked {
		u := discordtest.User{ID: fmt.Sprintf("3100000000000000%02d", i), Username: fmt.Sprint("stranger", i)}
		m := srv.SendDM(u, "/pair WRONG-CODE")
		stored++
		sink.waitStored(t, stored)
		if _, err := g.Send(testContext(t), m.ChannelID, gateways.Reply{Text: "That code is not valid.", ReplyTo: m.ID}); err != nil {
			t.Fatal(err)
		}
		srv.SendDM(u, "/pair WRONG-AGAIN") // its Ingest notes the answer
		stored++
		sink.waitStored(t, stored)
	}
	c, _ := parseCursor(sink.storedCursor())
	if c.last(in.ChannelID) != mustID(t, in.ID) {
		t.Errorf("cursor %s lost the latched channel %s", sink.storedCursor(), in.ChannelID)
	}
}

// TestRunForgetsOnlyLostChannels: a channel leaves the cursor only when
// Discord says latch lost it (403 Missing Access, 404 Unknown Channel);
// any other refusal of its history keeps it for the next backfill, so
// nothing sent there while latch was down is given up on.
func TestRunForgetsOnlyLostChannels(t *testing.T) {
	tests := []struct {
		name   string
		fault  discordtest.Fault
		forget bool
	}{
		{"missing access", discordtest.Fault{Status: 403, Code: 50001, Message: "Missing Access"}, true},
		{"unknown channel", discordtest.Fault{Status: 404, Code: 10003, Message: "Unknown Channel"}, true},
		{"missing permissions", discordtest.Fault{Status: 403, Code: 50013, Message: "Missing Permissions"}, false},
		{"a proxy's 404", discordtest.Fault{Status: 404, Body: "<html>Not Found</html>"}, false},
		{"invalid form body", discordtest.Fault{Status: 400, Code: 50035, Message: "Invalid Form Body"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t)
			ch := srv.DMChannel(alice)
			first := srv.AddDMHistory(alice, "stored before")
			cursor := fmt.Sprintf(`{"channels":[{"id":%q,"last":%q}]}`, ch, first.ID)
			srv.Inject(discordtest.RouteMessages, tt.fault)
			g, logs := started(t, srv)
			sink := newSink(cursor)
			run(t, g, sink)
			if tt.forget {
				eventually(t, "the channel to be forgotten", func() bool { return sink.storedCursor() == "" })
				return
			}
			eventually(t, "the failure to be logged", func() bool {
				return len(logs.lines("history", ch, "keeping it")) > 0 || len(logs.lines("history", ch, "forgetting it")) > 0
			})
			srv.SendDM(alice, "live")
			sink.waitStored(t, 1)
			for i, c := range sink.ingestCalls() {
				if cur, _ := parseCursor(c.cursor); cur.last(ch) == 0 {
					t.Errorf("Ingest call %d stored cursor %q: the channel was forgotten", i, c.cursor)
				}
			}
		})
	}
}

// TestRunWithoutMessageContentIntent: an application that never enabled
// the privileged Message Content intent still works — a DM, a server
// message that mentions the bot (with allow_groups), and a DM sent while
// latch was down, all with their text. latch used to ask for the intent,
// and Discord closed such a session with 4014 before it read anything.
func TestRunWithoutMessageContentIntent(t *testing.T) {
	srv := newFake(t)
	srv.SetPrivilegedIntents(false)
	sink := newSink("")
	g, _ := started(t, srv, func(c *Config) { c.AllowGroups = true })
	stop := run(t, g, sink)
	srv.SendDM(alice, "a direct message")
	srv.SendGuildMessage("800000000000000001", "800000000000000002", alice, srv.BotMention()+" a mention")
	sink.waitStored(t, 2)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	waitFake(t, srv, "the gateway to close", func() bool { return !srv.Connected() })
	srv.AddDMHistory(alice, "sent while down")
	g2, _ := started(t, srv, func(c *Config) { c.AllowGroups = true })
	run(t, g2, sink)
	got := sink.waitStored(t, 3)
	if want := []string{"a direct message", "a mention", "sent while down"}; !slices.Equal(texts(got), want) {
		t.Errorf("stored %q, want %q", texts(got), want)
	}
}
