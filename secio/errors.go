package secio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// Errors returned by this package. Errors that carry details wrap one of
// these sentinels, so callers test them with errors.Is.
var (
	// ErrInvalidConfig reports a Config or LegacyConfig that fails Validate.
	ErrInvalidConfig = errors.New("secio: invalid config")

	// ErrInvalidKey reports a malformed private or public key encoding.
	ErrInvalidKey = errors.New("secio: invalid key")

	// ErrKeyFilePermissions reports a private key file that group or others
	// may read or write: it is refused, as OpenSSH refuses such keys.
	ErrKeyFilePermissions = errors.New("secio: key file permissions too open")

	// ErrInvalidPeerID reports a peer ID that is not a 34-byte BLAKE3-256
	// multihash (code 0x1e, length 32), or a string that is not its
	// base58btc form.
	ErrInvalidPeerID = errors.New("secio: invalid peer ID")

	// ErrSelfDial reports a handshake with a peer holding the local identity
	// key: the node dialled itself.
	ErrSelfDial = errors.New("secio: dialled self")

	// ErrNoCommonSuite reports that the two sides share no key exchange or
	// no cipher suite; the error returned is a *NoCommonSuiteError.
	ErrNoCommonSuite = errors.New("secio: no common suite")

	// ErrPeerIDMismatch reports that the remote identity is not
	// Config.ExpectedPeer. A Client checks it as soon as it has decrypted
	// the listener's identity, before revealing its own.
	ErrPeerIDMismatch = errors.New("secio: peer ID mismatch")

	// ErrAuthFailed reports a frame that failed AEAD authentication. Nothing
	// of that frame is delivered and the connection is closed.
	ErrAuthFailed = errors.New("secio: message authentication failed")

	// ErrFrameTooLarge reports a frame length prefix above the negotiated
	// maximum. It is detected before anything is allocated for the frame.
	ErrFrameTooLarge = errors.New("secio: frame too large")

	// ErrInvalidFrame reports a frame that is malformed (shorter than the
	// AEAD tag and record type, an unknown record type, a control record
	// with content, or a legacy TEA ciphertext that does not decode).
	ErrInvalidFrame = errors.New("secio: invalid frame")

	// ErrHandshakeTimeout reports a handshake that did not complete within
	// Config.HandshakeTimeout. The error returned has a Timeout method that
	// reports true.
	ErrHandshakeTimeout = errors.New("secio: handshake timeout")

	// ErrInvalidMessage reports a malformed or oversized handshake message.
	ErrInvalidMessage = errors.New("secio: invalid handshake message")

	// ErrNotTendril reports that the peer's first bytes are not a tendril
	// handshake message: something else answered (an HTTP server, say) or
	// dialled. The error returned is a *NotTendrilError, which also matches
	// ErrInvalidMessage.
	ErrNotTendril = errors.New("secio: not a tendril peer")

	// ErrTruncated reports a secure connection that ended at a frame
	// boundary without the peer's close record: it may have been cut by
	// an attacker, so the data may be incomplete. It wraps
	// io.ErrUnexpectedEOF. A close record ends the stream with io.EOF.
	ErrTruncated = fmt.Errorf("secio: connection ended without a close record: %w", io.ErrUnexpectedEOF)

	// ErrInvalidSignature reports an identity signature over the handshake
	// transcript that does not verify.
	ErrInvalidSignature = errors.New("secio: invalid signature")

	// ErrInvalidKeyExchange reports an ephemeral public key that is
	// malformed for the negotiated exchange or yields a degenerate shared
	// secret (such as a low-order X25519 point).
	ErrInvalidKeyExchange = errors.New("secio: invalid key exchange")

	// ErrNonceExhausted reports that a direction's 96-bit frame counter would
	// wrap; the connection must be replaced.
	ErrNonceExhausted = errors.New("secio: nonce counter exhausted")

	// ErrKeyUpdateTooSoon reports a key update record that arrived before
	// the peer's current key had protected 64 records (its sequence number
	// under that key below 64). A key update costs its receiver a key
	// derivation and a new key schedule; a peer that updates that often
	// makes it work for nothing. The connection is closed.
	ErrKeyUpdateTooSoon = errors.New("secio: key update too soon")

	// ErrTooManyNonDataRecords reports more than 16 records in a row that
	// delivered no data: empty data records and key updates (as crypto/tls
	// counts useless records). A sender following this package sends at
	// most one such record in a row. The connection is closed.
	ErrTooManyNonDataRecords = errors.New("secio: too many records without data")

	// ErrMemoryBudget reports that Config.Memory (or LegacyConfig.Memory)
	// refused a read buffer: the Read or the handshake fails and the
	// connection is closed (see MemoryBudget).
	ErrMemoryBudget = errors.New("secio: memory budget exhausted")

	// ErrUnsupportedVersion reports a ClientHello with a protocol version
	// this package does not speak.
	ErrUnsupportedVersion = errors.New("secio: unsupported protocol version")

	// ErrClosed reports use of a Conn after Close. It wraps net.ErrClosed
	// so that errors.Is(err, net.ErrClosed) holds as well.
	ErrClosed = fmt.Errorf("secio: %w", net.ErrClosed)
)

