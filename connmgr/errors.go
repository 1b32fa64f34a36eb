package connmgr

import "errors"

// Errors of the package; test them with errors.Is.
var (
	// ErrInvalidConfig is wrapped by Config.Validate's errors and New's.
	ErrInvalidConfig = errors.New("connmgr: invalid config")
	// ErrClosed is returned by the methods of a closed Manager.
	ErrClosed = errors.New("connmgr: manager closed")
	// ErrInvalidPeer means a zero peer ID, or the node's own, was given to KeepConnected.
	ErrInvalidPeer = errors.New("connmgr: invalid peer")
)
