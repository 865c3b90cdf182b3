//go:build unix

package events

import "syscall"

// DescriptorLimit is the process's soft limit on open descriptors
// (RLIMIT_NOFILE); 0 when it cannot be read.
func DescriptorLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur) // an int64 on some BSDs
}
