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
