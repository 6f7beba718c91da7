package gateways

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/pairing"
	"github.com/latchd/latch/store"
	"github.com/latchd/latch/turn"
)

// Typed commands of a latch approval request (pairing's approval rule);
// its buttons are turn.KindLatchOK and turn.KindLatchNo.
const (
	cmdLatchOK   = "approvelatch"
	cmdLatchDeny = "denylatch"
)

// Texts of the latch approval flow.
const (
	// MsgAwaitingApproval goes only to a chat that sent a right code, so it
	// tells nobody without one anything.
	MsgAwaitingApproval = "This code is valid. The latch is waiting for the owner's approval in a chat that controls latch now; this chat is told here when it is decided."
	MsgLatchDenied      = "The owner did not approve this latch. The code is spent; mint a new one on the machine to try again."
	MsgLatchExpired     = "No approval came in time. The code is spent; mint a new one on the machine to try again."
	MsgNoApprover       = "This code needed the owner's approval in a paired chat, and no chat is paired any more to give it. The code is spent; mint a new one on the machine."
)

// Notice is a message latch owes a chat, queued in the inbox (KindNotice)
// in the transaction that decided it, so a crash cannot lose it.
type Notice struct {
	Text string
	// Markdown and Buttons are Reply's.
	Markdown bool
	Buttons  []Button
}

// QueueNotice stores n for l's chat in tx.
func QueueNotice(tx *store.Tx, l store.Latch, n Notice, now time.Time) error {
	_, err := tx.AppendInbox(store.Entry{Kind: store.KindNotice, Gateway: l.Gateway, ChatID: l.ChatID, UserID: l.UserID,
		Text: n.Text, Received: now, Extra: extra{Markdown: n.Markdown, Buttons: n.Buttons}.encode()})
	return err
}

// Announce queues n to every chat latched in tx, of whichever gateway, but
// the chats in except (by gateway and chat id).
func Announce(tx *store.Tx, n Notice, now time.Time, except ...store.Latch) error {
	ls, err := tx.Latches()
	if err != nil {
		return err
	}
	for _, l := range ls {
		if !isOneOf(l, except) {
			if err := QueueNotice(tx, l, n, now); err != nil {
				return err
			}
		}
	}
	return nil
}

func isOneOf(l store.Latch, ls []store.Latch) bool {
	for _, o := range ls {
		if o.Gateway == l.Gateway && o.ChatID == l.ChatID {
			return true
		}
	}
	return false
}

