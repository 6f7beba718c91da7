//go:build !linux

package mcpsdk

// harden has nothing to do where there is no PR_SET_DUMPABLE.
func harden() error { return nil }
