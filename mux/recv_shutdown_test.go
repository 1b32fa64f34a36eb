package mux

import (
	"net"
	"testing"
)

// TestBodyAfterShutdownReservesNothing: a data frame's body read after the session closed
// (a reader that had read the header when another goroutine shut the session down, or a
// pending body resumed later) reserves nothing for its stream, which shutdown has already
// released: the reservation would never be returned to the shared budget. FuzzSession
// found this as "closed session still reserves 16384 bytes".
func TestBodyAfterShutdownReservesNothing(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	s, err := Server(a, &Config{KeepAliveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.incoming(1)
	if err != nil || st == nil {
		t.Fatalf("incoming: %v, %v", st, err)
	}
	s.Close()
	if used := s.MemoryUsed(); used != 0 {
		t.Fatalf("closed session reserves %d bytes before the body", used)
	}
	if _, _, err := s.startBody(st, 12336, 0); err == nil {
		t.Fatal("a body read from a closed session succeeded")
	}
	if used := s.MemoryUsed(); used != 0 {
		t.Fatalf("closed session still reserves %d bytes after a body read", used)
	}
}

// TestBodyAfterShutdownRecord is TestBodyAfterShutdownReservesNothing over a connection
// read a record at a time, the body already in the record being parsed (large enough to be
// handed over as a segment): the removed stream gets no segment and no chunk, nothing is
// reserved, and the record's slab is let go once the body is parsed.
func TestBodyAfterShutdownRecord(t *testing.T) {
	_, b := secioPair(t, 0)
	s, err := Server(b, &Config{KeepAliveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.incoming(1)
	if err != nil || st == nil {
		t.Fatalf("incoming: %v, %v", st, err)
	}
	s.Close() // recvLoop has returned: the test reads as the holder of the turn would
	if used := s.MemoryUsed(); used != 0 {
		t.Fatalf("closed session reserves %d bytes before the body", used)
	}
	const n = 40000
	// The record: the body, and a frame header after it, left for the next step.
	rec := &slab{buf: make([]byte, n+100), owner: s}
	rec.refs.Store(1)
	s.in, s.inR, s.inW = rec, 0, n+12
	if _, _, err := s.startBody(st, n, 0); err != nil {
		t.Fatalf("a body already received, for a removed stream: %v", err)
	}
	if segs, buffered := segments(st), st.Buffered(); segs != 0 || buffered != 0 {
		t.Fatalf("the removed stream got %d segments, %d bytes", segs, buffered)
	}
	if used := s.MemoryUsed(); used != 0 {
		t.Fatalf("closed session reserves %d bytes after the body", used)
	}
	if s.inR != n || rec.refs.Load() != 1 {
		t.Fatalf("parsed to %d of %d, the slab's references %d", s.inR, n+12, rec.refs.Load())
	}
	s.dropInput()
	if refs := rec.refs.Load(); refs != 0 {
		t.Fatalf("the slab keeps %d references", refs)
	}
}
