//go:build linux

package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Lab is one test's set of namespaces, segments and processes. Its methods that build
// the topology fail the test on error and must be called from the test's goroutine.
type Lab struct {
	t      testing.TB
	prefix string // of every namespace name: "tl<pid>-<n>-"

	mu         sync.Mutex // guards the fields below
	namespaces []string   // created, in order; deleted in reverse
	names      map[string]bool
	lans, pubs int // segments of each kind handed out
	routables  int
	wires      int // delay lines (Link.Delay), for their namespaces' names
	procs      []*Process
	closed     bool
}

// New returns an empty lab whose cleanup, registered with t, tears it down. It skips the
// test if the machine cannot run one (not root, no ip or tc, no network namespaces), or
// fails it instead when TENDRIL_LAB=require. Before anything else it deletes what
// earlier test processes that died without their cleanup left behind.
func New(t testing.TB) *Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "network namespaces need root")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "no %s command (iproute2)", tool)
		}
	}
	sweep(t)
	l := &Lab{t: t, prefix: newLabPrefix(), names: map[string]bool{}}
	// A machine may refuse namespaces to root (a container without CAP_SYS_ADMIN): that
	// is an unavailable lab, not a failure of the code under test.
	probe := l.prefix + "probe"
	if err := addNetns(probe); err != nil {
		_ = ip("netns", "delete", probe)
		unavailable(t, "cannot create a network namespace: %v", err)
	}
	if err := deleteNetns(probe); err != nil {
		t.Fatalf("lab: %v", err)
	}
	t.Cleanup(l.Close)
	return l
}

// unavailable skips the test, or fails it when the environment requires the lab.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("TENDRIL_LAB") == "require" {
		t.Fatalf("lab required (TENDRIL_LAB=require) but "+format, args...)
	}
	t.Skipf("lab: "+format, args...)
}

// sweep deletes the namespaces, and the processes in them, and the build directories of
// test processes that are gone. Names of live processes, this one included, are left
// alone, and so is every name without the lab's prefix.
func sweep(t testing.TB) {
	t.Helper()
	entries, _ := os.ReadDir(netnsDir) // absent until the first ip netns add
	for _, e := range entries {
		if pid, ok := ownerPID(e.Name(), nsPrefix); ok && !alive(pid) {
			if err := deleteNetns(e.Name()); err != nil {
				t.Logf("lab: leftover of process %d: %v", pid, err)
			}
		}
	}
	dirs, _ := os.ReadDir(os.TempDir())
	for _, e := range dirs {
		if pid, ok := ownerPID(e.Name(), binPrefix); ok && e.IsDir() && !alive(pid) {
			_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// newNamespace creates the namespace for a host or segment called name.
func (l *Lab) newNamespace(name string) string {
	l.t.Helper()
	if !validName.MatchString(name) {
		l.t.Fatalf("lab: name %q: want 1-20 of a-z, 0-9 and -, starting with a letter or digit", name)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.t.Fatalf("lab: %s: the lab is closed", name)
	}
	if l.names[name] {
		l.mu.Unlock()
		l.t.Fatalf("lab: %s: a host or segment of that name exists", name)
	}
	l.names[name] = true
	l.mu.Unlock()
	ns := l.prefix + name
	// Recorded before it is made: a half-made namespace is deleted too.
	l.mu.Lock()
	l.namespaces = append(l.namespaces, ns)
	l.mu.Unlock()
	if err := addNetns(ns); err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	return ns
}

// Close stops the lab's processes (SIGTERM, then SIGKILL after a grace period), logs
// their output if the test has failed or is panicking, and deletes every namespace of the
// lab with its interfaces and bridges. The cleanup that New registers calls it; calling
// it earlier is allowed, and a second call does nothing.
func (l *Lab) Close() {
	l.t.Helper()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	procs, namespaces := l.procs, l.namespaces
	l.mu.Unlock()

	stopAll(procs)
	if l.t.Failed() || panicking() {
		for _, p := range procs {
			l.t.Logf("lab: output of %s:\n%s", p, p.Output())
		}
	}
	var failed []string
	for i := len(namespaces) - 1; i >= 0; i-- {
		if err := deleteNetns(namespaces[i]); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		l.t.Errorf("lab: teardown: %s", strings.Join(failed, "; "))
	}
}

// listNamespaces returns the names under netnsDir that start with prefix.
func listNamespaces(prefix string) []string {
	entries, _ := os.ReadDir(netnsDir)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// panicking reports whether the calling goroutine is unwinding a panic. A cleanup that
// runs then sees t.Failed() false: the testing package marks a panicking test failed
// only after its cleanups have run.
func panicking() bool {
	pc := make([]uintptr, 128)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if f.Function == "runtime.gopanic" {
			return true
		}
		if !more {
			return false
		}
	}
}
