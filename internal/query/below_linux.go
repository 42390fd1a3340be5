package query

import "syscall"

// lowestPriority gives the calling OS thread the lowest CPU priority
// (nice 19): Linux sets it per thread.
func lowestPriority() error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
}