// NoCommonSuiteError reports that the two sides' lists share no key
// exchange or no cipher suite. It matches ErrNoCommonSuite with errors.Is.
type NoCommonSuiteError struct {
	// What is "key exchange" or "cipher".
	What string
	// Local and Remote are the lists offered by each side, by name; remote
	// codes that this package does not know appear as "Unknown(n)".
	Local, Remote []string
}

// Error implements error.
func (e *NoCommonSuiteError) Error() string {
	return fmt.Sprintf("secio: no common %s: local [%s], remote [%s]",
		e.What, strings.Join(e.Local, ", "), strings.Join(e.Remote, ", "))
}

// Unwrap returns ErrNoCommonSuite.
func (e *NoCommonSuiteError) Unwrap() error { return ErrNoCommonSuite }

// NotTendrilError reports that the first bytes the peer sent cannot start a
// tendril handshake message: read as its 4-byte length prefix, they give 0
// or more than the message may hold. It names what they look like when it
// can tell (HTTP, TLS, SSH). It matches ErrNotTendril and ErrInvalidMessage.
type NotTendrilError struct {
	// Prefix is the first 4 bytes received.
	Prefix [4]byte
	// Limit is the largest message body the handshake expected there.
	Limit int
}

// Error implements error.
func (e *NotTendrilError) Error() string {
	if what := lookalike(e.Prefix); what != "" {
		return fmt.Sprintf("%v: it sent %q, which looks like %s", ErrNotTendril, e.Prefix[:], what)
	}
	return fmt.Sprintf("%v: unexpected bytes % x (as a length prefix %d, want 1 to %d)",
		ErrNotTendril, e.Prefix[:], binary.BigEndian.Uint32(e.Prefix[:]), e.Limit)
}

// Unwrap returns ErrNotTendril and ErrInvalidMessage.
func (e *NotTendrilError) Unwrap() []error { return []error{ErrNotTendril, ErrInvalidMessage} }

// lookalike names the protocol whose first bytes p resembles, or "".
func lookalike(p [4]byte) string {
	switch s := string(p[:]); {
	case s == "HTTP":
		return "an HTTP server's response"
	case s == "GET " || s == "POST" || s == "PUT " || s == "HEAD" || s == "PRI " || s == "DELE" || s == "OPTI" || s == "CONN" || s == "PATC":
		return "an HTTP request"
	case s == "SSH-":
		return "SSH"
	case (p[0] == 0x15 || p[0] == 0x16) && p[1] == 0x03:
		return "TLS"
	}
	return ""
}

// HandshakeError reports a handshake failure and the step at which it
// happened ("read client hello", "read listener auth", ...). It unwraps to the
// underlying cause, which wraps one of the sentinels of this package or an
// I/O error.
type HandshakeError struct {
	Step string
	Err  error
}

// Error implements error.
func (e *HandshakeError) Error() string {
	msg := e.Err.Error()
	msg = strings.TrimPrefix(msg, "secio: ")
	return "secio: handshake: " + e.Step + ": " + msg
}

// Unwrap returns the cause.
func (e *HandshakeError) Unwrap() error { return e.Err }

// Timeout reports whether the cause is a timeout (a handshake deadline or
// a deadline on the underlying connection).
func (e *HandshakeError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// timeoutError is the cause of a HandshakeError when Config.HandshakeTimeout
// expires. It matches ErrHandshakeTimeout and context.DeadlineExceeded.
type timeoutError struct{ cause error }

func (e *timeoutError) Error() string   { return ErrHandshakeTimeout.Error() }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
func (e *timeoutError) Unwrap() []error { return []error{ErrHandshakeTimeout, e.cause} }

// suiteNames lists suites by wire name for error messages.
func suiteNames(s []aead.Suite) []string { return listNames(s) }

// kexNames lists key exchanges by name for error messages.
func kexNames(k []KeyExchange) []string { return listNames(k) }

// listNames lists the entries of a preference list by name, an invalid one as Unknown(n).
func listNames[T listEntry](list []T) []string {
	out := make([]string, len(list))
	for i, v := range list {
		if v.Valid() {
			out[i] = v.String()
		} else {
			out[i] = fmt.Sprintf("Unknown(%d)", uint8(v))
		}
	}
	return out
}
