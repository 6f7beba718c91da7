package gatewaytest

import (
	"errors"
	"strings"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/turn"
)

// testBadToken: Start with a token the platform refuses fails with
// ErrUnauthorized, and says nothing of the token.
func testBadToken(t *testing.T, h *harness) {
	bad := "0" + h.f.Token[1:]
	if bad == h.f.Token {
		bad = "1" + h.f.Token[1:]
	}
	g := h.f.New(bad, h.log)
	err := h.noteErr(g.Start(h.ctx))
	closeGateway(g)
	if !errors.Is(err, gateways.ErrUnauthorized) {
		t.Fatalf("Start with a bad token = %v, want ErrUnauthorized", err)
	}
	if strings.Contains(err.Error(), bad) || strings.Contains(h.logs.String(), bad) {
		t.Error("the rejected token is in the error or the logs")
	}
}

// testPairAnswerAndSilence: the owner pairs and gets answers, none of
// which pings anyone; a stranger, and another user in a room the owner
// shares with the bot, get nothing at all.
func testPairAnswerAndSilence(t *testing.T, h *harness) {
	h.start()
	h.pair()
	h.FromStrangerAndOther("/pair ABCD-2345")
	h.f.FromOwner("!echo one", false)
	h.waitOwner("ran one")
	h.FromStrangerAndOther("!echo two")
	h.f.FromOwner("!echo three", false)
	h.waitOwner("ran three")
	h.idle()
	for _, m := range h.f.ToOwner() {
		if m.Pings {
			t.Errorf("%q would ping someone", m.Text)
		}
	}
	if n := h.countOwner("ran two"); n != 0 {
		t.Error("a stranger's command ran")
	}
	if got := h.f.ToStranger(); len(got) != 0 {
		t.Errorf("the stranger got %+v", got)
	}
	if got := h.f.ToOther(); len(got) != 0 {
		t.Errorf("the other user in the shared room got %+v", got)
	}
}

// FromStrangerAndOther sends text as the stranger and as the other user.
func (h *harness) FromStrangerAndOther(text string) {
	h.f.FromStranger(text)
	h.f.FromOther(text)
}

// testWhileDown: what the owner sends while latch is down is handled
// after the restart, once.
func testWhileDown(t *testing.T, h *harness) {
	h.start()
	h.pair()
	h.onceAfterRestart(t, "while down", func() { h.f.FromOwner("!echo while down", true) })
}

// testIngestBeforeConfirm: a message whose Ingest failed is not confirmed
// to the platform (nor its cursor stored) as if it were: after a restart
// it is handled, once.
func testIngestBeforeConfirm(t *testing.T, h *harness) {
	h.start()
	h.pair()
	h.idle()
	h.failIngest.Store(true)
	h.f.FromOwner("!echo kept", false)
	h.eventually("an Ingest to fail", func() bool { return h.failed.Load() > 0 })
	h.onceAfterRestart(t, "kept", func() { h.failIngest.Store(false) })
}

// testRedelivered: a message the platform delivers twice runs once.
func testRedelivered(t *testing.T, h *harness) {
	h.start()
	h.pair()
	id := h.f.FromOwner("!echo once", false)
	h.waitOwner("ran once")
	h.idle()
	h.f.Redeliver(id)
	// Two messages after it: a fake may serve the copy with the next
	// batch (Telegram's replay comes in the poll after the one under way),
	// and the last one is handled after it either way.
	h.f.FromOwner("!echo next", false)
	h.waitOwner("ran next")
	h.f.FromOwner("!echo last", false)
	h.waitOwner("ran last")
	h.idle()
	if n := h.countOwner("ran once"); n != 1 {
		t.Errorf("the redelivered message ran %d times", n)
	}
}

// testButtonPress: a press of an approval button reaches the Hub and is
// answered exactly once (here "expired": no agent waits for it).
func testButtonPress(t *testing.T, h *harness) {
	g := h.start()
	h.pair()
	r, ok := g.(gateways.TurnRenderer)
	if !ok {
		t.Fatalf("%s renders no turns", h.f.Name)
	}
	ev := r.RenderTurn(h.ctx, h.f.OwnerChat, "")
	ev.Approval(turn.Approval{ID: "k1", Tool: "bash", Summary: "ls", Detail: "ls"})
	ev.(interface{ End() }).End()
	req := h.waitOwner("Allow")
	answers, err := h.f.Press(req.ID, turn.Payload(turn.KindApprove, "k1"))
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the press to be answered", func() bool { return answers() > 0 })
	// A second answer would come from the same goroutine right after:
	// a later owner message, answered, is past it.
	h.f.FromOwner("!echo after", false)
	h.waitOwner("ran after")
	h.idle()
	if n := answers(); n != 1 {
		t.Errorf("the press was answered %d times", n)
	}
}

