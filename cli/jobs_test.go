package cli

import (
	"strings"
	"testing"
)

func TestJobsWithoutDaemon(t *testing.T) {
	testHome(t)
	cli(t, "init")
	if out, errOut, code := cli(t, "jobs", "list"); code != 0 || out != "No scheduled jobs.\n" {
		t.Errorf("jobs list: %d %q %q", code, out, errOut)
	}
	if _, errOut, code := cli(t, "jobs", "add", "telegram", "1h", "!uptime"); code == 0 || !strings.Contains(errOut, "not running") {
		t.Errorf("jobs add with no daemon: %d %q", code, errOut)
	}
	if _, errOut, code := cli(t, "jobs", "add", "telegram", "--at", "18:00", "1h", "!uptime"); code == 0 || !strings.Contains(errOut, "either a schedule or --at") {
		t.Errorf("jobs add with both: %d %q", code, errOut)
	}
	if _, errOut, code := cli(t, "jobs", "rm", "x"); code == 0 || !strings.Contains(errOut, "not a job id") {
		t.Errorf("jobs rm x: %d %q", code, errOut)
	}
}
