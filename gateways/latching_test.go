package gateways

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
	"github.com/latchd/latch/turn"
)

// mintReplace mints a --replace code for telegram.
func (f *hubFixture) mintReplace(t *testing.T, origin string) pairing.Minted {
	t.Helper()
	var m pairing.Minted
	if err := f.db.Update(func(tx *store.Tx) (err error) {
		m, err = f.pairer.MintWith(tx, "telegram", 0, pairing.MintOptions{Replace: true, Origin: origin})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLatchApprovalOnlyByTheOwnersPress: a --replace code redeemed by chat
// 200 makes no latch; chat 100's owner gets the request with its buttons.
// A press from the candidate's chat, from another user in the latched
// chat, or of a tool approval's payload with the request's id changes
// nothing; the owner's press of the latch button moves the latch, and both
// chats are told. Shown to fail with classify accepting presses from any
// chat, and with pressed handing latch payloads to the agent.
func TestLatchApprovalOnlyByTheOwnersPress(t *testing.T) {
	f, bg, ag := newButtonFixture(t)
	f.run(t)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.gw.next(t)
	m := f.mintReplace(t, "from tmux")
	cand := private("200", "/pair "+m.Code)
	cand.ChatName, cand.UserName = "Mallory", "mallory"
	f.ingest(t, "2", cand)
	replies := []sentReply{f.gw.next(t), f.gw.next(t)}
	slices.SortFunc(replies, func(a, b sentReply) int { return strings.Compare(a.chatID, b.chatID) })
	req, wait := replies[0], replies[1]
	if wait.chatID != "200" || wait.Text != MsgAwaitingApproval {
		t.Errorf("candidate got %+v, want %q", wait, MsgAwaitingApproval)
	}
	if req.chatID != "100" || !req.Markdown || len(req.Buttons) != 2 ||
		!strings.Contains(req.Text, "Mallory") || !strings.Contains(req.Text, "from tmux") || !strings.Contains(req.Text, "minted at") {
		t.Fatalf("the owner's request = %+v", req)
	}
	ok, no := req.Buttons[0].Data, req.Buttons[1].Data
	id, found := strings.CutPrefix(ok, string(turn.KindLatchOK)+":")
	if !found || no != turn.Payload(turn.KindLatchNo, id) {
		t.Fatalf("buttons %+v, want latch-ok:/latch-no: with one id", req.Buttons)
	}
	latchOf := func() string {
		var l *store.Latch
		f.db.View(func(tx *store.Tx) (err error) { l, err = tx.Latch("telegram"); return err })
		if l == nil {
			return ""
		}
		return l.ChatID
	}
	// The candidate's own press and another user's in the owner's chat
	// are dropped by the chat lock: no answer at all.
	f.ingest(t, "3", press("200", "200", ok), press("100", "666", ok))
	// A tool approval's payload with the request's id goes to the agent,
	// which knows no such approval.
	f.ingest(t, "4", press("100", "100", "approve:"+id))
	if got := <-bg.answers; got[1] != "This request has expired." || latchOf() != "100" {
		t.Fatalf("tool payload answered %v, latch %q; want expired and chat 100", got, latchOf())
	}
	f.ingest(t, "5", press("100", "100", ok))
	if got := <-bg.answers; !strings.HasPrefix(got[1], "Approved") || got[2] != "✓ approved" {
		t.Errorf("owner's press answered %v", got)
	}
	if got := latchOf(); got != "200" {
		t.Fatalf("latch after the owner's press = %q, want 200", got)
	}
	told := map[string]string{}
	for range 2 {
		r := f.gw.next(t)
		told[r.chatID] = r.Text
	}
	if told["200"] != MsgPaired || !strings.HasPrefix(told["100"], "This chat was unlatched") {
		t.Errorf("after the approval the chats were told %q", told)
	}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	for _, d := range ag.decisions {
		if strings.Contains(d, id) {
			t.Errorf("the agent decided %q", d)
		}
	}
	select {
	case got := <-bg.answers:
		t.Errorf("a dropped press was answered: %v", got)
	default:
	}
}

// TestLatchRequestTypedCommands: the typed fallback works for the owner
// and, denied, spends the code.
func TestLatchRequestTypedCommands(t *testing.T) {
	f, _, _ := newButtonFixture(t)
	f.run(t)
	f.ingest(t, "1", private("100", "/pair "+f.mint(t)))
	f.gw.next(t)
	m := f.mintReplace(t, "")
	f.ingest(t, "2", private("200", "/pair "+m.Code))
	var id string
	for range 2 {
		if r := f.gw.next(t); r.chatID == "100" {
			id = strings.TrimPrefix(r.Buttons[0].Data, string(turn.KindLatchOK)+":")
		}
	}
	f.ingest(t, "3", private("200", "/denylatch "+id)) // not latched: dropped
	f.ingest(t, "4", private("100", "/denylatch "+strings.ToLower(id)))
	told := map[string]string{}
	for range 2 {
		r := f.gw.next(t)
		told[r.chatID] = r.Text
	}
	if !strings.HasPrefix(told["100"], "Denied") || told["200"] != MsgLatchDenied {
		t.Fatalf("after /denylatch the chats were told %q", told)
	}
	f.ingest(t, "5", private("200", "/pair "+m.Code))
	f.ingest(t, "6", private("100", "/approvelatch "+id))
	if r := f.gw.next(t); r.chatID != "100" || !strings.Contains(r.Text, "expired or was answered") {
		t.Fatalf("approving a denied request: %+v", r)
	}
}

// TestWrongCodeFeedbackPerWindow: a chat's failed attempts get one answer
// per attempt window, the same whatever the reason, in the adapter's
// formatting (Markdown: no literal backticks), saying that tries within
// the window go unanswered; the next window's try — the right code after
// the burn, here — is answered again. The owner got silence for
// all but the first of six tries without knowing why.
func TestWrongCodeFeedbackPerWindow(t *testing.T) {
	f := newHubFixture(t, false)
	now := time.Now()
	f.hub.cfg.Now = func() time.Time { return now }
	f.run(t)
	code := f.mint(t)
	var wrong []Message
	for _, c := range []string{"AAAA-AAAA", "BBBB-BBBB", "CCCC-CCCC", "DDDD-DDDD", "EEEE-EEEE", "FFFF-FFFF"} {
		wrong = append(wrong, private("300", "/pair "+c))
	}
	f.ingest(t, "1", wrong...)
	r := f.gw.next(t)
	if r.Text != MsgPairFailed || !r.Markdown || !strings.Contains(r.Text, "next 10 seconds get no answer") {
		t.Fatalf("reply = %+v, want MsgPairFailed as Markdown naming the window", r)
	}
	now = now.Add(failWindow)
	f.ingest(t, "2", private("300", "/pair "+code)) // burned by now
	if r := f.gw.next(t); r.Text != MsgPairFailed {
		t.Fatalf("the next window's try got %+v, want the same answer", r)
	}
	if n := f.gw.count(); n != 2 {
		t.Errorf("%d replies, want one per window", n)
	}
}
