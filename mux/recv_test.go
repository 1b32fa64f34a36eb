package mux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// TestStrictWire: what the specification does not allow after a FIN, and a window update
// that would overflow the send window, close the session with ErrProtocol; data after the
// peer's FIN never reaches a Read that has returned io.EOF.
func TestStrictWire(t *testing.T) {
	cases := map[string][][]byte{
		"data after FIN": {
			hdr(typeData, flagSYN|flagFIN, 1, 2), []byte("ab"),
			hdr(typeData, 0, 1, 2), []byte("cd"),
		},
		"FIN after FIN": {
			hdr(typeWindowUpdate, flagSYN|flagFIN, 1, 0),
			hdr(typeWindowUpdate, flagFIN, 1, 0),
		},
		"window overflow": {
			hdr(typeWindowUpdate, flagSYN, 1, 0),
			hdr(typeWindowUpdate, 0, 1, 1<<32-InitialStreamWindow),
		},
	}
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			s, p := newFramePeer(t, nil, true)
			p.send(t, frames...)
			if err := closedWith(t, s); !errors.Is(err, ErrProtocol) {
				t.Fatalf("session closed with %v, want ErrProtocol", err)
			}
		})
	}
	t.Run("no data after EOF", func(t *testing.T) {
		s, p := newFramePeer(t, nil, true)
		p.send(t, hdr(typeData, flagSYN|flagFIN, 1, 2), []byte("ab"))
		st, err := s.AcceptStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(st); err != nil || string(got) != "ab" {
			t.Fatalf("ReadAll = %q, %v", got, err)
		}
		p.send(t, hdr(typeData, 0, 1, 2), []byte("cd"))
		closedWith(t, s)
		if n, err := st.Read(make([]byte, 8)); n != 0 || err == nil {
			t.Fatalf("Read after EOF = %d, %v: data after the FIN was delivered", n, err)
		}
	})
}

// TestFramesForUnknownStreams: data for a stream the peer never opened gets a reset, and so
// does data for a stream that ended here (nobody reads it: the peer's writer must not
// wait for window), while its other frames are dropped quietly (the peer may not know yet).
func TestFramesForUnknownStreams(t *testing.T) {
	s, p := newFramePeer(t, nil, true)
	p.send(t, hdr(typeData, flagSYN, 1, 1), []byte("a"))
	st, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	st.Close() // stream 1 ends here, all read
	p.send(t, hdr(typeWindowUpdate, 0, 1, 100), hdr(typeData, 0, 7, 3), []byte("efg"))
	waitFor(t, "a reset of stream 7, never opened", func() bool { return p.wasReset(7) })
	if p.wasReset(1) {
		t.Fatal("a window update for a stream that ended here got a reset")
	}
	p.send(t, hdr(typeData, 0, 1, 3), []byte("bcd"))
	waitFor(t, "a reset of stream 1 for data nobody reads", func() bool { return p.wasReset(1) })
	if s.IsClosed() {
		t.Fatal("the session closed")
	}
}