// testLongText: a reply longer than a message is split into messages
// within the platform's limit, and none of its text is lost.
func testLongText(t *testing.T, h *harness) {
	g := h.start()
	h.pair()
	n := 1
	for h.f.Measure(strings.Join(words(n), " ")) < 3*h.f.Limit {
		n *= 2
	}
	want := strings.Join(words(n), " ")
	h.idle()
	before := len(h.f.ToOwner())
	if _, err := g.Send(h.ctx, h.f.OwnerChat, gateways.Reply{Text: want}); h.noteErr(err) != nil {
		t.Fatalf("Send: %v", err)
	}
	sent := h.f.ToOwner()[before:]
	var got strings.Builder
	for _, m := range sent {
		if l := h.f.Measure(m.Text); l > h.f.Limit {
			t.Errorf("a message of %d, over the limit %d", l, h.f.Limit)
		}
		got.WriteString(m.Text)
	}
	if len(sent) < 3 {
		t.Errorf("%d messages for 3 times the limit", len(sent))
	}
	// A cut may fall inside a word or drop the space it falls on.
	if noSpace(got.String()) != noSpace(want) {
		t.Errorf("the messages' text differs from the reply's: %d characters, want %d", len(noSpace(got.String())), len(noSpace(want)))
	}
}

func noSpace(s string) string { return strings.Join(strings.Fields(s), "") }

// testRejected: a send the platform refuses with a 4xx is ErrRejected,
// for the Hub not to try it again.
func testRejected(t *testing.T, h *harness) {
	g := h.start()
	h.pair()
	h.f.FailSends(400, 1, 0)
	_, err := g.Send(h.ctx, h.f.OwnerChat, gateways.Reply{Text: "refused"})
	h.noteErr(err)
	if !errors.Is(err, gateways.ErrRejected) {
		t.Errorf("Send refused with 400 = %v, want ErrRejected", err)
	}
}

// testRateLimit: a 429 is waited out, then the send goes through, tried
// once more and no more.
func testRateLimit(t *testing.T, h *harness) {
	g := h.start()
	h.pair()
	h.idle()
	before := h.f.Sends()
	h.f.FailSends(429, 1, 1)
	if _, err := g.Send(h.ctx, h.f.OwnerChat, gateways.Reply{Text: "after the limit"}); h.noteErr(err) != nil {
		t.Fatalf("Send after a 429 = %v", err)
	}
	if n := h.f.Sends() - before; n != 2 {
		t.Errorf("%d send requests for one message after one 429, want 2", n)
	}
	h.waitOwner("after the limit")
}

// testOutboxAfterRestart: an answer that could not be sent (the platform
// failing) is still owed after a restart, and delivered then, once.
func testOutboxAfterRestart(t *testing.T, h *harness) {
	h.start()
	h.pair()
	h.idle()
	h.f.FailSends(500, -1, 0)
	before := h.f.Sends()
	h.f.FromOwner("!echo owed", false)
	h.eventually("a send of the answer to fail", func() bool { return h.f.Sends() > before })
	h.onceAfterRestart(t, "owed", h.f.ClearFaults)
}

// onceAfterRestart stops latch, runs down while it is down, starts it
// again and wants "ran <what>" to reach the owner, once, also after one
// more restart.
func (h *harness) onceAfterRestart(t *testing.T, what string, down func()) {
	t.Helper()
	h.stopAll()
	down()
	h.start()
	h.waitOwner("ran " + what)
	h.idle()
	h.stopAll()
	h.start() // and not again at the next start
	h.f.FromOwner("!echo after", false)
	h.waitOwner("ran after")
	h.idle()
	// A stop can land while the answer is being sent: the outbox then
	// sends it once more after the start, marked as possibly a second
	// copy (gateways.MsgSentAgain). Never twice unmarked, never lost.
	n, again := 0, 0
	for _, m := range h.f.ToOwner() {
		if strings.Contains(m.Text, "ran "+what) {
			n++
			if strings.Contains(m.Text, sentAgain) {
				again++
			}
		}
	}
	if n == 0 || n-again > 1 || n > 2 {
		t.Errorf("%q reached the owner %d times (%d of them marked as sent again), want once, or once more marked", "ran "+what, n, again)
	}
}

// sentAgain is how the mark of an answer sent again after a restart
// begins (gateways.MsgSentAgain).
var sentAgain = strings.SplitN(gateways.MsgSentAgain, " (", 2)[0]
