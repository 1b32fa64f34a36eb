//go:build linux

package lab

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
)

// Every namespace a lab creates is named "tl<pid>-<lab>-<name>", and the directory that
// holds the programs Build made is "tendril-lab-<pid>-*" in os.TempDir: the PID is what
// tells a later run whether the owner is gone.
const (
	nsPrefix  = "tl"
	binPrefix = "tendril-lab-"
)

// labSeq numbers the labs of this process, so that two labs (parallel tests, subtests)
// never share a name.
var labSeq atomic.Int64

// newLabPrefix returns the prefix of every namespace name of a new lab.
func newLabPrefix() string {
	return fmt.Sprintf("%s%d-%d-", nsPrefix, os.Getpid(), labSeq.Add(1))
}

// ownerPID returns the PID in name if name is "<prefix><pid>-<anything>", and false for
// every other name: a name the lab did not make is never touched.
func ownerPID(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok || digits == "" || len(digits) > 10 || digits[0] == '0' {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// validName is what a host or segment may be called: short, and safe both as part of a
// file name under /run/netns and in a test's log.
var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,19}$`)
