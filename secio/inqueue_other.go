//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package secio

import "errors"

// canAskQueue is false where secio cannot ask a socket how many bytes wait in
// it (Windows, js/wasm, Plan 9, Solaris, AIX...): every record longer than
// readAhead is received in chunks there.
const canAskQueue = false

func queuedBytes(uintptr) (int, error) { return 0, errors.ErrUnsupported }
