package mux

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzSession feeds arbitrary peer bytes to a server session whose handlers read every
// stream: whatever arrives, the session never panics, never reserves beyond its budget,
// and closes cleanly (goleak in TestMain checks that every goroutine ended).
func FuzzSession(f *testing.F) {
	data := append(hdr(typeData, flagSYN, 1, 5), "hello"...)
	f.Add(data)
	f.Add(append(append(data, hdr(typeWindowUpdate, flagFIN, 1, 0)...), hdr(typePing, flagSYN, 0, 7)...))
	f.Add(append(hdr(typeWindowUpdate, flagSYN, 3, 1<<20), hdr(typeWindowUpdate, flagRST, 3, 0)...))
	f.Add(append(hdr(typeData, flagSYN, 5, InitialStreamWindow+1), make([]byte, 64)...))
	f.Add(hdr(typeGoAway, 0, 0, goAwayNormal))
	f.Add(append(hdr(typeData, 0, 9, 3), "abc"...))
	f.Add(hdr(typePing, flagACK, 0, 1))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		const budget = 1 << 20
		s, err := Server(a, &Config{KeepAliveInterval: -1, MaxSessionMemory: budget, MaxStreams: 8, AcceptBacklog: 4})
		if err != nil {
			t.Fatal(err)
		}
		s.Serve(func(st *Stream) {
			io.Copy(io.Discard, st)
			st.Close()
		}, nil)
		drained := make(chan struct{})
		go func() {
			io.Copy(io.Discard, b) // what the session writes back
			close(drained)
		}()
		b.SetWriteDeadline(time.Now().Add(5 * time.Second))
		b.Write(in)
		if used := s.MemoryUsed(); used > budget {
			t.Fatalf("session reserved %d bytes, budget %d", used, budget)
		}
		b.Close()
		select {
		case <-s.CloseChan():
		case <-time.After(5 * time.Second):
			t.Fatal("session did not close after its connection did")
		}
		s.Close()
		<-drained
		if used := s.MemoryUsed(); used != 0 {
			t.Fatalf("closed session still reserves %d bytes", used)
		}
	})
}

// FuzzSessionRecords is FuzzSession over a connection that delivers its input a record at a
// time, as secio.Conn does (recordConn): the session reads records whole into slabs and
// hands large frames to streams as segments of them (records.go). The input is the record
// sizes, then frame headers: each data frame's body is made here (up to 320 KiB), so that
// small inputs make large frames, and a short last header is sent as it is. Besides
// FuzzSession's checks: while the session is open, every live slab is reserved whole.
func FuzzSessionRecords(f *testing.F) {
	cat := func(b ...[]byte) []byte { return bytes.Join(b, nil) }
	big := cat(hdr(typeData, flagSYN, 1, 40000), hdr(typeData, flagSYN, 3, 100000))
	f.Add(cat([]byte{0, 0xff, 0xff}, big))
	f.Add(cat([]byte{1, 0x00, 0x06, 0xff, 0xff}, big, hdr(typeWindowUpdate, flagRST, 3, 0)))
	f.Add(cat([]byte{2, 0x10, 0x00, 0x00, 0x0c, 0x80, 0x00}, big, hdr(typeWindowUpdate, flagFIN, 1, 0)))
	f.Add(cat([]byte{3, 0x40, 0x00, 0x40, 0x00, 0x00, 0x01, 0x00, 0x0b}, big, hdr(typeData, 0, 1, 30000), hdr(typePing, flagSYN, 0, 7)))
	f.Add(cat([]byte{0, 0, 16}, hdr(typeData, flagSYN, 1, 5), hdr(typeData, 0, 1, 1<<20)))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		ncuts := int(in[0])%4 + 1
		if len(in) < 1+2*ncuts {
			return
		}
		cuts := make([]int, ncuts)
		for i := range cuts {
			cuts[i] = 1 + int(in[1+2*i])<<8 | int(in[2+2*i])
		}
		var wire []byte
		for in = in[1+2*ncuts:]; len(in) > 0; {
			h := in[:min(len(in), FrameHeaderSize)]
			in = in[len(h):]
			wire = append(wire, h...)
			if len(h) == FrameHeaderSize && h[1] == typeData {
				n := min(binary.BigEndian.Uint32(h[8:]), 320<<10)
				for i := range n {
					wire = append(wire, byte(i))
				}
			}
		}
		a, b := net.Pipe()
		const budget = 1 << 20
		s, err := Server(&recordConn{Conn: a}, &Config{KeepAliveInterval: -1, MaxSessionMemory: budget, MaxStreams: 8, AcceptBacklog: 4})
		if err != nil {
			t.Fatal(err)
		}
		s.Serve(func(st *Stream) {
			io.Copy(io.Discard, st)
			st.Close()
		}, nil)
		drained := make(chan struct{})
		go func() {
			io.Copy(io.Discard, b) // what the session writes back
			close(drained)
		}()
		b.SetWriteDeadline(time.Now().Add(5 * time.Second))
		for i := 0; len(wire) > 0; i++ {
			n := min(cuts[i%len(cuts)], len(wire))
			rec := binary.BigEndian.AppendUint32(nil, uint32(n))
			if _, err := b.Write(append(rec, wire[:n]...)); err != nil {
				break
			}
			wire = wire[n:]
		}
		s.slabs.mu.Lock()
		used, live, closed := s.MemoryUsed(), s.slabs.live, s.slabs.closed
		s.slabs.mu.Unlock()
		if used > budget {
			t.Fatalf("session reserved %d bytes, budget %d", used, budget)
		}
		if !closed && used < live {
			t.Fatalf("%d bytes of slabs alive, %d reserved", live, used)
		}
		b.Close()
		select {
		case <-s.CloseChan():
		case <-time.After(5 * time.Second):
			t.Fatal("session did not close after its connection did")
		}
		s.Close()
		<-drained
		if used := s.MemoryUsed(); used != 0 {
			t.Fatalf("closed session still reserves %d bytes", used)
		}
	})
}

// recordConn delivers what its peer writes as records, each a 4-byte length and that many
// bytes, the way secio.Conn delivers its records: NextRecord waits for a whole record (a
// read cut by a deadline keeps what arrived), and a Read of at least its size returns it
// whole; a shorter Read leaves the rest as a record of its own. Empty records are skipped.
type recordConn struct {
	net.Conn
	hdr   [4]byte
	hn    int
	rec   []byte // the record being received or returned
	got   int    // bytes of rec received
	r     int    // bytes of rec returned
	ready bool   // rec is whole
}

func (c *recordConn) NextRecord() (int, error) {
	for !c.ready {
		for c.hn < len(c.hdr) {
			n, err := c.Conn.Read(c.hdr[c.hn:])
			c.hn += n
			if err != nil {
				return 0, err
			}
		}
		if c.rec == nil {
			c.rec, c.got, c.r = make([]byte, binary.BigEndian.Uint32(c.hdr[:])), 0, 0
		}
		for c.got < len(c.rec) {
			n, err := c.Conn.Read(c.rec[c.got:])
			c.got += n
			if err != nil {
				return 0, err
			}
		}
		c.hn = 0
		if len(c.rec) == 0 {
			c.rec = nil
			continue
		}
		c.ready = true
	}
	return len(c.rec) - c.r, nil
}

func (c *recordConn) Read(p []byte) (int, error) {
	if _, err := c.NextRecord(); err != nil {
		return 0, err
	}
	n := copy(p, c.rec[c.r:])
	c.r += n
	if c.r == len(c.rec) {
		c.rec, c.ready = nil, false
	}
	return n, nil
}
