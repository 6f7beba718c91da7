package telegram

import (
	"strconv"
	"testing"

	"github.com/latchd/latch/gateways"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
	"github.com/latchd/latch/turn"
)

// pressApprove sends an approval request through a turn and presses its
// Approve button; it returns the request and the press as the Hub gets it.
func pressApprove(t *testing.T, srv *telegramtest.Server, g *Gateway) (telegramtest.Sent, gateways.Message) {
	t.Helper()
	ev := g.RenderTurn(testContext(t), "1111", question(srv))
	ev.Approval(turn.Approval{ID: "k3x9p", Tool: "bash", Summary: "make test"})
	ev.(ender).End()
	req, err := srv.WaitSent(testContext(t), func(s telegramtest.Sent) bool { return s.Keyboard != nil })
	if err != nil {
		t.Fatal(err)
	}
	last, _ := srv.SendCallback(telegramtest.Private(alice), alice, req.MessageID, req.Keyboard[0][0].CallbackData)
	msgs := ingest(t, g, last) // the question, then the press
	if len(msgs) != 2 || msgs[1].Callback == nil {
		t.Fatalf("ingested %+v, want the question and the press", msgs)
	}
	return req, msgs[1]
}

func TestAnswerCallback(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	req, press := pressApprove(t, srv, g)
	cb := *press.Callback
	if cb.Data != "approve:k3x9p" || cb.MessageID != strconv.Itoa(req.MessageID) {
		t.Fatalf("callback %+v, want approve:k3x9p on message %d", cb, req.MessageID)
	}
	if err := g.AnswerCallback(testContext(t), press.ChatID, cb, "Approved.", "✓ approved"); err != nil {
		t.Fatalf("AnswerCallback: %v", err)
	}
	answers := srv.Calls("answerCallbackQuery")
	if len(answers) != 1 || answers[0].Params["text"] != "Approved." || !srv.CallbackAnswered(cb.ID) {
		t.Errorf("answerCallbackQuery calls %+v, want one with text Approved.", answers)
	}
	m := sentMessage(srv, req.MessageID)
	if m.Keyboard != nil {
		t.Errorf("the request still has buttons: %+v", m.Keyboard)
	}
	if want := "🔐 Allow bash?\nmake test\n\n✓ approved"; m.Edits[len(m.Edits)-1].Plain != want {
		t.Errorf("request now shows %q, want %q", m.Edits[len(m.Edits)-1].Plain, want)
	}
	// A second answer of the same press fails at Telegram; nothing else is
	// edited.
	if err := g.AnswerCallback(testContext(t), press.ChatID, cb, "", ""); err == nil {
		t.Error("answering a press twice succeeded")
	}
}

func TestAnswerCallbackAfterRestart(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	req, press := pressApprove(t, srv, g)
	g2, _ := started(t, srv) // a new process: the request's text is not known
	if err := g2.AnswerCallback(testContext(t), press.ChatID, *press.Callback, "", "✗ denied"); err != nil {
		t.Fatalf("AnswerCallback: %v", err)
	}
	if s := sentMessage(srv, req.MessageID); s.Keyboard != nil || s.Plain != req.Plain {
		t.Errorf("request %+v, want its text kept and its buttons removed", s)
	}
	if srv.Count("editMessageReplyMarkup") != 1 {
		t.Errorf("%d editMessageReplyMarkup calls, want 1", srv.Count("editMessageReplyMarkup"))
	}
}

func TestAnswerCallbackNoticeOnly(t *testing.T) {
	srv := newFake(t)
	g, _ := started(t, srv)
	_, press := pressApprove(t, srv, g)
	if err := g.AnswerCallback(testContext(t), press.ChatID, *press.Callback, "", ""); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count("editMessageText") + srv.Count("editMessageReplyMarkup"); n != 0 {
		t.Errorf("%d edits for an answer without resolution, want none", n)
	}
}

// sentMessage is the bot's message id in alice's chat as it is now.
func sentMessage(srv *telegramtest.Server, id int) telegramtest.Sent {
	for _, s := range srv.SentTo(1111) {
		if s.MessageID == id {
			return s
		}
	}
	return telegramtest.Sent{}
}
