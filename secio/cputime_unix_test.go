//go:build unix

package secio

import (
	"syscall"
	"time"
)

// processCPUTime returns the user+system CPU time of the process so far.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
