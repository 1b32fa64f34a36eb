//go:build linux

package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var listeningRE = regexp.MustCompile(`listening on (\S+)`)

// Two hosts on one LAN: a TCP echo program on a, dialled over IPv4 and IPv6 from b,
// sees b's lab address.
func TestLANEcho(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	lan := l.LAN("lan0")
	a, b := l.Host("a", lan), l.Host("b", lan)
	if got, want := a.Addr(lan), netip.MustParseAddr("10.1.0.1"); got != want {
		t.Fatalf("a's address %v, want %v", got, want)
	}
	if got, want := b.Link(lan).Addr6, netip.MustParseAddr("fd00:0:0:1::2"); got != want {
		t.Fatalf("b's IPv6 address %v, want %v", got, want)
	}

	echo := startChild(ctx, t, a, "echo", ":7000")
	if _, err := echo.WaitLine(ctx, listeningRE); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []netip.Addr{a.Addr(lan), a.Link(lan).Addr6} {
		c, err := dial(ctx, b, netip.AddrPortFrom(addr, 7000).String())
		if err != nil {
			t.Fatal(err)
		}
		echoOnce(t, c, "hello over "+addr.String())
		c.Close()
		line, err := echo.WaitLine(ctx, regexp.MustCompile(`^connection from `))
		if err != nil {
			t.Fatal(err)
		}
		from := b.Addr(lan)
		if addr.Is6() {
			from = b.Link(lan).Addr6
		}
		if !strings.Contains(line, from.String()) {
			t.Errorf("echo saw %q, want a connection from %v", line, from)
		}
	}
	// The lab's hosts are cut off from the machine: nothing listens on a's loopback.
	if c, err := dial(ctx, b, "127.0.0.1:7000"); err == nil {
		c.Close()
		t.Error("b reached 127.0.0.1:7000: its loopback is not its own")
	}
}

// A router on two LANs forwards between them once the hosts route through it, and the
// far host sees the near host's own address (no translation).
func TestRouterForwards(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	lan1, lan2 := l.LAN("lan1"), l.LAN("lan2")
	a := l.Host("a", lan1)
	b := l.Host("b", lan2)
	r := l.Router("r", lan1, lan2)

	for _, addr := range []netip.Addr{b.Addr(lan2), b.Link(lan2).Addr6} {
		ln := listen(t, b, netip.AddrPortFrom(addr, 0).String())
		from := serveEcho(ln)
		// Without a route, a has no way to b's LAN.
		if c, err := dial(ctx, a, ln.Addr().String()); err == nil {
			c.Close()
			t.Fatalf("a reached %v before routing through r", ln.Addr())
		} else if !errors.Is(err, syscall.ENETUNREACH) {
			t.Fatalf("dial before routing: %v, want ENETUNREACH", err)
		}
		a.DefaultVia(r)
		b.DefaultVia(r)
		c, err := dial(ctx, a, ln.Addr().String())
		if err != nil {
			t.Fatalf("through r: %v", err)
		}
		echoOnce(t, c, "routed")
		c.Close()
		want := a.Addr(lan1)
		if addr.Is6() {
			want = a.Link(lan1).Addr6
		}
		if got := netip.MustParseAddrPort((<-from).String()).Addr(); got != want {
			t.Errorf("b saw %v, want a's own %v", got, want)
		}
		// Routes are per family; the IPv6 round starts unrouted again.
		for _, h := range []*Host{a, b} {
			if _, err := h.Run(ctx, "ip", "-6", "route", "del", "default"); err != nil {
				t.Fatal(err)
			}
			if _, err := h.Run(ctx, "ip", "-4", "route", "del", "default"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if out, err := r.Run(ctx, "cat", "/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Errorf("r's ip_forward: %q, %v", out, err)
	}
	// The machine's own setting is untouched by the router's.
	if out, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil && strings.TrimSpace(string(out)) == "1" && hostForwarding == "0" {
		t.Error("the root namespace's ip_forward changed")
	}
}

// hostForwarding is the root namespace's ip_forward when the tests began.
var hostForwarding = func() string {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	return strings.TrimSpace(string(b))
}()

// Close stops the processes and deletes every namespace, and a second Close does nothing.
func TestCloseLeavesNothing(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	lan := l.LAN("lan0")
	a := l.Host("a", lan)
	l.Router("r", lan, l.Public("inet"))
	old := grace
	grace = 100 * time.Millisecond
	t.Cleanup(func() { grace = old })
	p := startChild(ctx, t, a, "stubborn", "")
	if _, err := p.WaitLine(ctx, regexp.MustCompile("ready")); err != nil {
		t.Fatal(err)
	}
	if got := listNamespaces(l.prefix); len(got) != 4 {
		t.Fatalf("namespaces before Close: %v, want 4", got)
	}
	l.Close()
	l.Close()
	if got := listNamespaces(l.prefix); len(got) != 0 {
		t.Errorf("namespaces after Close: %v", got)
	}
	select {
	case <-p.Done():
	default:
		t.Error("a process outlived Close")
	}
	if alive(p.Pid()) {
		t.Errorf("process %d is alive after Close", p.Pid())
	}
}

// helperEnv makes TestHelperFailing, which otherwise skips, fail in the way it names.
const helperEnv = "TENDRIL_LAB_TEST_HELPER"

// TestHelperFailing is run by TestTeardownAfterFailure in a child test process: it
// builds a lab with a running process, reports their names, and then fails or panics.
func TestHelperFailing(t *testing.T) {
	how := os.Getenv(helperEnv)
	if how == "" {
		t.Skip("run by TestTeardownAfterFailure")
	}
	t.Run("sub", func(t *testing.T) {
		l := New(t)
		lan := l.LAN("lan0")
		a := l.Host("a", lan)
		l.Host("b", lan)
		grace = 100 * time.Millisecond
		p := startChild(testContext(t), t, a, "stubborn", "")
		if _, err := p.WaitLine(testContext(t), regexp.MustCompile("ready")); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("LAB %s %d\n", l.prefix, p.Pid())
		switch how {
		case "fatal":
			t.Fatal("failing on purpose")
		case "panic":
			panic("panicking on purpose")
		}
	})
}

// A test that fails with t.Fatal, or panics, in a subtest still tears its lab down, and
// logs its processes' output.
func TestTeardownAfterFailure(t *testing.T) {
	New(t) // skips or fails as the lab would in the child
	for _, how := range []string{"fatal", "panic"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFailing$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+how)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("child test: %v, want a failure\n%s", err, out)
			}
			m := regexp.MustCompile(`LAB (\S+) (\d+)`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("child test printed no LAB line:\n%s", out)
			}
			prefix := string(m[1])
			pid, _ := strconv.Atoi(string(m[2]))
			if got := listNamespaces(prefix); len(got) != 0 {
				t.Errorf("namespaces left by the failed test: %v\n%s", got, out)
			}
			if alive(pid) {
				t.Errorf("process %d left by the failed test is alive", pid)
			}
			if !strings.Contains(string(out), "output of a:") || !strings.Contains(string(out), "out| ready") {
				t.Errorf("the failed test did not log its process's output:\n%s", out)
			}
		})
	}
}

