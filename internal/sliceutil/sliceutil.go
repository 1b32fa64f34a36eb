// Package sliceutil holds the byte-slice helpers that the cipher packages' Seal and Open
// share with crypto/cipher's conventions: growing dst for an append-style result, and the
// overlap checks of crypto/internal/alias, which user code cannot import.
package sliceutil

import "unsafe"

// ForAppend extends in by n bytes, reallocating only when its capacity is short; head is
// the whole result, tail the n new bytes.
func ForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	tail = head[len(in):]
	return
}

// InexactOverlap reports whether x and y share memory at any index other than the same
// start: in-place use passes, a shifted alias that a kernel would corrupt does not.
func InexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	return AnyOverlap(x, y)
}

// AnyOverlap reports whether x and y share any memory.
func AnyOverlap(x, y []byte) bool {
	return len(x) > 0 && len(y) > 0 &&
		uintptr(unsafe.Pointer(&x[0])) <= uintptr(unsafe.Pointer(&y[len(y)-1])) &&
		uintptr(unsafe.Pointer(&y[0])) <= uintptr(unsafe.Pointer(&x[len(x)-1]))
}
