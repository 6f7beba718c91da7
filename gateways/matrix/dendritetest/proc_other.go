//go:build !linux

package dendritetest

import "syscall"

// procAttr puts Dendrite in a process group of its own, so Close kills all of
// it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
