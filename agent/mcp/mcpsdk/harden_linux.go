package mcpsdk

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// harden makes the sidecar non-dumpable: no other process of the owner's
// uid can ptrace it or read its memory and descriptors in /proc.
func harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the process non-dumpable: %w", err)
	}
	return nil
}
