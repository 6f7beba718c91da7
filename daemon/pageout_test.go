package daemon

import (
	"strings"
	"testing"

	"github.com/latchd/latch/internal/pageout"
)

// A daemon that gave its start-up pages back pairs and runs a command as
// before: the pages it needs fault back in.
func TestE2EAnswersAfterPageOut(t *testing.T) {
	t.Setenv(pageout.EnvNoPageOut, "")
	e := newEnv(t)
	e.pageOut = true
	e.start()
	e.pair()
	e.say(owner, "!echo after pageout")
	e.waitReply(owner.ID, "after pageout")
	if out := e.logs.String(); !strings.Contains(out, "start-up pages given back") {
		t.Errorf("no record of the page-out in the log:\n%s", out)
	}
}
