package memory

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestRing runs random writes and reads, wrapping and growing, against bytes.Buffer.
func TestRing(t *testing.T) {
	for _, limit := range []int{1, 7, minRing, 3*minRing + 5, 64 << 10} {
		r := rand.New(rand.NewPCG(uint64(limit), 0))
		var q ring
		var model bytes.Buffer
		var next byte
		wbuf, rbuf, want := make([]byte, limit), make([]byte, limit), make([]byte, limit)
		for i := range 5000 {
			if r.IntN(2) == 0 {
				p := wbuf[:r.IntN(limit-q.n+1)]
				for j := range p {
					p[j] = next
					next++
				}
				q.write(p, limit)
				model.Write(p)
			} else {
				p := rbuf[:r.IntN(limit+1)]
				n, m := q.read(p), copy(want, model.Next(len(p)))
				if n != m || !bytes.Equal(p[:n], want[:m]) {
					t.Fatalf("limit %d, op %d: read %d bytes %v, want %d %v", limit, i, n, p[:n], m, want[:m])
				}
			}
			if q.n != model.Len() || len(q.b) > limit {
				t.Fatalf("limit %d, op %d: holds %d in %d bytes, want %d within the limit", limit, i, q.n, len(q.b), model.Len())
			}
		}
	}
}
