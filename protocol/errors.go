package protocol

import (
	"errors"
	"fmt"
	"os"
)

var (
	// ErrUnknownProtocol means the acceptor has no protocol of the requested name.
	// The opener gets it (through a *RefusedError) from Negotiate; the acceptor
	// gets it from Accept after it has sent the refusal.
	ErrUnknownProtocol = errors.New("protocol: unknown protocol")

	// ErrNoCommonVersion means the two sides support no common version of the
	// protocol (or the select function chose none).
	ErrNoCommonVersion = errors.New("protocol: no common version")

	// ErrRefused is matched by every *RefusedError, whatever its code.
	ErrRefused = errors.New("protocol: refused by peer")

	// ErrMalformed means bytes from the peer do not follow the negotiation format
	// (bad magic, unknown message type, lengths out of range, invalid strings,
	// trailing bytes, or an answer naming a version that was not offered).
	ErrMalformed = errors.New("protocol: malformed negotiation message")

	// ErrNegotiationTimeout means the negotiation did not finish before the
	// context's deadline or a deadline of the connection. It reports
	// Timeout() == true and matches os.ErrDeadlineExceeded.
	ErrNegotiationTimeout error = &timeoutError{"protocol: negotiation timed out"}

	// ErrInvalidName means a protocol name is empty, does not start with "/",
	// is longer than MaxNameLen or contains bytes outside printable ASCII.
	ErrInvalidName = errors.New("protocol: invalid protocol name")

	// ErrInvalidVersion means a version string is not dot-separated decimal
	// numbers, or is longer than MaxVersionLen.
	ErrInvalidVersion = errors.New("protocol: invalid version")

	// ErrInvalidInfo means an Info has no versions, too many versions, or the
	// same version twice.
	ErrInvalidInfo = errors.New("protocol: invalid protocol info")

	// ErrDuplicateProtocol is returned by Registry.Register for a name that is
	// already registered.
	ErrDuplicateProtocol = errors.New("protocol: protocol already registered")

	// ErrBadSelection means a custom SelectFunc returned a version that the
	// remote side did not offer. Accept refuses the stream with CodeRefused.
	ErrBadSelection = errors.New("protocol: select function chose a version the peer did not offer")

	// ErrMessageTooLarge means a message is larger than the reader's or writer's
	// maximum size. A Reader returns it after reading only the length prefix,
	// before allocating anything, and stays failed afterwards.
	ErrMessageTooLarge = errors.New("protocol: message too large")
)

// RefusalCode says why an acceptor refused a stream.
type RefusalCode uint8

// Refusal codes sent on the wire.
const (
	// CodeUnknownProtocol: the acceptor does not know the requested protocol.
	CodeUnknownProtocol RefusalCode = 1
	// CodeNoCommonVersion: no version is supported by both sides.
	CodeNoCommonVersion RefusalCode = 2
	// CodeRefused: any other refusal (for example a broken select function).
	CodeRefused RefusalCode = 3
)

// String returns a short description of the code.
func (c RefusalCode) String() string {
	switch c {
	case CodeUnknownProtocol:
		return "unknown protocol"
	case CodeNoCommonVersion:
		return "no common version"
	case CodeRefused:
		return "refused"
	default:
		return fmt.Sprintf("code %d", uint8(c))
	}
}

// RefusedError is the opener's error when the acceptor refused the stream. It
// matches ErrRefused, and also ErrUnknownProtocol or ErrNoCommonVersion
// according to its Code.
type RefusedError struct {
	// Code is the refusal code the peer sent.
	Code RefusalCode
	// Reason is the peer's free-text reason (printable ASCII, at most
	// MaxReasonLen bytes, possibly empty).
	Reason string
}

// Error implements error.
func (e *RefusedError) Error() string {
	if e.Reason == "" {
		return "protocol: refused by peer: " + e.Code.String()
	}
	return fmt.Sprintf("protocol: refused by peer: %s: %q", e.Code, e.Reason)
}

// Is maps the code onto the package's sentinel errors.
func (e *RefusedError) Is(target error) bool {
	switch target {
	case ErrRefused:
		return true
	case ErrUnknownProtocol:
		return e.Code == CodeUnknownProtocol
	case ErrNoCommonVersion:
		return e.Code == CodeNoCommonVersion
	}
	return false
}

// timeoutError is a net.Error-compatible timeout.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
func (e *timeoutError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded
}