// EscapeMarkdown backslash-escapes ASCII punctuation, so that a chat's or
// user's name (which a stranger chooses) shows as itself in a Markdown
// notice and cannot make a link or break the formatting.
func EscapeMarkdown(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && strings.ContainsRune("\\`*_{}[]()<>#+-.!|~=\"'&:;,/?@$%^", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// replacing: the gateway's pending code was minted with --replace and may
// still be redeemed, so /pair from another chat is an attempt even though
// the gateway is latched.
func replacing(tx *store.Tx, gateway string, now time.Time) (bool, error) {
	p, err := tx.Pending(gateway)
	if err != nil || p == nil {
		return false, err
	}
	return p.Replace && !p.Burned && now.Before(p.ExpiresAt), nil
}

// requested queues what a redemption waiting for approval owes: the
// candidate hears it waits, every latched chat gets the request with its
// buttons.
func requested(tx *store.Tx, m Message, r *store.LatchRequest, now time.Time) error {
	if err := QueueNotice(tx, store.Latch{Gateway: m.Gateway, ChatID: m.ChatID, UserID: m.UserID},
		Notice{Text: MsgAwaitingApproval}, now); err != nil {
		return err
	}
	return Announce(tx, approvalRequest(tx, r), now)
}

// approvalRequest is the message that asks a latched chat to approve r.
func approvalRequest(tx *store.Tx, r *store.LatchRequest) Notice {
	var b strings.Builder
	fmt.Fprintf(&b, "🔐 **Approve a new latch?** The %s bot would take orders from %s", r.Gateway, EscapeMarkdown(pairing.ChatLabel(r.Chat)))
	if cur, err := tx.Latch(r.Gateway); err == nil && cur != nil && r.Replace {
		fmt.Fprintf(&b, " instead of %s, which would be unlatched", EscapeMarkdown(pairing.ChatLabel(*cur)))
	}
	fmt.Fprintf(&b, ".\nThe code was minted at %s", r.MintedAt.Local().Format("15:04:05"))
	if r.Origin != "" {
		fmt.Fprintf(&b, " (%s)", EscapeMarkdown(r.Origin))
	}
	fmt.Fprintf(&b, " and redeemed at %s.\n", r.Requested.Local().Format("15:04:05"))
	fmt.Fprintf(&b, "Approve only if you did both yourself: a program on the machine can mint a code, only you can answer here. "+
		"Unanswered, it lapses at %s.\nOr type `/%s %s` · `/%s %s`", r.ExpiresAt.Local().Format("15:04"), cmdLatchOK, r.ID, cmdLatchDeny, r.ID)
	return Notice{Text: b.String(), Markdown: true, Buttons: []Button{
		{Label: "Approve the latch", Data: turn.Payload(turn.KindLatchOK, r.ID)},
		{Label: "Deny", Data: turn.Payload(turn.KindLatchNo, r.ID)},
	}}
}

// latchAnswer parses a latch approval button's payload.
func latchAnswer(data string) (id string, approve, ok bool) {
	kind, id, ok := turn.ParsePayload(data)
	if !ok || (kind != turn.KindLatchOK && kind != turn.KindLatchNo) {
		return "", false, false
	}
	return id, kind == turn.KindLatchOK, id != ""
}

// decideLatch answers a latch request for the owner in e's chat (a button
// press or a typed command, which the chat lock let through: only the
// latched chat's owner). The pairer checks again, in the transaction, that
// e's chat and user hold their latch. It returns the reply and, for a
// button, the mark the request's message gets.
func (h *Hub) decideLatch(e store.Entry, id string, approve bool) (reply, resolved string) {
	by := store.Latch{Gateway: e.Gateway, ChatID: e.ChatID, UserID: e.UserID}
	now := h.cfg.Now()
	var d pairing.Decision
	err := h.cfg.Store.Update(func(tx *store.Tx) (err error) {
		if approve {
			d, err = h.cfg.Pairer.Approve(tx, id, by)
		} else {
			d, err = h.cfg.Pairer.Deny(tx, id, by)
		}
		if err != nil {
			return err
		}
		return decided(tx, d, by, now)
	})
	switch {
	case errors.Is(err, pairing.ErrNoRequest):
		return "This latch request has expired or was answered already.", ""
	case err != nil:
		h.log.Error("answering a latch request failed", logkey.Gateway, e.Gateway, logkey.Err, err)
		return "Could not record the answer; see the daemon's log. Nothing was latched.", ""
	}
	label := pairing.ChatLabel(d.Request.Chat)
	if !approve {
		h.log.Warn("latch denied by the owner", logkey.Gateway, d.Request.Gateway, logkey.Chat, d.Request.Chat.ChatID)
		h.poke()
		return "Denied: " + d.Request.Gateway + " stays as it is.", "✗ denied"
	}
	h.log.Info("gateway latched on the owner's approval", logkey.Gateway, d.Request.Gateway, logkey.Chat, d.Request.Chat.ChatID)
	if d.Replaced != nil {
		// The old chat no longer controls anything: its work stops as
		// after an unpair.
		h.Unlatched(d.Request.Gateway)
	}
	h.poke()
	return "Approved: " + d.Request.Gateway + " now answers " + label + ".", "✓ approved"
}

// decided queues what an answered request owes, in its transaction.
func decided(tx *store.Tx, d pairing.Decision, by store.Latch, now time.Time) error {
	r := d.Request
	cand := store.Latch{Gateway: r.Gateway, ChatID: r.Chat.ChatID, UserID: r.Chat.UserID}
	label := EscapeMarkdown(pairing.ChatLabel(r.Chat))
	if d.Latch == nil {
		if err := QueueNotice(tx, cand, Notice{Text: MsgLatchDenied}, now); err != nil {
			return err
		}
		return Announce(tx, Notice{Text: fmt.Sprintf("✗ The latch of %s to %s was denied.", r.Gateway, label), Markdown: true}, now, by)
	}
	if err := QueueNotice(tx, cand, Notice{Text: MsgPaired}, now); err != nil {
		return err
	}
	skip := []store.Latch{by, cand}
	if old := d.Replaced; old != nil {
		skip = append(skip, *old)
		text := fmt.Sprintf("This chat was unlatched: %s now answers %s instead (approved in a paired chat). This chat no longer controls anything on the machine.",
			r.Gateway, pairing.ChatLabel(r.Chat))
		if err := QueueNotice(tx, *old, Notice{Text: text}, now); err != nil {
			return err
		}
	}
	return Announce(tx, Notice{Text: fmt.Sprintf("✓ %s now answers %s (approved in a paired chat).", r.Gateway, label), Markdown: true}, now, skip...)
}

// ExpireLatchRequests drops the latch requests whose time is up and tells
// the candidates and the latched chats; the daemon calls it now and then.
func (h *Hub) ExpireLatchRequests() error {
	now := h.cfg.Now()
	var gone []store.LatchRequest
	err := h.cfg.Store.Update(func(tx *store.Tx) (err error) {
		if gone, err = h.cfg.Pairer.Expire(tx); err != nil {
			return err
		}
		for _, r := range gone {
			cand := store.Latch{Gateway: r.Gateway, ChatID: r.Chat.ChatID, UserID: r.Chat.UserID}
			if err := QueueNotice(tx, cand, Notice{Text: MsgLatchExpired}, now); err != nil {
				return err
			}
			text := fmt.Sprintf("The request to latch %s to %s lapsed unanswered; its code is spent.", r.Gateway, EscapeMarkdown(pairing.ChatLabel(r.Chat)))
			if err := Announce(tx, Notice{Text: text, Markdown: true}, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("expire latch requests: %w", err)
	}
	if len(gone) > 0 {
		h.poke()
	}
	return nil
}

// Wake makes the Hub look at the inbox now: the daemon queued notices,
// or a scheduled job fired.
func (h *Hub) Wake() { h.poke() }

// latchCommand answers the typed fallback of a latch request's buttons.
func (h *Hub) latchCommand(e store.Entry, name, arg string) string {
	if arg == "" {
		return fmt.Sprintf("Usage: /%s <request id>, as the request shows it.", name)
	}
	reply, _ := h.decideLatch(e, strings.ToUpper(strings.TrimSpace(arg)), name == cmdLatchOK)
	return reply
}

// pressedLatch handles a latch request's button; ok is false for any other
// payload.
func (h *Hub) pressedLatch(ctx context.Context, e store.Entry, cb *Callback, ans CallbackAnswerer) bool {
	id, approve, ok := latchAnswer(cb.Data)
	if !ok {
		return false
	}
	notice, resolved := h.decideLatch(e, id, approve)
	h.workers.Add(1)
	go func() {
		defer h.workers.Done()
		if err := ans.AnswerCallback(ctx, e.ChatID, *cb, turn.Clip(notice, 190), resolved); err != nil {
			h.log.Warn("answering a button press failed", logkey.Gateway, e.Gateway, logkey.Err, err)
		}
	}()
	return true
}
