package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchd/latch/agent"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/schedule"
	"github.com/latchd/latch/store"
)

// newScheduler builds the daemon's scheduler; its fired runs wake the Hub.
func (d *Daemon) newScheduler(db *store.DB) *schedule.Scheduler {
	return schedule.New(schedule.Config{
		Store: db, Clock: d.Clock, Location: d.Config.Schedule.Location, CatchUp: d.Config.Schedule.CatchUp,
		Wake: func() { d.hub.Wake() }, Log: d.Log.With("part", "schedule"),
	})
}

// JobsList implements control.JobsBackend.
func (d *Daemon) JobsList(ctx context.Context) ([]control.JobInfo, error) {
	jobs, err := d.sched.Jobs("")
	if err != nil {
		return nil, err
	}
	out := make([]control.JobInfo, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, d.jobInfo(j))
	}
	return out, nil
}

// JobsAdd implements control.JobsBackend. Like a mint, it is refused to a
// process latch started: a chat or the agent schedules through /every and
// the schedule tool, under the policy, not around it.
func (d *Daemon) JobsAdd(ctx context.Context, req control.JobAddRequest) (control.JobInfo, error) {
	if err := d.jobsOperator(ctx); err != nil {
		return control.JobInfo{}, err
	}
	if d.byName[req.Gateway] == nil {
		return control.JobInfo{}, fmt.Errorf("%q: %w", req.Gateway, control.ErrUnknownGateway)
	}
	n := schedule.NewJob{Gateway: req.Gateway, Spec: req.Schedule, Text: req.Text, By: "machine"}
	var err error
	if req.At != "" {
		if n.At, err = d.sched.Time(req.At); err != nil {
			return control.JobInfo{}, fmt.Errorf("%w: %s", control.ErrBadJob, err)
		}
	}
	j, err := d.sched.Add(n)
	switch {
	case errors.Is(err, schedule.ErrNotLatched):
		return control.JobInfo{}, fmt.Errorf("%q: %w: pair it first (latch pair %s)", req.Gateway, control.ErrNotLatched, req.Gateway)
	case schedule.IsUserError(err):
		return control.JobInfo{}, fmt.Errorf("%w: %s", control.ErrBadJob, err)
	case err != nil:
		return control.JobInfo{}, err
	}
	return d.jobInfo(j), nil
}

// JobsRemove implements control.JobsBackend: the job is deleted and its
// run in progress, if any, stopped.
func (d *Daemon) JobsRemove(ctx context.Context, id uint64) (control.JobInfo, error) {
	if err := d.jobsOperator(ctx); err != nil {
		return control.JobInfo{}, err
	}
	j, err := d.sched.Remove("", id)
	if errors.Is(err, schedule.ErrNoJob) {
		return control.JobInfo{}, fmt.Errorf("%w: no job #%d (latch jobs list shows them)", control.ErrBadJob, id)
	}
	if err != nil {
		return control.JobInfo{}, err
	}
	d.hub.CancelJob(j.Gateway, j.ID)
	return d.jobInfo(j), nil
}

// errJobsFromRun refuses `latch jobs add|rm` from a process latch started.
var errJobsFromRun = fmt.Errorf("%w: this request comes from a process latch started (a chat command or an agent tool); "+
	"the chat schedules with /every, /at and /cancel, the agent with its schedule tool", control.ErrRefused)

// jobsOperator is operator for the jobs routes, with their own message.
func (d *Daemon) jobsOperator(ctx context.Context) error {
	if err := d.operator(ctx); err != nil {
		if errors.Is(err, errFromRun) {
			return errJobsFromRun
		}
		return err
	}
	return nil
}

func (d *Daemon) jobInfo(j store.Job) control.JobInfo { return JobInfo(d.sched, j) }

// JobInfo is j as the control API shows it; the CLI uses it too when no
// daemon runs.
func JobInfo(s *schedule.Scheduler, j store.Job) control.JobInfo {
	return control.JobInfo{ID: j.ID, Gateway: j.Gateway, Schedule: j.Spec, Next: j.Next, Paused: j.Paused,
		Text: j.Text, By: j.By, Runs: j.Runs, Missed: j.Missed, Line: s.Line(j)}
}

// pausedJobs is what the unpair notice says of the n jobs it paused.
func pausedJobs(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" Its scheduled jobs (%d) are paused; after pairing again, /jobs resume runs them.", n)
}

// agentScheduler is the agent's schedule tool's way to the scheduler: a
// job for the turn's own chat, made by the agent.
type agentScheduler struct{ s *schedule.Scheduler }

func (a agentScheduler) ScheduleFor(key agent.SessionKey, args agent.ScheduleArgs) (string, error) {
	n := schedule.NewJob{Gateway: key.Gateway, ChatID: key.Chat, Spec: args.Schedule, Text: args.Text, By: "agent"}
	if (args.Schedule == "") == (args.At == "") {
		return "", errors.New("give either schedule or at")
	}
	var err error
	if args.At != "" {
		if n.At, err = a.s.Time(args.At); err != nil {
			return "", err
		}
	}
	j, err := a.s.Add(n)
	switch {
	case errors.Is(err, schedule.ErrNotLatched):
		return "", errors.New("this session has no latched chat to post to")
	case schedule.IsUserError(err):
		return "", err
	case err != nil:
		return "", errors.New("the job could not be stored")
	}
	return fmt.Sprintf("scheduled as job #%d: %s", j.ID, a.s.Line(j)), nil
}
