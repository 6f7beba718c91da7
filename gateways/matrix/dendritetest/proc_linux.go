package dendritetest

import "syscall"

// procAttr puts Dendrite in a process group of its own, so Close kills all of
// it, and has the kernel kill it if the test binary dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
