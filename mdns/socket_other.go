//go:build !unix && !windows

package mdns

import "syscall"

// reusePort does nothing where sockets have no such options (js, wasip1, plan9).
func reusePort(network, address string, c syscall.RawConn) error { return nil }
