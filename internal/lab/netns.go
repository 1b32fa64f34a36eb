//go:build linux

package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// netnsDir is where ip netns keeps the named namespaces (a bind mount each).
const netnsDir = "/run/netns"

// commandTimeout bounds each ip or tc command: they return in milliseconds, and one that
// hangs must fail the test rather than stall it.
const commandTimeout = 30 * time.Second

// ip runs iproute2's ip with args in the caller's namespace (ip -n NS selects another).
func ip(args ...string) error { return tool("ip", args...) }

// tool runs a configuration command and returns its output in the error if it fails.
func tool(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// addNetns creates the named namespace with loopback up and IPv6 duplicate address
// detection off for the interfaces to come: with it, each new interface's link-local
// address stays unusable for a second or two, and the first packets that a router
// forwards over IPv6 wait that long for neighbour discovery.
func addNetns(name string) error {
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	var err error
	if derr := inNetns(name, func() {
		err = os.WriteFile("/proc/sys/net/ipv6/conf/default/accept_dad", []byte("0"), 0)
	}); derr != nil {
		return derr
	}
	if err != nil {
		return fmt.Errorf("lab: %s: %w", name, err)
	}
	return ip("-n", name, "link", "set", "lo", "up")
}

// deleteNetns kills every process inside the named namespace and deletes its name. The
// kernel frees the namespace, and the interfaces in it, once nothing holds it any more.
func deleteNetns(name string) error {
	killNetnsPids(name)
	return ip("netns", "delete", name)
}

// killNetnsPids sends SIGKILL to every process in the named namespace: those a test left
// behind, or those of a test process that died without its cleanup.
func killNetnsPids(name string) {
	out, err := exec.Command("ip", "netns", "pids", name).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// alive reports whether a process with this PID exists.
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// inNetns runs f on a locked OS thread that has entered the named namespace, and returns
// when f does. Sockets f opens belong to the namespace, and so do processes it forks (a
// child starts in its parent thread's namespace); goroutines f starts run elsewhere. The
// thread goes back to the caller's namespace before it is unlocked; if it cannot, it stays
// locked and ends with its goroutine, so that no other goroutine ever runs in the wrong
// namespace. A panic in f is re-raised in the caller.
func inNetns(name string, f func()) error {
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("lab: open own namespace: %w", err)}
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(filepath.Join(netnsDir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("lab: open namespace %s: %w", name, err)}
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("lab: enter namespace %s: %w", name, err)}
			return
		}
		var r result
		func() {
			defer func() { r.panic = recover() }()
			f()
		}()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- r
	}()
	r := <-done
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}
