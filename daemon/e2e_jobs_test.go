package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/control"
	"github.com/latchd/latch/schedule/scheduletest"
)

// TestE2EScheduledJob: a job made from the chat fires under the clock and
// posts its run to the chat; `latch jobs` adds, lists and removes from the
// machine; an unpair pauses the jobs and says so.
func TestE2EScheduledJob(t *testing.T) {
	e := newEnv(t)
	clock := scheduletest.NewClock(time.Now())
	e.clock = clock
	e.start()
	e.pair()
	e.say(owner, "/every 1m !echo scheduled-$((6*7))")
	e.waitReply(owner.ID, "⏰ Job #1: 1m")
	clock.Advance(time.Minute)
	e.waitReply(owner.ID, "⏰ Scheduled job #1 (1m):")
	m := e.waitReply(owner.ID, "scheduled-42")
	if !strings.Contains(m.Current(), "exit 0") {
		t.Errorf("run reply = %q", m.Current())
	}

	c := e.client()
	ctx := context.Background()
	added, err := c.JobsAdd(ctx, control.JobAddRequest{Gateway: "telegram", At: "in 2h", Text: "!echo from the machine"})
	if err != nil || added.ID != 2 || added.Schedule != "" {
		t.Fatalf("jobs add = %+v, %v", added, err)
	}
	if _, err := c.JobsAdd(ctx, control.JobAddRequest{Gateway: "telegram", Schedule: "61 * * * *", Text: "x"}); !errors.Is(err, control.ErrBadJob) {
		t.Errorf("a bad schedule: err = %v, want ErrBadJob", err)
	}
	jobs, err := c.JobsList(ctx)
	if err != nil || len(jobs) != 2 || jobs[0].Runs != 1 || jobs[1].Text != "!echo from the machine" {
		t.Fatalf("jobs list = %+v, %v", jobs, err)
	}
	if _, err := c.JobsRemove(ctx, 2); err != nil {
		t.Fatalf("jobs rm: %v", err)
	}
	if _, err := c.JobsRemove(ctx, 2); !errors.Is(err, control.ErrBadJob) {
		t.Errorf("removing it again: err = %v, want ErrBadJob", err)
	}

	if err := c.Unpair(ctx, "telegram"); err != nil {
		t.Fatal(err)
	}
	e.waitReply(owner.ID, "Its scheduled jobs (1) are paused; after pairing again, /jobs resume runs them.")
	jobs, _ = c.JobsList(ctx)
	if len(jobs) != 1 || jobs[0].Paused == "" {
		t.Fatalf("after the unpair: %+v", jobs)
	}
}

// TestE2ENoJobsFromInsideARun: adding and removing jobs on the socket is
// refused to the daemon's descendants, as minting is: the chat schedules
// through /every (and the agent through its tool, under the policy), not
// around the policy by way of a command.
func TestE2ENoJobsFromInsideARun(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.pair()
	e.say(owner, "/every 1h !uptime")
	e.waitReply(owner.ID, "⏰ Job #1")
	for _, op := range []string{"jobs-add", "jobs-rm"} {
		if m := fromInsideARun(e, op, false); !strings.Contains(m, "REFUSED") {
			t.Fatalf("%s from the chat got %q, want REFUSED", op, m)
		}
	}
	jobs, err := e.client().JobsList(t.Context())
	if err != nil || len(jobs) != 1 || jobs[0].ID != 1 {
		t.Fatalf("jobs after the refused requests: %+v, %v", jobs, err)
	}
}
