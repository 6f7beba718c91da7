package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/agent/provider/anthropic/anthropictest"
	"github.com/latchd/latch/config"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/gateways/telegram/telegramtest"
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

// approveButton is the approve button of an approval request.
func approveButton(t *testing.T, m telegramtest.Sent) string {
	t.Helper()
	for _, row := range m.Keyboard {
		for _, b := range row {
			if strings.HasPrefix(b.CallbackData, "approve:") {
				return b.CallbackData
			}
		}
	}
	t.Fatalf("no approve button on %q", m.Current())
	return ""
}

// TestE2EAgentSchedulesAJob: the schedule tool asks first, showing what
// would run; once approved the job fires under the clock and the agent
// gets the prompt as a turn of its own, marked as scheduled, and answers
// in the chat.
func TestE2EAgentSchedulesAJob(t *testing.T) {
	e := newEnv(t)
	clock := scheduletest.NewClock(time.Now())
	e.clock = clock
	fake := withModel(e)
	e.start()
	e.pair()
	fake.Script(
		anthropictest.ToolUse("toolu_1", "schedule", `{"schedule":"1h","text":"check the disk space"}`),
		anthropictest.Text("I will check every hour."),
	)
	e.say(owner, "check the disk every hour")
	m := e.waitReply(owner.ID, "Allow schedule?")
	if !strings.Contains(m.Current(), "every 1h: check the disk space") {
		t.Fatalf("approval request %q does not show the job", m.Current())
	}
	e.tg.SendCallback(telegramtest.Private(owner), owner, m.MessageID, approveButton(t, m))
	e.waitReply(owner.ID, "I will check every hour.")
	if !strings.Contains(string(fake.Requests()[1].Body), "scheduled as job #1") {
		t.Fatalf("the tool result does not name the job: %s", fake.Requests()[1].Body)
	}

	fake.Script(anthropictest.Text("Disk is 40% full."))
	clock.Advance(time.Hour)
	e.waitReply(owner.ID, "⏰ Scheduled job #1 (1h):")
	e.waitReply(owner.ID, "Disk is 40% full.")
	reqs := fake.Requests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "[Scheduled job #1 (1h)") || !strings.Contains(body, "check the disk space") {
		t.Fatalf("the scheduled turn's request: %s", body)
	}
	jobs, err := e.client().JobsList(t.Context())
	if err != nil || len(jobs) != 1 || jobs[0].By != "agent" || jobs[0].Runs != 1 {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
}

// TestE2ECutScheduledTurnIsNotResumed: a scheduled prompt whose turn a
// restart cut is reported as interrupted after the restart, not resumed
// (as a turn the owner sent would be) and not run again.
func TestE2ECutScheduledTurnIsNotResumed(t *testing.T) {
	e := newEnv(t)
	clock := scheduletest.NewClock(time.Now())
	e.clock = clock
	fake := withModel(e)
	withModelTweak := e.tweak
	e.tweak = func(c *config.Config) { withModelTweak(c); c.Agent.Permissions["bash"] = "allow" }
	r := e.start()
	e.pair()
	e.say(owner, "/every 1h run the long job")
	e.waitReply(owner.ID, "⏰ Job #1")
	marker := filepath.Join(e.home, "workspace", "ran")
	fake.Script(anthropictest.ToolUse("toolu_1", "bash", `{"command":"echo x >> ran; sleep 30"}`))
	clock.Advance(time.Hour)
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return len(b) > 0 })
	r.stop(t) // the grace is short: the turn is cut

	asked := len(fake.Requests())
	e.start()
	m := e.waitReply(owner.ID, "interrupted by a restart of latch")
	if !strings.Contains(m.Current(), "[Scheduled job #1") {
		t.Fatalf("interrupted notice %q", m.Current())
	}
	e.say(owner, "!echo after-the-notice")
	e.waitReply(owner.ID, "after-the-notice")
	if n := len(fake.Requests()); n != asked {
		t.Errorf("the model was asked %d more times: the cut turn was resumed", n-asked)
	}
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the job ran again", b)
	}
}

// TestE2EKill9MidScheduledRun: SIGKILL while a scheduled command runs (a
// real daemon process, the real clock). After the restart the run is
// reported as interrupted, not run again, and the job does not fire again.
func TestE2EKill9MidScheduledRun(t *testing.T) {
	e := newEnv(t)
	child := e.startChild()
	e.pair()
	marker := filepath.Join(e.home, "ran")
	pidfile := filepath.Join(e.home, "pgid")
	e.say(owner, "/at in 1s !echo $$ > "+pidfile+"; echo x >> "+marker+"; sleep 30")
	e.waitReply(owner.ID, "⏰ Job #1: once")
	waitFor(t, func() bool { b, _ := os.ReadFile(marker); return len(b) > 0 })
	child.Process.Kill()
	child.Wait()
	if b, err := os.ReadFile(pidfile); err == nil {
		if pgid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pgid > 1 {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	e.startChild()
	m := e.waitReply(owner.ID, "interrupted by a restart")
	if !strings.Contains(m.Current(), "echo x >> ") {
		t.Errorf("interrupted notice %q", m.Current())
	}
	e.say(owner, "/jobs")
	e.waitReply(owner.ID, "No scheduled jobs.")
	if b, _ := os.ReadFile(marker); string(b) != "x\n" {
		t.Errorf("marker = %q: the run ran again", b)
	}
	if n := e.repliesTo(owner.ID, "⏰ Scheduled job #1"); n != 1 {
		t.Errorf("the run was announced %d times:%s", n, e.describeSent())
	}
}