// The sweep deletes the namespaces of a process that is gone, with the processes still in
// them and its build directory, and leaves those of live processes alone.
func TestSweepRemovesDeadLeftovers(t *testing.T) {
	New(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := dead.Process.Pid
	if alive(deadPID) {
		t.Skipf("PID %d was reused at once", deadPID)
	}
	// Another live process: a name of its own must survive the sweep as this one's does.
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = other.Process.Kill()
		_ = other.Wait()
	})
	stale := fmt.Sprintf("tl%d-1-a", deadPID)
	live := []string{fmt.Sprintf("tl%d-0-keep", os.Getpid()), fmt.Sprintf("tl%d-0-keep", other.Process.Pid)}
	for _, ns := range append([]string{stale}, live...) {
		if err := addNetns(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ip("netns", "delete", ns) })
	}
	// A process left inside the stale namespace, as by a test binary killed mid-test.
	orphan := exec.Command("ip", "netns", "exec", stale, "sleep", "300")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	orphanDone := make(chan error, 1)
	go func() { orphanDone <- orphan.Wait() }()
	t.Cleanup(func() {
		_ = orphan.Process.Kill()
		<-orphanDone
	})
	staleBin, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", binPrefix, deadPID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(staleBin) })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if out, _ := exec.Command("ip", "netns", "pids", stale).Output(); len(strings.TrimSpace(string(out))) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphan never entered its namespace")
		}
	}

	New(t)
	if _, err := os.Stat(filepath.Join(netnsDir, stale)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s survived the sweep: %v", stale, err)
	}
	if _, err := os.Stat(staleBin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s survived the sweep: %v", staleBin, err)
	}
	select {
	case err := <-orphanDone:
		orphanDone <- err
	case <-time.After(10 * time.Second):
		t.Error("the process in the stale namespace survived the sweep")
	}
	for _, ns := range live {
		if _, err := os.Stat(filepath.Join(netnsDir, ns)); err != nil {
			t.Errorf("the sweep removed %s, whose process lives: %v", ns, err)
		}
	}
}

// Hosts, segments and processes belong to one lab: two labs in one test process share
// no name.
func TestTwoLabs(t *testing.T) {
	l1, l2 := New(t), New(t)
	l1.Host("a", l1.LAN("lan0"))
	l2.Host("a", l2.LAN("lan0"))
	if l1.prefix == l2.prefix {
		t.Fatalf("two labs share the prefix %s", l1.prefix)
	}
	if n := len(listNamespaces(l1.prefix)) + len(listNamespaces(l2.prefix)); n != 4 {
		t.Errorf("%d namespaces, want 4", n)
	}
}
