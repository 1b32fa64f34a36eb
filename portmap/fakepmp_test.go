package portmap_test

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// pmpRequest is a mapping request a fake NAT-PMP gateway received.
type pmpRequest struct {
	op                  byte
	internal, suggested uint16
	lifetime            uint32
}

// fakePMP is a NAT-PMP gateway on a loopback UDP port. Its behaviour is set through
// its fields under mu; hostile overrides what it sends.
type fakePMP struct {
	conn *net.UDPConn
	wg   sync.WaitGroup

	mu       sync.Mutex
	ext      [4]byte
	assign   func(suggested uint16) uint16 // external port given; nil: the suggested one
	grant    func(asked uint32) uint32     // lifetime given; nil: the asked one
	silent   bool                          // answer nothing
	code     uint16                        // result code for mapping requests
	hostile  func(req []byte) [][]byte     // if set, sent instead of the answer
	mutate   func(out []byte)              // if set, applied to mapping answers
	requests []pmpRequest
	extAsks  int
}

func newFakePMP(t *testing.T) *fakePMP {
	t.Helper()
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePMP{conn: conn, ext: [4]byte{203, 0, 113, 7}}
	f.wg.Go(f.serve)
	t.Cleanup(func() { conn.Close(); f.wg.Wait() })
	return f
}

func (f *fakePMP) port() int { return f.conn.LocalAddr().(*net.UDPAddr).Port }

func (f *fakePMP) serve() {
	buf := make([]byte, 64)
	for {
		n, from, err := f.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		for _, out := range f.answer(buf[:n]) {
			f.conn.WriteToUDPAddrPort(out, from)
		}
	}
}

func (f *fakePMP) answer(req []byte) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(req) < 2 {
		return nil
	}
	if req[1] == 1 || req[1] == 2 {
		if len(req) != 12 {
			return nil
		}
		f.requests = append(f.requests, pmpRequest{op: req[1], internal: binary.BigEndian.Uint16(req[4:]),
			suggested: binary.BigEndian.Uint16(req[6:]), lifetime: binary.BigEndian.Uint32(req[8:])})
	} else {
		f.extAsks++
	}
	if f.silent {
		return nil
	}
	if f.hostile != nil {
		return f.hostile(req)
	}
	switch req[1] {
	case 0:
		out := make([]byte, 12)
		out[1] = 128
		binary.BigEndian.PutUint32(out[4:], 1000)
		copy(out[8:], f.ext[:])
		return [][]byte{out}
	case 1, 2:
		r := f.requests[len(f.requests)-1]
		out := make([]byte, 16)
		out[1] = 128 | req[1]
		binary.BigEndian.PutUint16(out[2:], f.code)
		binary.BigEndian.PutUint32(out[4:], 1000)
		binary.BigEndian.PutUint16(out[8:], r.internal)
		ext, life := r.suggested, r.lifetime
		if r.lifetime == 0 {
			ext = 0
		} else {
			if f.assign != nil {
				ext = f.assign(r.suggested)
			}
			if f.grant != nil {
				life = f.grant(r.lifetime)
			}
		}
		binary.BigEndian.PutUint16(out[10:], ext)
		binary.BigEndian.PutUint32(out[12:], life)
		if f.mutate != nil {
			f.mutate(out)
		}
		return [][]byte{out}
	}
	return nil
}

func (f *fakePMP) set(fn func(f *fakePMP)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakePMP) log() []pmpRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]pmpRequest(nil), f.requests...)
}
