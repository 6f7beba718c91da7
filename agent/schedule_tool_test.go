package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

type recordScheduler struct{ got []ScheduleArgs }

func (r *recordScheduler) ScheduleFor(key SessionKey, a ScheduleArgs) (string, error) {
	r.got = append(r.got, a)
	return "scheduled as job #1", nil
}

// TestScheduleToolCommands: a job the model makes may run a !command only
// where the policy lets bash run without asking or makes the schedule
// call itself ask; otherwise the owner would never see the command.
func TestScheduleToolCommands(t *testing.T) {
	for _, tt := range []struct {
		name     string
		policy   Policy
		commands bool
	}{
		{"defaults: schedule asks", DefaultPolicy(), true},
		{"schedule allowed, bash asks", Policy{ToolSchedule: Allow, ToolBash: Ask}, false},
		{"schedule allowed, bash denied", Policy{ToolSchedule: Allow}, false},
		{"both allowed", Policy{ToolSchedule: Allow, ToolBash: Allow}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordScheduler{}
			tb := &Toolbox{Schedule: rec}
			ctx := withToolCtx(context.Background(), SessionKey{Gateway: "telegram", Chat: "1"}, tt.policy)
			_, err := tb.schedule(ctx, json.RawMessage(`{"schedule":"1h","text":"!rm -rf ~"}`))
			if (err == nil) != tt.commands {
				t.Fatalf("a !command job: err = %v, want allowed = %v", err, tt.commands)
			}
			if out, err := tb.schedule(ctx, json.RawMessage(`{"schedule":"1h","text":"check mail"}`)); err != nil || !strings.Contains(out, "job #1") {
				t.Fatalf("a prompt job: %q, %v", out, err)
			}
		})
	}
}

func TestScheduleToolOfferedOnlyWithAScheduler(t *testing.T) {
	has := func(tb *Toolbox) bool {
		for _, d := range tb.offered(DefaultPolicy().Defs()) {
			if d.Name == ToolSchedule {
				return true
			}
		}
		return false
	}
	if has(&Toolbox{}) || !has(&Toolbox{Schedule: &recordScheduler{}}) {
		t.Error("the schedule tool is offered without a scheduler, or not with one")
	}
	if d := ApprovalDetail(ToolSchedule, json.RawMessage(`{"at":"18:00","text":"!echo a\necho b"}`)); !strings.Contains(d, "echo b") {
		t.Errorf("approval detail %q hides a line", d)
	}
}
