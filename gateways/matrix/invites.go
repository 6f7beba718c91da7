package matrix

import (
	"context"
	"encoding/json"
	"sort"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// maxPending bounds the rooms latch has joined that are not (yet) the
// latched one: each invite past it pushes the oldest such room out.
// maxJoinsPerSync bounds the invites one /sync may have latch join; the
// rest are declined. Together they keep a flood of invites from costing
// more than a few rooms, and invites never pile up: each is joined or
// declined once it is seen.
const (
	maxPending      = 8
	maxJoinsPerSync = 2
)

// answerInvites joins the invites latch takes — a DM (with AllowGroups
// any room), and once the owner is known only the owner's — and declines
// the rest.
func (g *Gateway) answerInvites(ctx context.Context, resp *mautrix.RespSync) {
	self := g.self()
	o := g.ownerNow()
	rooms := make([]id.RoomID, 0, len(resp.Rooms.Invite))
	for rid := range resp.Rooms.Invite {
		rooms = append(rooms, rid)
	}
	sort.Slice(rooms, func(i, j int) bool { return rooms[i] < rooms[j] })
	joins := 0
	for _, rid := range rooms {
		if ctx.Err() != nil {
			return
		}
		inviter, direct := invite(resp.Rooms.Invite[rid], self)
		take := (direct || g.cfg.AllowGroups) && inviter != "" && (o.User == "" || inviter == o.User) && joins < maxJoinsPerSync
		if !take {
			g.leave(ctx, rid, "declined an invite", inviter)
			continue
		}
		joins++
		err := g.call(ctx, func(ctx context.Context) error {
			_, err := g.cli.JoinRoomByID(ctx, rid)
			return err
		})
		if err != nil {
			g.log.Warn("joining a room failed", "chat", string(rid), "err", err)
			continue
		}
		g.mu.Lock()
		r := g.roomLocked(rid)
		r.inviter, r.known, r.direct = inviter, direct, direct
		evict := g.pendingOverLocked()
		g.mu.Unlock()
		g.log.Info("joined a room on invite", "chat", string(rid), "inviter", string(inviter), "direct", direct)
		for _, old := range evict {
			g.leave(ctx, old, "left a room never latched", "")
		}
	}
}

// invite reads latch's invite: who sent it and whether it is a DM.
func invite(r *mautrix.SyncInvitedRoom, self id.UserID) (inviter id.UserID, direct bool) {
	if r == nil {
		return "", false
	}
	for _, evt := range r.State.Events {
		if evt == nil || evt.Type != event.StateMember || evt.StateKey == nil || id.UserID(*evt.StateKey) != self {
			continue
		}
		var c struct {
			Membership string `json:"membership"`
			IsDirect   bool   `json:"is_direct"`
		}
		if json.Unmarshal(evt.Content.VeryRaw, &c) != nil || c.Membership != "invite" {
			continue
		}
		return evt.Sender, c.IsDirect
	}
	return "", false
}

// pendingOverLocked returns the oldest joined rooms, not the latched one,
// past maxPending, and forgets them. g.mu is held.
func (g *Gateway) pendingOverLocked() []id.RoomID {
	var pending []id.RoomID
	for rid, r := range g.rooms {
		if rid != g.owner.Room && !r.joinedAt.IsZero() && r.inviter != "" {
			pending = append(pending, rid)
		}
	}
	if len(pending) <= maxPending {
		return nil
	}
	sort.Slice(pending, func(i, j int) bool { return g.rooms[pending[i]].joinedAt.Before(g.rooms[pending[j]].joinedAt) })
	out := pending[:len(pending)-maxPending]
	for _, rid := range out {
		delete(g.rooms, rid)
	}
	return out
}

func (g *Gateway) leave(ctx context.Context, rid id.RoomID, what string, who id.UserID) {
	err := g.call(ctx, func(ctx context.Context) error {
		_, err := g.cli.LeaveRoom(ctx, rid)
		return err
	})
	if err != nil && ctx.Err() == nil {
		g.log.Warn("leaving a room failed", "chat", string(rid), "err", err)
		return
	}
	g.log.Debug(what, "chat", string(rid), "inviter", string(who))
}
