package telegram

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/gateways/telegram/tgmd"
	"github.com/latchd/latch/turn"
)

// TestChatLimiterPacesGroups: a private chat keeps one post per second
// after a burst; a group's full bucket plus a minute's refill stays within
// Telegram's 20 posts per minute.
func TestChatLimiterPacesGroups(t *testing.T) {
	g := New(Config{Token: testToken}, nil)
	private, group := g.chatLimiter(alice.ID), g.chatLimiter(opsGroup.ID)
	if private.Limit() != 1 || private.Burst() != chatBurst {
		t.Errorf("private chat: %v per second, burst %d; want 1, %d", private.Limit(), private.Burst(), chatBurst)
	}
	if most := float64(group.Burst()) + float64(group.Limit())*time.Minute.Seconds(); most > groupLimit+1e-6 || most < groupLimit-1 {
		t.Errorf("group: burst %d + %v per second for a minute = %.2f posts, want at most (and about) %d",
			group.Burst(), group.Limit(), most, groupLimit)
	}
}

// TestRenderTurnInGroupWithinLimits plays a long turn in a group — tool
// lines, then a long answer streamed into edits — over about a minute and
// a half of Telegram's time, with the fake's rate model and latch's pacing
// both running twenty times faster. Telegram would take no more than 20 of
// its posts a minute: the fake refuses none, the whole answer arrives, and
// the streaming edits come less often than in a private chat.
func TestRenderTurnInGroupWithinLimits(t *testing.T) {
	t.Parallel() // it takes seconds of pacing
	const speed = 20
	srv := newFake(t)
	srv.SetChatRateLimit(true)
	srv.SetRateSpeed(speed)
	g, _ := started(t, srv)
	g.chatEvery, g.groupWindow = chatInterval/speed, groupWindow/speed
	g.timing.stream, g.timing.groupStream = defaultTiming.stream/speed, defaultTiming.groupStream/speed
	q := srv.Deliver(telegramtest.Incoming{Chat: opsGroup, From: &alice, Text: "/status@latch_test_bot"})
	chat := strconv.FormatInt(opsGroup.ID, 10)

	ev := g.RenderTurn(testContext(t), chat, strconv.Itoa(q.MessageID))
	for i := range 16 {
		call := turn.ToolCall{ID: strconv.Itoa(i), Name: "bash", Summary: "step " + strconv.Itoa(i)}
		ev.ToolStarted(call)
		// Paces the producer (nothing is waited for): a tool runs about
		// as long as its line waits to be posted, so both its lines post.
		time.Sleep(180 * time.Millisecond)
		ev.ToolFinished(call, turn.ToolResult{Duration: time.Second})
	}
	md := longAnswer()
	stream(ev, md, 5*time.Millisecond)
	ev.Final(md)
	ev.(ender).End()

	if v := srv.ChatRateViolations(); v != 0 {
		t.Errorf("%d posts refused with 429 (%d for the group's 20 a minute)", v, srv.GroupRateViolations())
	}
	sent := srv.SentTo(opsGroup.ID)
	posts := 0
	for _, s := range sent {
		posts += 1 + len(s.Edits)
	}
	if posts <= telegramtest.GroupRateLimit {
		t.Fatalf("only %d posts; the test needs more than the group's limit to mean anything", posts)
	}
	i := slices.IndexFunc(sent, func(s telegramtest.Sent) bool { return s.ReplyTo == q.MessageID })
	if i < 0 || len(sent[i].Edits) < 3 {
		t.Fatalf("no streamed answer replying to the question among %d messages", len(sent))
	}
	answer := sent[i]
	last := answer.Time
	for i, e := range answer.Edits[:len(answer.Edits)-1] {
		// Server-side arrival times jitter by a few milliseconds.
		if gap := e.Time.Sub(last); gap < g.timing.groupStream*9/10 {
			t.Errorf("streaming edit %d came %v after the previous post, want at least %v in a group", i, gap, g.timing.groupStream)
		}
		last = e.Time
	}
	visible := answer.Current()
	for _, s := range sent[i+1:] {
		visible += "\n" + s.Plain // Plain is trimmed
	}
	want := tgmd.Visible(tgmd.Render(md))
	if strings.Join(strings.Fields(visible), " ") != strings.Join(strings.Fields(want), " ") {
		t.Errorf("the answer arrived incomplete:\n got %q\nwant %q", visible, want)
	}
}
