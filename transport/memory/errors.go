package memory

import "syscall"

// The sentinels wrap the errno a TCP connection reports in the same case, so that code
// written for sockets (errors.Is(err, syscall.ECONNRESET)) treats an in-memory connection
// alike.
var (
	// ErrRefused is wrapped by the error of a dial to a number nobody listens on (never
	// did, or closed), or whose listener's backlog of unaccepted connections is full. It
	// matches syscall.ECONNREFUSED.
	ErrRefused error = &sysError{"memory: connection refused", syscall.ECONNREFUSED}

	// ErrReset is wrapped by the error of a write to a connection whose peer has closed:
	// nobody will read the bytes. It matches syscall.ECONNRESET.
	ErrReset error = &sysError{"memory: connection reset by peer", syscall.ECONNRESET}

	// ErrAddrInUse is wrapped by the error of listening on a number already taken, by a
	// listener or by the local end of a dialled connection. It matches
	// syscall.EADDRINUSE.
	ErrAddrInUse error = &sysError{"memory: address in use", syscall.EADDRINUSE}
)

// sysError is a sentinel that also matches the errno its socket counterpart would return.
type sysError struct {
	msg   string
	errno syscall.Errno
}

func (e *sysError) Error() string { return e.msg }
func (e *sysError) Unwrap() error { return e.errno }
