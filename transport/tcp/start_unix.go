//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package tcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"golang.org/x/sys/unix"

	"github.com/tendril-p2p/tendril/transport"
)

// Attempt is a connection attempt under way: its first SYN has left (connect returned),
// and Wait completes it. A hole punch sends its go-ahead to the other end only once its
// own attempts are under way, so that the other end's attempts meet a connecting socket,
// never the listener.
type Attempt struct {
	fd        int
	keepAlive time.Duration
}

// StartDialFrom starts a connection to addr from the local address from, with
// SO_REUSEPORT (see DialFrom), and returns once the connection attempt is under way.
// The caller must Wait for it or Close it.
func (t *Transport) StartDialFrom(from netip.AddrPort, addr ma.Multiaddr) (*Attempt, error) {
	_, hostport, err := t.split(addr)
	if err != nil {
		return nil, err
	}
	to, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not an IP address", transport.ErrUnsupported, addr)
	}
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	family, laddr, raddr := unix.AF_INET, sockaddr(from), sockaddr(to)
	if to.Addr().Is6() {
		family = unix.AF_INET6
	}
	if (from.Addr().Is4() || from.Addr().Is4In6()) != to.Addr().Is4() {
		return nil, fmt.Errorf("tcp: dial %s from %s: address families differ", to, from)
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	fail := func(call string, err error) (*Attempt, error) {
		unix.Close(fd)
		return nil, os.NewSyscallError(call, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fail("setsockopt", err)
	}
	if err := unix.Bind(fd, laddr); err != nil {
		return fail("bind", err)
	}
	if err := unix.Connect(fd, raddr); err != nil && err != unix.EINPROGRESS {
		return fail("connect", err)
	}
	return &Attempt{fd: fd, keepAlive: t.keepAlive}, nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	a := ap.Addr().Unmap()
	if a.Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
}

// Wait waits until the connection is established, refused or ctx ends, and returns it
// as a net.Conn. The Attempt is spent either way.
func (a *Attempt) Wait(ctx context.Context) (net.Conn, error) {
	for {
		if err := ctx.Err(); err != nil {
			a.Close()
			return nil, err
		}
		// Poll in short slices so that ctx's end is seen; the thread this blocks is
		// one of a bounded number (the punch's attempts).
		fds := []unix.PollFd{{Fd: int32(a.fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, 20)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			a.Close()
			return nil, os.NewSyscallError("poll", err)
		}
		if n == 0 {
			continue
		}
		soerr, err := unix.GetsockoptInt(a.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			a.Close()
			return nil, os.NewSyscallError("getsockopt", err)
		}
		if soerr != 0 {
			a.Close()
			return nil, os.NewSyscallError("connect", unix.Errno(soerr))
		}
		f := os.NewFile(uintptr(a.fd), "tcp-punch")
		a.fd = -1
		c, err := net.FileConn(f) // a duplicate of the descriptor, on the network poller
		f.Close()
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok && a.keepAlive != 0 {
			_ = tc.SetKeepAlive(a.keepAlive > 0)
			if a.keepAlive > 0 {
				_ = tc.SetKeepAlivePeriod(a.keepAlive)
			}
		}
		return c, nil
	}
}

// Close abandons an attempt that Wait has not completed.
func (a *Attempt) Close() error {
	if a.fd < 0 {
		return nil
	}
	err := unix.Close(a.fd)
	a.fd = -1
	return err
}
