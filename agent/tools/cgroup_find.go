package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupState is what OpenCgroups needs to know about the machine; tests
// give their own.
type cgroupState struct {
	procCgroup []byte // /proc/self/cgroup
	mountinfo  []byte // /proc/self/mountinfo
	systemd    bool   // systemd manages the machine (/run/systemd/system)
	invocation bool   // systemd started this process ($INVOCATION_ID)
	// delegated reports whether systemd delegated the cgroup at dir to
	// this process's unit.
	delegated func(dir string) bool
}

// ErrNoCgroups means commands cannot be put in cgroups of their own here;
// the error wrapping it says why.
var ErrNoCgroups = errors.New("no cgroup per command")

// OpenCgroups finds the cgroup latch runs in and makes the daemon's own
// below it. That needs the unified hierarchy (cgroup v2) with cgroup.kill
// (Linux 5.14), write access, a kernel and seccomp filter that let clone3
// start a process in a cgroup, and, where systemd manages the machine, a
// cgroup systemd delegated (the service's Delegate=yes): systemd owns
// every other cgroup, and a tree made below one of those would be in its
// way. Groups of an earlier daemon that died without removing them are
// killed and removed. The error wraps ErrNoCgroups.
func OpenCgroups() (*Cgroups, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCgroups, err)
	}
	_, statErr := os.Stat("/run/systemd/system")
	dir, err := ownCgroup(cgroupState{
		procCgroup: self,
		mountinfo:  mounts,
		systemd:    statErr == nil,
		invocation: os.Getenv("INVOCATION_ID") != "",
		delegated:  delegated,
	})
	if err != nil {
		return nil, err
	}
	return openCgroupsIn(dir)
}

// ownCgroup returns the directory of the cgroup this process is in, when
// latch may make its tree below it.
func ownCgroup(s cgroupState) (string, error) {
	var rel string
	found := false
	for line := range strings.SplitSeq(string(s.procCgroup), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			rel, found = path, true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("%w: not in a cgroup v2 hierarchy", ErrNoCgroups)
	}
	if strings.Contains(rel, "/..") {
		return "", fmt.Errorf("%w: cgroup %q is outside the mounted tree", ErrNoCgroups, rel)
	}
	dir, mounted, ok := cgroup2Dir(s.mountinfo, rel)
	switch {
	case !mounted:
		return "", fmt.Errorf("%w: cgroup v2 is not mounted", ErrNoCgroups)
	case !ok:
		return "", fmt.Errorf("%w: cgroup %q is outside the mounted tree", ErrNoCgroups, rel)
	}
	// Only systemd's own service may make cgroups below a cgroup systemd
	// manages, and only when its unit delegates it (Delegate=yes).
	if s.systemd && !(s.invocation && s.delegated(dir)) {
		return "", fmt.Errorf("%w: systemd did not delegate cgroup %s to latch (run latch as its service, whose unit has Delegate=yes)", ErrNoCgroups, rel)
	}
	return dir, nil
}

// cgroup2Dir finds where the cgroup rel is in a cgroup2 mount of
// mountinfo: the first mount whose root holds it. mounted is false when
// there is no cgroup2 mount at all. Inside a cgroup namespace the host's
// mount may come first, rooted outside the namespace.
func cgroup2Dir(mountinfo []byte, rel string) (dir string, mounted, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		pre, post, found := strings.Cut(sc.Text(), " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		mounted = true
		root := strings.TrimSuffix(unescapeMount(f[3]), "/")
		sub, in := strings.CutPrefix(rel, root)
		if in && (sub == "" || sub[0] == '/') {
			return filepath.Join(unescapeMount(f[4]), sub), true, true
		}
	}
	return "", mounted, false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// delegated reports whether systemd delegated the cgroup at dir, its
// unit's, to the unit. The system manager marks a delegated cgroup
// (systemd 251 and later); the user manager marks none, so its answer is
// asked for: a user unit's cgroups are the user's to write whether or not
// it delegates them.
func delegated(dir string) bool {
	buf := make([]byte, 8)
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, name, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	unit := filepath.Base(dir)
	if !strings.HasSuffix(unit, ".service") {
		return false
	}
	args := []string{"show", "-p", "Delegate", "--value", unit}
	if strings.Contains(dir, "/user@") {
		args = append([]string{"--user"}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "systemctl", args...).Output()
	return err == nil && strings.TrimSpace(string(out)) == "yes"
}
