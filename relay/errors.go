package relay

import (
	"errors"
	"fmt"
)

// Errors. What Reserve, Dial and a circuit's Read return wraps one of these (or the root
// package's errors: the session closing, the peer not serving the protocol); test them
// with errors.Is.
var (
	// ErrInvalidConfig is wrapped by the Validate errors of RelayConfig and ClientConfig.
	ErrInvalidConfig = errors.New("relay: invalid config")
	// ErrInvalidCircuit: an address is not RELAYADDR/p2p/RELAY/p2p-circuit/p2p/TARGET.
	ErrInvalidCircuit = errors.New("relay: invalid circuit address")
	// ErrMalformed: a message or a circuit frame does not parse (or is too long). The
	// side that received it says so with StatusMalformed and ends the stream; the session
	// lives on.
	ErrMalformed = errors.New("relay: malformed message")
	// ErrRateLimited: the relay refused the request because the requesting peer, or
	// everyone together, asked too often (StatusRateLimited).
	ErrRateLimited = errors.New("relay: rate limited")
	// ErrReservationRefused: the relay has no room for another reservation, in total
	// or from the requester's address or subnet (StatusReservationRefused).
	ErrReservationRefused = errors.New("relay: reservation refused")
	// ErrNoReservation: the target has no reservation on the relay
	// (StatusNoReservation).
	ErrNoReservation = errors.New("relay: target has no reservation")
	// ErrResourceLimit: the relay (or the target) has no room for another circuit, in
	// total or for one of the two peers (StatusResourceLimit).
	ErrResourceLimit = errors.New("relay: circuit limit reached")
	// ErrConnectFailed: the relay could not reach the target over its session: the stop
	// stream failed or timed out (StatusConnectFailed).
	ErrConnectFailed = errors.New("relay: relay could not reach the target")
	// ErrRefused: the target refused the circuit: its policy, or no reservation of its
	// own with that relay (StatusRefused).
	ErrRefused = errors.New("relay: refused by the target")

	// ErrCircuitClosed is wrapped by every *CircuitError: the relay ended the circuit.
	ErrCircuitClosed = errors.New("relay: circuit closed by the relay")
	// ErrCircuitBytes: the circuit carried RelayConfig.MaxCircuitBytes in one direction.
	ErrCircuitBytes = errors.New("relay: circuit byte limit reached")
	// ErrCircuitDuration: the circuit lived RelayConfig.MaxCircuitDuration.
	ErrCircuitDuration = errors.New("relay: circuit duration limit reached")
	// ErrRelayClosing: the relay closed (its Relay or its Service).
	ErrRelayClosing = errors.New("relay: relay closing")
	// ErrCircuitReset: the other end's stream to the relay failed or was reset.
	ErrCircuitReset = errors.New("relay: other end of the circuit reset")

	// ErrClosed: the Client has been closed.
	ErrClosed = errors.New("relay: closed")
)

// Status is the outcome of a request, on the wire (one byte).
type Status uint8

// The statuses of hop and stop answers.
const (
	StatusOK                 Status = 0
	StatusMalformed          Status = 1
	StatusRateLimited        Status = 2
	StatusReservationRefused Status = 3
	StatusNoReservation      Status = 4
	StatusResourceLimit      Status = 5
	StatusConnectFailed      Status = 6
	StatusRefused            Status = 7
)

// statusErrors maps each failure status to its sentinel.
var statusErrors = map[Status]error{
	StatusMalformed:          ErrMalformed,
	StatusRateLimited:        ErrRateLimited,
	StatusReservationRefused: ErrReservationRefused,
	StatusNoReservation:      ErrNoReservation,
	StatusResourceLimit:      ErrResourceLimit,
	StatusConnectFailed:      ErrConnectFailed,
	StatusRefused:            ErrRefused,
}

// Err returns the sentinel of a failure status, nil for StatusOK, and an ErrMalformed for
// a status this version does not know.
func (s Status) Err() error {
	if s == StatusOK {
		return nil
	}
	if err, ok := statusErrors[s]; ok {
		return err
	}
	return fmt.Errorf("%w: unknown status %d", ErrMalformed, s)
}

// statusOf returns the status that reports err to the peer.
func statusOf(err error) Status {
	for s, e := range statusErrors {
		if errors.Is(err, e) {
			return s
		}
	}
	return StatusConnectFailed
}

// CloseCode says why the relay ended a circuit; it travels in the close notice the
// relay sends each end.
type CloseCode uint8

// The reasons a relay ends a circuit.
const (
	CloseBytes     CloseCode = 1 // MaxCircuitBytes carried in one direction
	CloseDuration  CloseCode = 2 // MaxCircuitDuration reached
	CloseRelay     CloseCode = 3 // the relay is closing
	CloseReset     CloseCode = 4 // the other end's stream failed
	CloseMalformed CloseCode = 5 // an end sent a malformed frame
)

var closeErrors = map[CloseCode]error{
	CloseBytes:     ErrCircuitBytes,
	CloseDuration:  ErrCircuitDuration,
	CloseRelay:     ErrRelayClosing,
	CloseReset:     ErrCircuitReset,
	CloseMalformed: ErrMalformed,
}

// CircuitError is why the relay ended a circuit, as the relay's close notice said; it is
// the error of a circuit's Read (and so the cause in a relayed Session's Err). It matches
// ErrCircuitClosed and the sentinel of its code (ErrCircuitBytes, ErrCircuitDuration,
// ErrRelayClosing, ErrCircuitReset, ErrMalformed).
type CircuitError struct {
	Code CloseCode
}

func (e *CircuitError) Error() string {
	if err, ok := closeErrors[e.Code]; ok {
		return "relay: circuit closed: " + err.Error()
	}
	return fmt.Sprintf("relay: circuit closed: code %d", e.Code)
}

// Is makes errors.Is(err, ErrCircuitClosed) true, and errors.Is(err, sentinel) for the
// sentinel of its code.
func (e *CircuitError) Is(target error) bool {
	return target == ErrCircuitClosed || (target != nil && closeErrors[e.Code] == target)
}