// TestBareSYNsReserveNothing: streams the peer opens and never sends on cost no memory
// budget (a bare SYN reserved a whole window before, 272 KiB: 17 such sessions locked a
// 1 GiB budget), and the budget charged for data returns once it is read.
func TestBareSYNsReserveNothing(t *testing.T) {
	shared := NewBudget(64<<20, nil)
	s, p := newFramePeer(t, &Config{Memory: shared, AcceptBacklog: 1000}, true)
	var frames [][]byte
	for id := uint32(1); id < 2*900; id += 2 {
		frames = append(frames, hdr(typeWindowUpdate, flagSYN, id, 0))
	}
	p.send(t, frames...)
	waitFor(t, "900 streams", func() bool { return s.NumStreams() == 900 })
	if s.MemoryUsed() != 0 || shared.Used() != 0 {
		t.Fatalf("900 bare SYNs reserved %d bytes (shared %d)", s.MemoryUsed(), shared.Used())
	}
	p.send(t, hdr(typeData, 0, 1, 100), make([]byte, 100))
	st, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the data charged", func() bool { return s.MemoryUsed() > 0 })
	if _, err := io.ReadFull(st, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if s.MemoryUsed() != 0 || shared.Used() != 0 {
		t.Fatalf("after the data was read: %d bytes reserved (shared %d)", s.MemoryUsed(), shared.Used())
	}
}

// TestRapidReset: a peer that opens streams and resets them at once, in one frame or two,
// is closed with ErrPeerMisbehaving once past its allowance, while the handlers Serve runs
// for it stay within ServeConcurrency.
func TestRapidReset(t *testing.T) {
	for _, split := range []bool{false, true} {
		name := map[bool]string{false: "SYN|RST", true: "SYN then RST"}[split]
		t.Run(name, func(t *testing.T) {
			s, p := newFramePeer(t, &Config{UselessFrames: 100, ServeConcurrency: 8}, true)
			var running, most atomicMax
			s.Serve(func(st *Stream) {
				most.see(running.add(1))
				defer running.add(-1)
				_, _ = st.Read(make([]byte, 1))
				st.Close()
			}, nil)
			var frames [][]byte
			for id := uint32(1); id < 2*2000; id += 2 {
				if split {
					frames = append(frames, hdr(typeData, flagSYN, id, 1), []byte{1}, hdr(typeWindowUpdate, flagRST, id, 0))
				} else {
					frames = append(frames, hdr(typeData, flagSYN|flagRST, id, 1), []byte{1})
				}
			}
			go p.Write(bytes.Join(frames, nil))
			if err := closedWith(t, s); !errors.Is(err, ErrPeerMisbehaving) {
				t.Fatalf("session closed with %v, want ErrPeerMisbehaving", err)
			}
			if m := most.load(); m > 8 {
				t.Fatalf("%d handlers ran at once, ServeConcurrency is 8", m)
			}
		})
	}
}

// TestResetsWithWriterBlocked: with the useless-frame limit off and a peer that never reads,
// streams opened and reset stay counted until this side's frames for them are written, so
// the control queue and the streams held are bounded by MaxStreams whatever the peer sends
// (before, every reset stream stayed queued: 300,000 of them, 800 MiB, from one session; here 20,000).
func TestResetsWithWriterBlocked(t *testing.T) {
	// Over net.Pipe, whose writes block until the peer reads: the peer never does.
	a, b := net.Pipe()
	defer a.Close()
	s, err := Server(b, &Config{UselessFrames: -1, MaxStreams: 256, ServeConcurrency: 8, ConnectionWriteTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &framePeer{Conn: a}
	s.Serve(func(st *Stream) { st.Close() }, nil)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var frames [][]byte
	for id := uint32(1); id < 2*20_000; id += 2 {
		frames = append(frames, hdr(typeData, flagSYN, id, 1), []byte{1}, hdr(typeWindowUpdate, flagRST, id, 0))
	}
	p.send(t, frames...)
	waitFor(t, "the frames read", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.maxRemoteID >= 2*20_000-1
	})
	select {
	case s.w.sem <- struct{}{}:
		t.Fatal("the session's writer is not blocked: the test shows nothing")
	default:
	}
	s.w.mu.Lock()
	queued := len(s.w.streams)
	s.w.mu.Unlock()
	if n := s.NumStreams(); n > 256 || queued > 256 {
		t.Fatalf("%d streams counted, %d queued: more than MaxStreams 256", n, queued)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 16<<20 {
		t.Fatalf("the heap grew by %d MiB", grew>>20)
	}
}

// TestResetAfterFIN: a reset that comes after the peer's FIN only stops this side's writes:
// what the peer sent stays readable, then io.EOF, and its memory returns once read, or
// at once when this side resets the stream too.
func TestResetAfterFIN(t *testing.T) {
	for _, readIt := range []bool{true, false} {
		t.Run(fmt.Sprintf("read=%v", readIt), func(t *testing.T) {
			s, p := newFramePeer(t, nil, true)
			p.send(t, hdr(typeData, flagSYN|flagFIN, 1, 3), []byte("abc"), hdr(typeWindowUpdate, flagRST, 1, 0))
			st, err := s.AcceptStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the reset", func() bool { return s.NumStreams() == 0 })
			if _, err := st.Write([]byte("x")); !errors.Is(err, ErrStreamReset) {
				t.Fatalf("Write after the peer's reset = %v, want ErrStreamReset", err)
			}
			if readIt {
				if got, err := io.ReadAll(st); err != nil || string(got) != "abc" {
					t.Fatalf("ReadAll = %q, %v; want what the peer sent before its FIN", got, err)
				}
			} else {
				st.Reset()
				if n, err := st.Read(make([]byte, 8)); n != 0 || !errors.Is(err, ErrStreamReset) {
					t.Fatalf("Read after this side's Reset = %d, %v", n, err)
				}
			}
			if s.MemoryUsed() != 0 {
				t.Fatalf("%d bytes still reserved", s.MemoryUsed())
			}
		})
	}
}
