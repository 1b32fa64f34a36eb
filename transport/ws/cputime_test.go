//go:build unix

package ws

import (
	"syscall"
	"time"
)

// processCPUTime returns the user and system CPU time of the process so far: both ends
// of a benchmark's connection, so that cpu-ns/op says what a transfer costs whatever
// else the machine runs.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
