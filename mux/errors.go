package mux

import (
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/yamux"
)

var (
	// ErrSessionClosed means the session is closed (locally, by the peer, or
	// after a connection error). Wrapped errors may carry the cause.
	ErrSessionClosed = errors.New("mux: session closed")

	// ErrTooManyStreams means opening a stream would exceed Config.MaxStreams.
	// The session stays usable.
	ErrTooManyStreams = errors.New("mux: too many streams")

	// ErrStreamReset means the stream was reset, by Reset on either side, or by
	// the peer refusing it (for example because of its stream limit).
	ErrStreamReset = errors.New("mux: stream reset")

	// ErrStreamClosed means a write on a stream whose write side is closed, or a
	// read on a stream closed with Close.
	ErrStreamClosed = errors.New("mux: stream closed")

	// ErrRemoteGoAway means the peer sent a go-away and accepts no new streams.
	ErrRemoteGoAway = errors.New("mux: peer is not accepting streams")

	// ErrStreamsExhausted means the session has used all stream IDs.
	ErrStreamsExhausted = errors.New("mux: stream IDs exhausted")

	// ErrProtocol means the peer violated the yamux protocol; the session is
	// closed.
	ErrProtocol = errors.New("mux: protocol error")

	// ErrInvalidConfig is returned by Config.Validate, Client and Server for an
	// invalid configuration.
	ErrInvalidConfig = errors.New("mux: invalid config")

	// ErrTimeout means a deadline expired: a stream's read or write deadline,
	// a ping without answer, or a write to the connection that stalled longer
	// than Config.ConnectionWriteTimeout. It reports Timeout() == true and
	// matches os.ErrDeadlineExceeded, as net.Conn deadlines do.
	ErrTimeout error = &timeoutError{"mux: i/o timeout"}

	// ErrKeepAliveTimeout means the keepalive ping went unanswered and the
	// session was closed. It reports Timeout() == true.
	ErrKeepAliveTimeout error = &timeoutError{"mux: keepalive timeout"}
)

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
func (e *timeoutError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded
}

// mapErr translates yamux's errors into this package's.
func mapErr(err error) error {
	switch err {
	case nil:
		return nil
	case yamux.ErrSessionShutdown:
		return ErrSessionClosed
	case yamux.ErrTimeout:
		return ErrTimeout
	case yamux.ErrConnectionWriteTimeout:
		return fmt.Errorf("%w: connection write stalled", ErrTimeout)
	case yamux.ErrKeepAliveTimeout:
		return ErrKeepAliveTimeout
	case yamux.ErrConnectionReset:
		return ErrStreamReset
	case yamux.ErrStreamClosed:
		return ErrStreamClosed
	case yamux.ErrRemoteGoAway:
		return ErrRemoteGoAway
	case yamux.ErrStreamsExhausted:
		return ErrStreamsExhausted
	case yamux.ErrInvalidVersion, yamux.ErrInvalidMsgType, yamux.ErrDuplicateStream,
		yamux.ErrRecvWindowExceeded, yamux.ErrUnexpectedFlag:
		return fmt.Errorf("%w: %s", ErrProtocol, err.Error())
	}
	return err
}

// closedError is ErrSessionClosed wrapping why the session closed. Its message
// is built only when asked for: every session that ends on a connection error
// makes one, and most are never printed.
type closedError struct{ cause error }

func (e *closedError) Error() string   { return ErrSessionClosed.Error() + ": " + e.cause.Error() }
func (e *closedError) Unwrap() []error { return []error{ErrSessionClosed, e.cause} }
