//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package secio

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

const canAskQueue = true

// fionread is FIONREAD, _IOR('f', 127, int) in <sys/filio.h>, the same on
// macOS and every BSD (golang.org/x/sys/unix does not name it there).
const fionread = 0x4004667f

// queuedBytes returns the bytes received on socket fd and not yet read
// (ioctl FIONREAD: those in the socket's receive buffer).
func queuedBytes(fd uintptr) (int, error) {
	v, err := unix.IoctlGetInt(int(fd), fionread)
	// The kernel writes a C int, the first four bytes of v whatever v's size
	// and byte order (read as an int, they are shifted on a 64-bit
	// big-endian system: OpenBSD on mips64 and ppc64).
	n := binary.NativeEndian.Uint32(unsafe.Slice((*byte)(unsafe.Pointer(&v)), 4))
	return int(int32(n)), err
}
