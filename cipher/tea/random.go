package tea

import (
	"crypto/rand"
	"sync"
)

// randBuf holds crypto/rand output to be handed out in small pieces: one
// crypto/rand call per 512 bytes instead of one per message (a call costs
// about as much as encrypting a block). Bytes are erased once handed out.
type randBuf struct {
	b   [512]byte
	off int
}

var randPool = sync.Pool{New: func() any { return &randBuf{off: 512} }}

// readRandom fills dst (at most 512 bytes) with bytes from crypto/rand.
func readRandom(dst []byte) {
	rb := randPool.Get().(*randBuf)
	if len(rb.b)-rb.off < len(dst) {
		rand.Read(rb.b[:]) // never fails (Go 1.24+)
		rb.off = 0
	}
	src := rb.b[rb.off : rb.off+len(dst)]
	copy(dst, src)
	clear(src)
	rb.off += len(dst)
	randPool.Put(rb)
}
