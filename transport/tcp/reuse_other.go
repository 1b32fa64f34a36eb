//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package tcp

import "syscall"

const reusePortSupported = false

func reusePort(_, _ string, _ syscall.RawConn) error { return nil }
