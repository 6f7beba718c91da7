package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// describePeer says, for an approval request, where a mint through the
// control socket came from: the caller's program, its parent's, and its
// cgroup (a login session's scope, a tmux or systemd-run unit...). All of
// it is what a process of the owner's uid chose to be, so it is a hint
// for the owner, never a check.
func describePeer(pid int) string {
	if pid <= 0 {
		return "from the control socket, caller unknown"
	}
	out := fmt.Sprintf("from the control socket by pid %d (%s)", pid, comm(pid))
	// A few ancestors: the shell and what runs it (a terminal, tmux,
	// sshd, a service manager).
	for i, p := 0, parentOf(pid); i < 3 && p > 1; i, p = i+1, parentOf(p) {
		out += fmt.Sprintf(" ← %d (%s)", p, comm(p))
	}
	if cg := cgroupOf(pid); cg != "" {
		out += ", cgroup " + cg
	}
	return out
}

func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "gone"
	}
	return strings.TrimSpace(string(b))
}

func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces and parentheses: fields start
	// after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// cgroupOf is the process's cgroup v2 path, "" when unknown.
func cgroupOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}
