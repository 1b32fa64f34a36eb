package tea

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Errors carrying details wrap one of these
// sentinels; test them with errors.Is.
var (
	// ErrKeySize reports a key that is not 16 bytes long. (The reference
	// implementations silently use an all-zero key instead.)
	ErrKeySize = errors.New("tea: invalid key size")

	// ErrCiphertextSize reports a ciphertext shorter than 16 bytes or whose
	// length is not a multiple of 8.
	ErrCiphertextSize = errors.New("tea: invalid ciphertext length")

	// ErrPadding reports a ciphertext whose decrypted header points past the
	// end of the message (possible only for 16-byte inputs).
	ErrPadding = errors.New("tea: invalid padding header")

	// ErrTrailer is returned by DecryptStrict when the 7-byte trailer of the
	// decrypted message is not all zero.
	ErrTrailer = errors.New("tea: non-zero trailer")

	// ErrFill reports that the filler source given to EncryptWithFill or
	// EncryptBatchWithFill could not supply its bytes.
	ErrFill = errors.New("tea: reading filler bytes")
)

// BatchError reports which messages of DecryptBatch failed. Errs has one
// entry per message: nil where the message decrypted, else its error
// (wrapping ErrCiphertextSize or ErrPadding). errors.Is and errors.As see
// every non-nil entry.
type BatchError struct {
	Errs []error
}

// Error summarises the failures and quotes the first one.
func (e *BatchError) Error() string {
	failed, first := 0, -1
	for i, err := range e.Errs {
		if err != nil {
			failed++
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return "tea: batch: no failures"
	}
	return fmt.Sprintf("tea: batch: %d of %d messages failed; message %d: %v", failed, len(e.Errs), first, e.Errs[first])
}

// Unwrap returns the non-nil per-message errors.
func (e *BatchError) Unwrap() []error {
	var errs []error
	for _, err := range e.Errs {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
