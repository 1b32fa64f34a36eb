package mux

import (
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
