package redistest

import "syscall"

// sysProcAttr makes the kernel kill a server should the test binary die
// before its cleanups run (a panic, a -timeout): no leftover processes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
