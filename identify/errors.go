package identify

import "errors"

// The errors identify reports for a peer's bad messages. Each closes that peer's identify
// stream (never its session, never the Service) and is passed to Config.OnError and
// logged; test them with errors.Is. Errors of a record wrap peerrecord's sentinels too
// (peerrecord.ErrBadSignature, ...).
var (
	// ErrTooLarge: a message above MaxMessageSize, or a field above its cap (agent,
	// observed address, protocols, names, versions).
	ErrTooLarge = errors.New("identify: message too large")
	// ErrMalformed: the bytes are not a message in the encoding of the package
	// documentation (wrong version, truncated, trailing bytes, an invalid multiaddr or
	// protocol name, a name listed twice, text that is not UTF-8).
	ErrMalformed = errors.New("identify: malformed message")
	// ErrBadRecord: the message's signed peer record does not parse or does not verify;
	// the error wraps peerrecord's reason.
	ErrBadRecord = errors.New("identify: bad peer record")
	// ErrWrongPeer: the record is signed by a key other than the session's peer's: the
	// peer passed off someone else's record as its own.
	ErrWrongPeer = errors.New("identify: record of another peer")
	// ErrFlood: the peer kept sending updates faster than Config.UpdateInterval allows
	// (more than Config.MaxDropped of them were dropped unread).
	ErrFlood = errors.New("identify: too many updates")
)
