package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/latchd/latch/agent/provider"
)

// ToolSchedule lets the model make a scheduled job for its own chat.
const ToolSchedule = "schedule"

// Scheduler makes scheduled jobs for the schedule tool; the daemon's
// scheduler implements it.
type Scheduler interface {
	// ScheduleFor adds a job that posts to key's chat and returns what
	// the model is told (its id, when it runs next).
	ScheduleFor(key SessionKey, a ScheduleArgs) (string, error)
}

// ScheduleArgs are the schedule tool's arguments: Schedule for a recurring
// job, else At for a one-shot; Text is a prompt or a !command.
type ScheduleArgs struct {
	Schedule string `json:"schedule,omitempty"`
	At       string `json:"at,omitempty"`
	Text     string `json:"text"`
}

var scheduleDef = provider.Tool{Name: ToolSchedule, Description: "Schedule a job in this chat: a prompt you will be given again at that time, or a !command run in the shell. " +
	"Give either schedule (an interval like 30m, a 5-field cron line like \"0 9 * * 1-5\", or @daily/@hourly/@weekly) " +
	"or at (15:04, 2006-01-02 15:04, tomorrow 15:04, in 30m), in the owner's time zone. The owner lists jobs with /jobs and removes them with /cancel.",
	Schema: schema(`"schedule":{"type":"string"},"at":{"type":"string"},"text":{"type":"string","description":"a prompt, or !command"}`, "text")}

// toolCtx is what a tool call knows of its turn beyond its arguments.
type toolCtx struct {
	key SessionKey
	// commands: a job the model makes may run a !command — only where
	// it could run one anyway without the owner's say (bash allowed) or
	// the owner approves the schedule call itself (schedule asks).
	commands bool
}

type toolCtxKey struct{}

func withToolCtx(ctx context.Context, key SessionKey, p Policy) context.Context {
	return context.WithValue(ctx, toolCtxKey{}, toolCtx{key: key, commands: p.For(ToolBash) == Allow || p.For(ToolSchedule) == Ask})
}

func (tb *Toolbox) schedule(ctx context.Context, input json.RawMessage) (string, error) {
	var a ScheduleArgs
	if err := decode(input, &a); err != nil {
		return "", err
	}
	tc, ok := ctx.Value(toolCtxKey{}).(toolCtx)
	if tb.Schedule == nil || !ok {
		return "", errors.New("scheduling is not available in this session")
	}
	if !tc.commands && len(a.Text) > 0 && a.Text[0] == '!' {
		return "", errors.New("a job you schedule may not run a !command under the owner's permissions (schedule a prompt instead)")
	}
	out, err := tb.Schedule.ScheduleFor(tc.key, a)
	if err != nil {
		return "", fmt.Errorf("not scheduled: %w", err)
	}
	return out, nil
}

// scheduleLine is a schedule call as its approval shows it: when, then the
// whole text (a !command every line of it).
func scheduleLine(input json.RawMessage) string {
	var a ScheduleArgs
	json.Unmarshal(input, &a)
	when := "every " + a.Schedule
	if a.Schedule == "" {
		when = "at " + a.At
	}
	return when + ": " + a.Text
}

// offered leaves the schedule tool out of defs when there is no scheduler
// (the terminal chat's session has no chat to post to).
func (tb *Toolbox) offered(defs []provider.Tool) []provider.Tool {
	if tb != nil && tb.Schedule != nil {
		return defs
	}
	return slices.DeleteFunc(defs, func(d provider.Tool) bool { return d.Name == ToolSchedule })
}
