package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// memCgroup is a memory cgroup of the bench's own, for the daemon: what a
// service's cgroup (memory.current) is charged for, page cache included.
type memCgroup struct {
	dir   string
	usage string // memory.current (v2) or memory.usage_in_bytes (v1)
}

// newMemCgroup makes a child of bench's own memory cgroup, v2 or v1.
func newMemCgroup() (*memCgroup, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("latch-bench-%d", os.Getpid())
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var cg memCgroup
		switch {
		case f[1] == "" && f[0] == "0":
			cg = memCgroup{dir: filepath.Join("/sys/fs/cgroup", f[2], name), usage: "memory.current"}
		case strings.Contains(","+f[1]+",", ",memory,"):
			cg = memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", f[2], name), usage: "memory.usage_in_bytes"}
		default:
			continue
		}
		if err := os.Mkdir(cg.dir, 0o755); err != nil {
			continue
		}
		if _, err := cg.bytes(); err != nil {
			_ = os.Remove(cg.dir)
			continue
		}
		return &cg, nil
	}
	return nil, errors.New("no memory cgroup bench may create a child in")
}

// bytes is what the cgroup is charged for now.
func (c *memCgroup) bytes() (int64, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, c.usage))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// remove deletes the cgroup and any the daemon made in it; it must be empty
// of processes.
func (c *memCgroup) remove() {
	subs, _ := filepath.Glob(filepath.Join(c.dir, "*", "cgroup.procs"))
	for _, s := range subs {
		_ = os.Remove(filepath.Dir(s))
	}
	_ = os.Remove(c.dir)
}

// evict drops path's pages from the page cache, as after a reboot, so the
// daemon's own faults bring them in and its cgroup is charged for them
// (the page cache is charged to whoever first reads a page, here the go
// build that wrote the binary).
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// A binary just built or copied may still be dirty in the cache, and
	// the kernel drops only clean pages.
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// dropCaches empties the page cache of the whole machine (root only), for
// the first reply after a long idle when the binary's pages were evicted.
func dropCaches() error {
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("1\n"), 0)
}
