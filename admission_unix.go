//go:build unix

package tendril

import (
	"encoding/binary"
	"net"
	"syscall"
)

// firstMessageIn reports whether c has already received the whole of a first handshake
// message (a 4-byte big-endian length and that many bytes), without consuming anything:
// it peeks at most len(buf) bytes into buf. False if it has not, or cannot tell.
func firstMessageIn(c net.Conn, buf []byte) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, perr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK)
		return true // one look: the socket is non-blocking, and nothing is waited for
	})
	if err != nil || perr != nil || n < 4 {
		return false
	}
	return uint64(n) >= 4+uint64(binary.BigEndian.Uint32(buf))
}
