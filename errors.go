package tendril

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the Service. Errors returned by the Service wrap these (test them with
// errors.Is); errors from the layers below (secio, mux, protocol) are wrapped unchanged, so
// secio.ErrPeerIDMismatch or protocol.ErrUnknownProtocol can be tested the same way.
var (
	// ErrServiceClosed is returned by every method of a Service that has been closed.
	ErrServiceClosed = errors.New("tendril: service closed")
	// ErrNotConnected means there is no session with the given peer.
	ErrNotConnected = errors.New("tendril: peer not connected")
	// ErrSessionClosed is returned when sending on, or opening a protocol on, a closed session.
	ErrSessionClosed = errors.New("tendril: session closed")
	// ErrPeerClosed is why a session ended when the peer closed it on purpose: on a secure
	// session its authenticated close record arrived, which no one on the path can forge,
	// so it is told apart from a connection that was lost, reset or truncated. The error
	// in Session.Err and in EventSessionClosed also matches ErrSessionClosed. A legacy TEA
	// session cannot tell the two apart and reports every end as a lost connection; so does
	// a secure one whose peer could not write its close record within a second (its socket
	// full, because this side stopped reading).
	ErrPeerClosed = fmt.Errorf("%w by the peer", ErrSessionClosed)
	// ErrSessionBlocked means the session's send queue is full: the peer does not read as
	// fast as messages are queued. Retry later, or use a SendContext variant that waits.
	ErrSessionBlocked = errors.New("tendril: session send queue full")
	// ErrConnectionLimit means an admission limit refused a connection: inbound or
	// outbound sessions, handshakes in progress, or a per-IP or per-subnet cap (see
	// Admission). The error is a *LimitError naming the limit.
	ErrConnectionLimit = errors.New("tendril: connection limit reached")
	// ErrGated means the Config.Admission Gater refused a connection or a peer; the error
	// wraps the Gater's reason.
	ErrGated = errors.New("tendril: refused by the gater")
	// ErrTrimmed means admission closed the session to make room: inbound sessions reached
	// Admission.HighWater and this one had no protocol open.
	ErrTrimmed = errors.New("tendril: session trimmed by admission")
	// ErrIdleSession means the session was closed because no protocol was opened on it
	// within Admission.IdleTimeout.
	ErrIdleSession = errors.New("tendril: session idle: no protocol opened")
	// ErrHandshakeEvicted means a handshake in progress was aborted to make room for a newer
	// connection: every handshake slot (or its subnet's share) was taken, and this one was
	// the oldest of those whose first message had not arrived, or else the oldest that had
	// run a second (see Admission.MaxHandshakes).
	ErrHandshakeEvicted = errors.New("tendril: handshake evicted for a newer connection")
	// ErrInsecureSession means a protocol without AllowLegacyTEA was asked of a legacy TEA
	// session.
	ErrInsecureSession = errors.New("tendril: protocol not allowed on an insecure session")
	// ErrProtocolNotOpen means the protocol has no open stream on the session.
	ErrProtocolNotOpen = errors.New("tendril: protocol not open on this session")
	// ErrUnknownProtocol means the protocol name is not registered on this Service.
	ErrUnknownProtocol = errors.New("tendril: protocol not registered")
	// ErrInvalidProtocol means a Protocol given to New (in Config.Protocols, then also
	// wrapped with ErrInvalidConfig) or to AddProtocol is invalid: a bad name or version,
	// not exactly one handler, or a name registered twice.
	ErrInvalidProtocol = errors.New("tendril: invalid protocol")
	// ErrMessageTooLarge means a message exceeds Config.MaxMessageSize, or its protocol's
	// Protocol.MaxMessageSize.
	ErrMessageTooLarge = errors.New("tendril: message too large")

	// ErrRequestFailed means the peer's RequestHandler returned an error (see RequestError).
	ErrRequestFailed = errors.New("tendril: request failed")

	// ErrNoReply means the peer ended a request's stream without a reply: its session was
	// closing, or its handler panicked or did not read the request in time.
	ErrNoReply = errors.New("tendril: the peer ended the request without a reply")

	// ErrTooManyRequests means Config.MaxRequests requests of the session were in flight
	// already: Request does not wait for one to end.
	ErrTooManyRequests = errors.New("tendril: too many requests in flight")
	// ErrLegacyDisabled means a legacy TEA listen or dial was asked of a Service whose
	// Config.LegacyTEA is nil.
	ErrLegacyDisabled = errors.New("tendril: legacy TEA mode not enabled")
	// ErrLegacyKeyMismatch is in the Err of a legacy TEA session that ended because the
	// peer's frames did not decrypt to valid mux frames before any protocol opened: TEA
	// cannot authenticate, so a wrong key shows only as garbage, most likely because the two
	// sides' LegacyTEAConfig.Key differ. It comes with ErrSessionClosed and the mux's
	// protocol error.
	ErrLegacyKeyMismatch = errors.New("tendril: legacy TEA: the peer's frames did not decrypt to mux frames; wrong key?")
	// ErrInvalidAddr means an address is not a supported multiaddr.
	ErrInvalidAddr = errors.New("tendril: invalid address")
	// ErrInvalidConfig is wrapped by every error of Config.Validate.
	ErrInvalidConfig = errors.New("tendril: invalid config")
	// ErrDuplicateSession means the session was closed because another connection to the same
	// peer was kept (see Service.Dial): a relayed session replaced by a direct one ends
	// with it too, gracefully (see Session.Relayed).
	ErrDuplicateSession = errors.New("tendril: duplicate session with peer closed")
)

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// closedError is why a session ended when this side did not end it: ErrSessionClosed, the
// reason (errConnectionLost, errPeerMisbehaved, ErrPeerClosed or ErrLegacyKeyMismatch) and
// the cause from the
// layers below, all three matched by errors.Is. Its message is only built when asked for,
// since a node that churns through connections would otherwise format (and discard) the
// cause of every one.
type closedError struct {
	reason error
	cause  error
}

// errConnectionLost is the reason of a session whose connection failed (reset, truncated,
// timed out, a bad frame): not an intended close by either side.
var errConnectionLost = errors.New("tendril: connection lost")

// errPeerMisbehaved is the reason of a session this side closed because the peer broke the
// protocol or the limits on what it may make this side do (the cause says which:
// mux.ErrProtocol, mux.ErrPeerMisbehaving, secio.ErrKeyUpdateTooSoon,
// secio.ErrTooManyNonDataRecords).
var errPeerMisbehaved = errors.New("tendril: the peer broke the protocol")

func (e *closedError) Error() string {
	if e.reason == ErrPeerClosed {
		// The peer left on purpose: its authenticated close record (secio's io.EOF, wrapped
		// by the mux) says nothing more.
		return ErrPeerClosed.Error()
	}
	return ErrSessionClosed.Error() + ": " + strings.TrimPrefix(e.reason.Error(), "tendril: ") + ": " + e.cause.Error()
}

func (e *closedError) Unwrap() []error { return []error{ErrSessionClosed, e.reason, e.cause} }
