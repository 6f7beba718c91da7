package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/latchd/latch/agent/tools"
)

// Harden is the first thing `latch run` does. It makes the process
// non-dumpable, so that another process of the owner's uid can neither
// ptrace it nor read its /proc files (environ, mem, fds: they become
// root's), and it takes latch's secret variables (tools.IsLatchSecret) out
// of the process's environment: out of Go's copy, so no child inherits
// them, and out of the block the kernel shows as /proc/<pid>/environ
// (wipeEnvBlock), which root can read whatever the dumpable flag says. It returns the lookup config loading must use from then on: the
// secrets it took, then the environment.
func Harden() (getenv func(string) string, err error) {
	secrets := map[string]string{}
	for _, kv := range os.Environ() {
		name, value, ok := strings.Cut(kv, "=")
		if ok && tools.IsLatchSecret(name) {
			secrets[name] = value
		}
	}
	for name := range secrets {
		if err := os.Unsetenv(name); err != nil {
			return nil, fmt.Errorf("clear %s from the environment: %w", name, err)
		}
	}
	if err := wipeEnvBlock(); err != nil {
		return nil, err
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return func(key string) string {
		if v, ok := secrets[key]; ok {
			return v
		}
		return os.Getenv(key)
	}, nil
}

// wipeEnvBlock overwrites latch's secret variables, name and value, with
// NULs in the block the kernel set up at exec and shows as
// /proc/<pid>/environ. Go keeps copies of its own, so the block is
// written through /proc/self/mem, which a process may always do to itself.
func wipeEnvBlock() error {
	start, end := envBlock()
	if start == 0 {
		return errors.New("clear the environment: cannot find it in /proc/self/stat")
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("clear the environment: %w", err)
	}
	defer mem.Close()
	block := make([]byte, end-start)
	defer clear(block)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return fmt.Errorf("clear the environment: %w", err)
	}
	off := 0
	for _, kv := range bytes.Split(block, []byte{0}) {
		name, _, _ := bytes.Cut(kv, []byte("="))
		if len(name) > 0 && tools.IsLatchSecret(string(name)) {
			if _, err := mem.WriteAt(make([]byte, len(kv)), int64(start)+int64(off)); err != nil {
				return fmt.Errorf("clear the environment: %w", err)
			}
		}
		off += len(kv) + 1
	}
	return nil
}

// envBlock is where the kernel put the process's environment strings
// (fields env_start and env_end of /proc/self/stat), 0, 0 if unknown.
func envBlock() (start, end uint64) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0
	}
	// Fields after the command name start at field 3 (state); env_start
	// and env_end are fields 50 and 51.
	f := strings.Fields(s[i+1:])
	if len(f) < 49 {
		return 0, 0
	}
	a, err1 := strconv.ParseUint(f[47], 10, 64)
	z, err2 := strconv.ParseUint(f[48], 10, 64)
	if err1 != nil || err2 != nil || a >= z {
		return 0, 0
	}
	return a, z
}
