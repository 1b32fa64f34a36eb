package mux

import (
	"errors"
	"os"
)

var (
	// ErrSessionClosed means the session is closed (locally, by the peer, or after a
	// connection error). Wrapped errors may carry the cause.
	ErrSessionClosed = errors.New("mux: session closed")

	// ErrTooManyStreams means opening a stream would exceed Config.MaxStreams. The
	// session stays usable.
	ErrTooManyStreams = errors.New("mux: too many streams")

	// ErrMemoryBudget means data that arrived on a stream did not fit the session's or the
	// shared memory budget (see Budget): the stream is reset, and its reads and writes fail
	// with an error matching both ErrStreamReset and ErrMemoryBudget. The session stays
	// usable.
	ErrMemoryBudget = errors.New("mux: memory budget exhausted")

	// ErrStreamReset means the stream was reset, by Reset on either side, or by the peer
	// refusing it (its limits or memory budget).
	ErrStreamReset = errors.New("mux: stream reset")

	// ErrStreamClosed means a write on a stream whose write side is closed, or a read on a
	// stream closed with Close.
	ErrStreamClosed = errors.New("mux: stream closed")

	// ErrRemoteGoAway means the peer sent a go-away and accepts no new streams.
	ErrRemoteGoAway = errors.New("mux: peer is not accepting streams")

	// ErrStreamsExhausted means the session has used all stream IDs.
	ErrStreamsExhausted = errors.New("mux: stream IDs exhausted")

	// ErrProtocol means the peer violated the yamux protocol; the session is closed.
	ErrProtocol = errors.New("mux: protocol error")

	// ErrPeerMisbehaving means the peer sent more useless frames than
	// Config.UselessFrames allows (streams opened and reset at once, streams opened beyond
	// the limits, frames for streams that do not exist, empty frames); the session is
	// closed.
	ErrPeerMisbehaving = errors.New("mux: peer misbehaving")

	// ErrInvalidConfig is returned by Config.Validate, Client and Server for an invalid
	// configuration.
	ErrInvalidConfig = errors.New("mux: invalid config")

	// ErrTimeout means a deadline expired: a stream's read or write deadline, a ping
	// without answer, or a write to the connection that stalled longer than
	// Config.ConnectionWriteTimeout. It reports Timeout() == true and matches
	// os.ErrDeadlineExceeded, as net.Conn deadlines do.
	ErrTimeout error = &timeoutError{"mux: i/o timeout"}

	// ErrKeepAliveTimeout means the keepalive ping went unanswered and the session was
	// closed. It reports Timeout() == true.
	ErrKeepAliveTimeout error = &timeoutError{"mux: keepalive timeout"}
)

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
func (e *timeoutError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded
}

// protocolError is ErrProtocol with what the peer did.
type protocolError struct{ what string }

func (e *protocolError) Error() string { return ErrProtocol.Error() + ": " + e.what }
func (e *protocolError) Unwrap() error { return ErrProtocol }

// closedError is ErrSessionClosed wrapping why the session closed. Its message is built
// only when asked for: every session that ends on a connection error makes one, and most
// are never printed.
type closedError struct{ cause error }

func (e *closedError) Error() string   { return ErrSessionClosed.Error() + ": " + e.cause.Error() }
func (e *closedError) Unwrap() []error { return []error{ErrSessionClosed, e.cause} }

// goAwayError is the peer's go-away with an error code: it ends the session.
type goAwayError struct{ code uint32 }

func (e *goAwayError) Error() string {
	switch e.code {
	case goAwayProtocol:
		return "mux: peer closed the session: protocol error"
	case goAwayInternal:
		return "mux: peer closed the session: internal error"
	}
	return "mux: peer closed the session with an unknown error code"
}

// Is makes a go-away for a protocol error match ErrProtocol: the peer saw this side break
// the protocol.
func (e *goAwayError) Is(target error) bool { return target == ErrProtocol && e.code == goAwayProtocol }

// resetError is a stream reset with its cause: it matches ErrStreamReset and the cause.
type resetError struct{ cause error }

func (e *resetError) Error() string   { return ErrStreamReset.Error() + ": " + e.cause.Error() }
func (e *resetError) Unwrap() []error { return []error{ErrStreamReset, e.cause} }

// errOverBudget is the reset of a stream whose arriving data did not fit the memory budget.
var errOverBudget error = &resetError{ErrMemoryBudget}
