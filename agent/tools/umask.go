package tools

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// umask returns the process's file mode creation mask. A file created with
// an explicit fchmod, as a write's is, would otherwise ignore it. It is read
// from /proc/self/status: syscall.Umask can only read the mask by setting
// it, which would race with every file created meanwhile. When it cannot be
// read it is taken as 077, so that a new file is the owner's alone.
func umask() fs.FileMode {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0o077
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return 0o077
			}
			return fs.FileMode(m) & fs.ModePerm
		}
	}
	return 0o077
}
