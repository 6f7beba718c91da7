package gateways

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// The outbox: what latch owes a chat is stored before it is sent and
// deleted right after the platform has taken it. A finished command's or
// turn's answer is stored with its inbox entry, moved to the outbox
// (state Answered), in the transaction that ends the work, before any pacing, formatting or
// sending; a notice is stored when it is decided. After a crash what is
// still stored is sent, in the chat's order, and never reported as
// interrupted. A crash after the platform took a message and before its
// deletion committed sends it again, marked MsgSentAgain (see DESIGN.md).

// MsgMayHaveRun tells a chat that a command was running when latch died:
// it was not run again, but it may have finished just before (its answer
// was not stored yet), so it may have run.
const MsgMayHaveRun = "⚠ This was running when latch was interrupted by a restart, and was not run again. " +
	"It may have finished just before the restart (its output is lost), so it may have run:\n"

// MsgSentAgain starts a message latch may have delivered already before a
// restart: the owner sees a copy, not a second run.
const MsgSentAgain = "↻ Sent again after a restart of latch (it may have reached you once already):\n"

// answerTx records that e's work is done and stores the answer the chat
// is owed with it, counting it handled.
func answerTx(tx *store.Tx, e store.Entry, a store.Answer) error {
	if err := tx.Incr(e.Gateway, CounterHandled, 1); err != nil {
		return err
	}
	return tx.AnswerInbox(e.Seq, a)
}

// commandDone ends a command whose shell has returned out: its answer is
// stored, then delivered. It reports whether the entry is settled, as
// runJob's work does.
func (h *Hub) commandDone(ctx context.Context, j *job, e store.Entry, out string) (settled bool) {
	switch {
	case h.dropped(j):
		return false // unpaired: nothing more is said
	case ctx.Err() != nil:
		// Latch itself stopped it (the shutdown's grace ran out): known
		// to be cut, which the next start says.
		if err := h.cfg.Store.Update(func(tx *store.Tx) error { return tx.SetInboxState(e.Seq, store.Cut) }); err != nil {
			h.log.Error("marking a stopped command cut", "seq", e.Seq, logkey.Err, err)
		}
		return true
	}
	a := store.Answer{Text: out, Pre: true}
	if err := h.cfg.Store.Update(func(tx *store.Tx) error { return answerTx(tx, e, a) }); err != nil {
		h.log.Error("storing a command's answer failed; sent unstored", "seq", e.Seq, logkey.Err, err)
		h.send(j.out, e.Gateway, e.ChatID, answerReply(e, a))
		return false
	}
	e.State, e.Answer = store.Answered, &a
	h.deliverAnswer(j.out, j, e)
	return true
}

// answerReply is the message that delivers a.
func answerReply(e store.Entry, a store.Answer) Reply {
	r := Reply{Text: a.Text, Pre: a.Pre, ReplyTo: e.MessageID}
	if e.Again {
		r.Text = MsgSentAgain + r.Text
	}
	return r
}

// deliverAnswer sends e's stored answer until the platform takes it (as a
// notice is sent), then deletes the entry. Cut short by a shutdown, the
// entry stays for the next start; by an unpair (j's, if any), it goes
// unsaid.
func (h *Hub) deliverAnswer(ctx context.Context, j *job, e store.Entry) {
	h.sendOwed(ctx, e, answerReply(e, *e.Answer))
	h.unsaid(ctx, j, e)
}

// unsaid deletes e, which ctx's end cut short, if j was dropped by an
// unpair: the chat hears nothing more of its work, now or after a restart.
func (h *Hub) unsaid(ctx context.Context, j *job, e store.Entry) {
	if ctx.Err() != nil && j != nil && h.dropped(j) {
		h.finish(e, false)
	}
}

// noticeFor bounds how long a notice is tried: one that cannot be
// delivered in a day (the bot was blocked, the chat is gone) is dropped.
const noticeFor = 24 * time.Hour

