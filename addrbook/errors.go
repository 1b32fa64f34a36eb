package addrbook

import "errors"

// Errors. Load's errors are *LoadError values wrapping one of ErrFileTooLarge, ErrCorrupt
// and ErrVersion; test them with errors.Is.
var (
	// ErrInvalidConfig is wrapped by Config.Validate's errors and New's.
	ErrInvalidConfig = errors.New("addrbook: invalid config")
	// ErrFileTooLarge means a saved book is larger than the book's caps could need
	// (maxFileSize) or lists more entries than the tables hold.
	ErrFileTooLarge = errors.New("addrbook: saved book too large")
	// ErrCorrupt means a saved book is not the JSON document Save writes.
	ErrCorrupt = errors.New("addrbook: saved book corrupt")
	// ErrVersion means a saved book has a format version this package does not read.
	ErrVersion = errors.New("addrbook: unsupported saved book version")
)

// LoadError is the error of a Load that read nothing into the book.
type LoadError struct {
	// Err is ErrFileTooLarge, ErrCorrupt or ErrVersion.
	Err error
	// Detail says what was wrong, e.g. the JSON decoder's message.
	Detail string
}

// Error returns the sentinel's message and the detail.
func (e *LoadError) Error() string {
	if e.Detail == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Detail
}

// Unwrap returns the sentinel, for errors.Is.
func (e *LoadError) Unwrap() error { return e.Err }
