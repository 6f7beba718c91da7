package gateways

import (
	"github.com/latchd/latch/logkey"
	"github.com/latchd/latch/store"
)

// Jobs answers the latched chat's scheduling commands (/every, /at,
// /jobs, /cancel); package schedule implements it. The Hub answers them at
// once, not behind a running job, so that /cancel reaches a run in
// progress.
type Jobs interface {
	Command(c JobCommand) JobAnswer
}

// JobCommand is one scheduling command from the latched chat.
type JobCommand struct {
	Gateway, ChatID, UserID string
	Name, Arg               string
}

// JobAnswer is the reply to a JobCommand. Cancelled names the job it
// removed (0: none), whose queued or running run the Hub then stops.
type JobAnswer struct {
	Text      string
	Cancelled uint64
}

// jobCommand answers a scheduling command, or says there is no scheduler.
func (h *Hub) jobCommand(e store.Entry, name, arg string) string {
	if h.cfg.Jobs == nil {
		return "Scheduled jobs are not available in this latch."
	}
	a := h.cfg.Jobs.Command(JobCommand{Gateway: e.Gateway, ChatID: e.ChatID, UserID: e.UserID, Name: name, Arg: arg})
	if a.Cancelled != 0 && h.CancelJob(e.Gateway, a.Cancelled) {
		a.Text += "\nIts run in progress was stopped."
	}
	return a.Text
}

// CancelJob stops the runs of scheduled job id on gateway: a run in
// progress is stopped as /stop stops one, runs still queued (and the
// notices that announce them) are dropped as not run. It reports whether
// a run was in progress.
func (h *Hub) CancelJob(gateway string, id uint64) (stopped bool) {
	var dropped []store.Entry
	h.mu.Lock()
	for key, c := range h.chats {
		if key.gateway != gateway {
			continue
		}
		if j := c.running; j != nil && !j.ended && j.e.Job == id {
			j.stopped = true
			j.cancel()
			stopped = true
		}
		kept, fresh := c.queue[:0], 0
		for i, q := range c.queue {
			// A claimed job stays: its worker finishes it, stopped.
			if q.e.Job != id || (q.j != nil && q.j == c.running) {
				kept = append(kept, q)
				if i >= len(c.queue)-c.fresh {
					fresh++
				}
				continue
			}
			dropped = append(dropped, q.e)
		}
		clear(c.queue[len(kept):])
		c.queue, c.fresh = kept, fresh
	}
	h.mu.Unlock()
	for _, e := range dropped {
		h.log.Info("scheduled job cancelled; queued run dropped", logkey.Gateway, e.Gateway, "seq", e.Seq, "job", id)
		h.finish(e, false)
	}
	return stopped
}