// sendOwed sends r, what e owes the chat, trying again while it fails —
// the gateway may not have connected yet at start, or the platform fails
// for a while — and deletes e right after the platform took it. What is
// owed is what the chat must hear (an answer, a code was minted, the chat
// was unpaired), so a failed send does not drop it. When ctx ends the
// entry stays, and the next start sends it: at least once, never silently
// lost.
func (h *Hub) sendOwed(ctx context.Context, e store.Entry, r Reply) {
	wait, deadline := cmp.Or(h.noticeWait, time.Second), h.cfg.Now().Add(noticeFor)
	for {
		err := h.trySend(ctx, e.Gateway, e.ChatID, r)
		switch {
		case err == nil:
			h.finish(e, false)
			return
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrRejected) || errors.Is(err, errUnknownGateway):
			h.log.Warn("refused by the platform; dropped", logkey.Gateway, e.Gateway, "seq", e.Seq, logkey.Err, err)
			h.finish(e, false)
			return
		case h.cfg.Now().After(deadline):
			h.log.Error("undeliverable for a day; dropped", logkey.Gateway, e.Gateway, "seq", e.Seq, logkey.Err, err)
			h.finish(e, false)
			return
		}
		h.log.Warn("sending what a chat is owed failed; trying again", logkey.Gateway, e.Gateway, "seq", e.Seq, logkey.Err, err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Minute)
	}
}

// sendNotice delivers a notice through the outbox. It is first marked as
// being sent (Running), one commit that notices, being rare, can afford:
// a notice found so marked after a crash may have been delivered, and is
// sent again with MsgSentAgain; one never tried is sent as it is.
func (h *Hub) sendNotice(ctx context.Context, e store.Entry) {
	if e.State != store.Running {
		if err := h.cfg.Store.Update(func(tx *store.Tx) error { return tx.SetInboxState(e.Seq, store.Running) }); err != nil {
			h.log.Error("marking a notice as being sent", "seq", e.Seq, logkey.Err, err)
		}
	}
	x := decodeExtra(e)
	r := Reply{Text: e.Text, ReplyTo: e.MessageID, Paired: e.Text == MsgPaired, Markdown: x.Markdown, Buttons: x.Buttons}
	if e.Again {
		r.Text = MsgSentAgain + r.Text
	}
	h.sendOwed(ctx, e, r)
}

// heldFinal passes a turn's events on to its renderer but keeps the final
// answer back: the Hub's Done hook stores it, and only once that has
// committed is it shown (see heldTurn). The agent calls Final and then
// Done from the turn's goroutine, one after the other.
type heldFinal struct {
	agent.Events
	final string
	got   bool
}

func (f *heldFinal) Final(text string) { f.final, f.got = text, true }

// done is the turn's Done hook: the entry ends with the answer stored in
// it, or, with no answer to show, deleted.
func (f *heldFinal) done(tx *store.Tx, e store.Entry) error {
	if strings.TrimSpace(f.final) == "" {
		return finishTx(tx, e, true)
	}
	return answerTx(tx, e, store.Answer{Text: f.final})
}

// heldTurn runs a turn of j through call, with started as its Started
// hook and the Hub's Done hook, which stores the final answer; the answer
// is delivered after that commit. It returns call's error.
func (h *Hub) heldTurn(j *job, e store.Entry, started func(*store.Tx) error, call func(agent.Events, agent.Hooks) error) error {
	ev, rendered := h.events(j, e)
	held := &heldFinal{Events: ev}
	hooks := agent.Hooks{Started: started, Done: func(tx *store.Tx) error { return held.done(tx, e) }}
	err := call(held, hooks)
	if err != nil || strings.TrimSpace(held.final) == "" {
		// A turn whose start was not stored stored nothing, its answer
		// neither (they share a transaction when the answer is quick):
		// the message runs again, so the answer is not shown now.
		if held.got && !errors.Is(err, agent.ErrNotStarted) {
			// Stored or not (the save failed), it is shown as before.
			ev.Final(held.final)
		}
		endEvents(ev)
		return err
	}
	e.State, e.Answer = store.Answered, &store.Answer{Text: held.final}
	if !rendered {
		h.deliverAnswer(j.out, j, e)
		return nil
	}
	// The renderer shows the answer in its final form, trying each part
	// a few times and saying so if one cannot be delivered; it returns
	// early only when j.out ends.
	ev.Final(held.final)
	endEvents(ev)
	if j.out.Err() != nil {
		h.unsaid(j.out, j, e)
		return nil
	}
	h.finish(e, false)
	return nil
}
