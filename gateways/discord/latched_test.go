package discord

import (
	"fmt"
	"slices"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/discord/discordtest"
)

// TestSendMarksOnlyThePairedChatAsOwner: a reply the Hub marks Paired makes a
// channel the owner's in the cursor; what latch sends a stranger — a
// refused code, any other text — only makes theirs answered.
func TestSendMarksOnlyThePairedChatAsOwner(t *testing.T) {
	srv, g, sink := running(t)
	ctx := testContext(t)

	try := srv.SendDM(bob, "/pair WXYZ-2345")
	sink.waitStored(t, 1)
	for _, text := range []string{gateways.MsgPairFailed, "Paired.", gateways.MsgPaired} {
		if _, err := g.Send(ctx, try.ChannelID, gateways.Reply{Text: text, ReplyTo: try.ID}); err != nil {
			t.Fatal(err)
		}
	}
	pair := srv.SendDM(alice, "/pair ABCD-2345")
	sink.waitStored(t, 2)
	if _, err := g.Send(ctx, pair.ChannelID, gateways.Reply{Text: gateways.MsgPaired, ReplyTo: pair.ID, Paired: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the paired channel marked as the owner's", func() bool {
		m, _ := markOf(sink.storedCursor(), pair.ChannelID)
		return m.Owner
	})
	if m, ok := markOf(sink.storedCursor(), try.ChannelID); !ok || !m.Answered || m.Owner {
		t.Errorf("the stranger's channel is %+v in %s, want answered, not the owner's", m, sink.storedCursor())
	}
}

// TestRunLatchedChannelComesBackWhereItWas: strangers push the owner's
// channel out of the cursor between their "/pair CODE" and the Hub's
// answer, while the owner already sent a command. The answer brings the
// channel back past that command, not past the pairing message: after a
// restart the backfill fetches what came later and not the command again,
// which would run twice.
func TestRunLatchedChannelComesBackWhereItWas(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	sink := newSink("")
	stop := run(t, g, sink)
	pair := srv.SendDM(alice, "/pair ABCD-2345")
	srv.SendDM(alice, "!echo once")
	for i := range maxTracked {
		srv.SendDM(discordtest.User{ID: fmt.Sprint(310000000000000000 + i), Username: fmt.Sprint("stranger", i)}, "hi")
	}
	sink.waitStored(t, 2+maxTracked)
	if _, ok := markOf(sink.storedCursor(), pair.ChannelID); ok {
		t.Fatalf("the strangers did not push the owner's channel out of %s; the test proves nothing", sink.storedCursor())
	}
	if _, err := g.Send(testContext(t), pair.ChannelID, gateways.Reply{Text: gateways.MsgPaired, ReplyTo: pair.ID, Paired: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the latched channel back in the cursor", func() bool {
		_, ok := markOf(sink.storedCursor(), pair.ChannelID)
		return ok
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	waitFake(t, srv, "the gateway to close", func() bool { return !srv.Connected() })

	srv.AddDMHistory(alice, "!echo while down")
	g2, _ := started(t, srv)
	run(t, g2, sink)
	srv.SendDM(alice, "!echo after")
	got := sink.waitStored(t, 2+maxTracked+2)
	var owners []string
	for _, m := range got[2+maxTracked:] {
		owners = append(owners, m.Text)
	}
	if want := []string{"!echo while down", "!echo after"}; !slices.Equal(owners, want) {
		t.Errorf("after the restart the owner's DM gave %q, want %q", owners, want)
	}
}

// markOf returns a channel's mark in a stored cursor.
func markOf(stored, channel string) (mark, bool) {
	c, _ := parseCursor(stored)
	i := slices.IndexFunc(c.Channels, func(m mark) bool { return m.ID == channel })
	if i < 0 {
		return mark{}, false
	}
	return c.Channels[i], true
}
