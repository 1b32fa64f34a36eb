//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package tcp

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// reusePortSupported: the kernel lets a listener and outgoing connections share a port
// when every socket on it sets SO_REUSEPORT (and only sockets of the same user may join).
const reusePortSupported = true

// reusePort sets SO_REUSEADDR and SO_REUSEPORT on a socket before its bind.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
