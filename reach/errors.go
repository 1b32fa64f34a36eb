package reach

import "errors"

var (
	// ErrInvalidConfig is wrapped by every error of Config.Validate and New.
	ErrInvalidConfig = errors.New("reach: invalid config")
	// ErrMalformed means a request or reply does not parse: a bad version, count, length
	// or multiaddr, or bytes left over. A server answers such a request with it (the
	// requester gets a tendril.RequestError); a client drops such a reply.
	ErrMalformed = errors.New("reach: malformed message")
	// ErrRateLimited means the server refused the request, dialling nothing: the
	// requester's address asked too often (Config.ServeBurst, Config.ServeInterval).
	ErrRateLimited = errors.New("reach: dial-back request rate limited")
	// ErrBusy means the server refused the request, dialling nothing: it was already
	// dialling back as much as it allows (Config.MaxConcurrentDials, Config.DialRate), or
	// it tracks too many requesters' rates to take a new one.
	ErrBusy = errors.New("reach: dial-back server busy")
	// ErrClosed is returned by the methods of a closed Reach.
	ErrClosed = errors.New("reach: closed")
)
