package secio

import "golang.org/x/sys/unix"

const canAskQueue = true

// queuedBytes returns the bytes received on socket fd and not yet read:
// ioctl FIONREAD, which Linux also calls SIOCINQ (for TCP, the bytes received
// in order; out-of-order segments are not counted).
func queuedBytes(fd uintptr) (int, error) {
	n, err := unix.IoctlGetUint32(int(fd), unix.SIOCINQ)
	return int(int32(n)), err
}
