//go:build windows

package mdns

import "syscall"

// reusePort sets SO_REUSEADDR: Windows has no SO_REUSEPORT, and there SO_REUSEADDR alone
// lets several sockets share port 5353.
func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(syscall.Handle(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
