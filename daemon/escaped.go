package daemon

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/latchd/latch/agent/tools"
	"github.com/latchd/latch/control"
	"github.com/latchd/latch/pairing"
)

// markerEnv tags the daemon's environment, and so every command's: a
// process that carries this daemon's value was started, however
// indirectly, by one of its commands. The daemon finds such processes
// outside its tree — where /stop, timeouts and the cgroup kill cannot
// reach — and lists them in status. Only where the variable survives: at
// and `systemd-run -E` keep it, tmux and ssh drop it unless told to pass
// it, systemd-run without -E drops it. A process can also drop it itself.
const markerEnv = "LATCH_DAEMON"

// markEnvironment sets this daemon's marker; every command inherits it.
func markEnvironment() (string, error) {
	id, err := pairing.NewCode()
	if err != nil {
		return "", err
	}
	v := strconv.Itoa(os.Getpid()) + "-" + id
	return v, os.Setenv(markerEnv, v)
}

// escaped lists the processes that carry marker and are not the daemon's
// descendants. An unreadable environ (another uid, a non-dumpable
// process) is not looked at.
func escaped(marker string) []control.EscapedProcess {
	if marker == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(markerEnv + "=" + marker + "\x00")
	self := os.Getpid()
	var out []control.EscapedProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			continue
		}
		if tools.DescendsFrom(pid, self) {
			continue // /stop and the cgroup reach it
		}
		out = append(out, control.EscapedProcess{PID: pid, Command: cmdline(pid)})
	}
	return out
}

// cmdline is a process's command line for a person, clipped.
func cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return comm(pid)
	}
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if r := []rune(s); len(r) > 100 {
		s = string(r[:99]) + "…"
	}
	return s
}

// escapedLines says what escaped for the chat's /status.
func escapedLines(ps []control.EscapedProcess) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("pid %d: %s", p.PID, p.Command))
	}
	return out
}
