package pex

import "errors"

// Errors. Ask's errors wrap one of these, or the root package's request errors (the
// session closing, the peer not serving the protocol); test them with errors.Is.
var (
	// ErrInvalidConfig is wrapped by Config.Validate's errors and New's.
	ErrInvalidConfig = errors.New("pex: invalid config")
	// ErrRateLimited: the answerer refused the request, this peer having asked too often
	// (or the answerer all its askers). On the serving side it is what a refused
	// request's error says.
	ErrRateLimited = errors.New("pex: rate limited")
	// ErrBadRequest: a request is not one unsigned varint.
	ErrBadRequest = errors.New("pex: malformed request")
	// ErrAnswerTooLarge: an answer is larger than Config.MaxAnswerBytes or lists more
	// records than asked for (Config.MaxAnswer). Nothing of it was parsed or added, and
	// it counts as Config.BadRecordLimit bad records: the peer is ignored for a while.
	ErrAnswerTooLarge = errors.New("pex: answer too large")
	// ErrMalformedAnswer: an answer's framing is wrong (a length beyond the answer or
	// above peerrecord.MaxSize, trailing bytes). Nothing of it was parsed or added; it
	// counts as ErrAnswerTooLarge does.
	ErrMalformedAnswer = errors.New("pex: malformed answer")
	// ErrBadRecord: records in an answer failed to parse or verify (peerrecord.Parse);
	// they were dropped and counted against the peer, the others added.
	ErrBadRecord = errors.New("pex: bad records in answer")
	// ErrIgnored: the peer sent too many bad records lately; it is not asked until
	// Config.IgnoreFor has passed.
	ErrIgnored = errors.New("pex: peer ignored after bad answers")
	// ErrNoPeer: the session has no authenticated peer (legacy TEA).
	ErrNoPeer = errors.New("pex: session has no authenticated peer")
	// ErrClosed: the PEX has been closed.
	ErrClosed = errors.New("pex: closed")
)
