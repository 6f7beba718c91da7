package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// groupGone reports whether no live process is left in process group pgid.
// Zombies count as gone: they run nothing, and on some machines PID 1 never
// reaps the orphans a killed group leaves behind.
func groupGone(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return true
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// Fields after the command name: state ppid pgrp ...
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 3 {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid && f[0] != "Z" {
			return false
		}
	}
	return true
}
