//go:build !linux

package redistest

import "syscall"

// sysProcAttr: only Linux can tie a child's life to its parent's; elsewhere
// the test's cleanups are the only guard against leftover servers.
func sysProcAttr() *syscall.SysProcAttr { return nil }
