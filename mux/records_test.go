package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// newRecordPeer starts a server session with cfg over secio and returns it with the
// client's end, which the test writes frames to by hand: each Write is one record. What the
// session sends is read and dropped.
func newRecordPeer(t *testing.T, cfg *Config) (*Session, *secio.Conn) {
	t.Helper()
	peer, b := secioPair(t, 0)
	s, err := Server(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeBoth(s, peer) })
	go io.Copy(io.Discard, peer)
	return s, peer
}

// closeBoth closes a session and its peer's end at once: a secure connection's Close
// lingers until the other end closes too.
func closeBoth(s *Session, peer net.Conn) {
	done := make(chan struct{})
	go func() {
		peer.Close()
		close(done)
	}()
	s.Close()
	<-done
}

// writeCut writes data to conn in records of the sizes in cuts, cycling through them; it
// may run on a goroutine of its own.
func writeCut(t *testing.T, conn net.Conn, data []byte, cuts []int) {
	for i := 0; len(data) > 0; i++ {
		n := min(cuts[i%len(cuts)], len(data))
		if _, err := conn.Write(data[:n]); err != nil {
			t.Errorf("writing records: %v", err)
			return
		}
		data = data[n:]
	}
}

// heldBytes returns what s's streams and slabs hold: the size of every chunk and of every
// live slab (a segment's bytes are in its slab). The streams must not be receiving.
func heldBytes(s *Session) int64 {
	s.mu.Lock()
	streams := make(map[*Stream]bool)
	for _, st := range s.streams {
		streams[st] = true
	}
	for st := range s.holding {
		streams[st] = true
	}
	s.mu.Unlock()
	var n int64
	for st := range streams {
		st.mu.Lock()
		for _, p := range st.buf.chunks {
			if p.slab == nil {
				n += int64(cap(p.b))
			}
		}
		st.mu.Unlock()
	}
	s.slabs.mu.Lock()
	n += s.slabs.live
	s.slabs.mu.Unlock()
	return n
}

// segments returns how many pieces of st's buffer are segments of a slab.
func segments(st *Stream) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for _, p := range st.buf.chunks {
		if p.slab != nil {
			n++
		}
	}
	return n
}

// TestRecordBoundaries: however the peer cuts its frames into records (a header over
// twelve records, a body over many, many frames in one record, the cuts anywhere), every
// stream receives its data intact and in order, large frames as segments of their records
// and small ones copied, and the budget is whole again once everything is read.
func TestRecordBoundaries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	payload := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	type frame struct {
		id   uint32
		size int
	}
	small := []frame{{1, 5}, {3, 1}, {5, 300}, {1, 0}, {3, 40}, {1, 1}, {5, 2}}
	large := []frame{{1, 5}, {3, 40000}, {5, 1}, {1, 70000}, {3, 100}, {5, 20000},
		{1, 17000}, {3, 65536}, {5, 16384}, {1, 3}, {5, 100000}, {3, 16383}}
	cases := []struct {
		name   string
		frames []frame
		cuts   []int
	}{
		{"one record", large, []int{1 << 20}},
		{"bytes", small, []int{1}},
		{"odd", large, []int{7, 13, 4099, 16390, 65541, 12, 200000}},
		{"frame sized", large, []int{12 + 5, 12 + 40000, 12 + 1}},
		{"random", large, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, peer := newRecordPeer(t, nil)
			var wire []byte
			want := map[uint32][]byte{}
			for _, f := range tc.frames {
				flags := uint16(0)
				if _, seen := want[f.id]; !seen {
					flags = flagSYN
					want[f.id] = []byte{}
				}
				p := payload(f.size)
				want[f.id] = append(want[f.id], p...)
				wire = append(append(wire, hdr(typeData, flags, f.id, uint32(f.size))...), p...)
			}
			cuts := tc.cuts
			if cuts == nil {
				for range 50 {
					cuts = append(cuts, 1+rng.IntN(80000))
				}
			}
			go writeCut(t, peer, wire, cuts)
			var wg sync.WaitGroup
			for range want {
				st, err := s.AcceptStream(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					got := make([]byte, len(want[st.id]))
					if _, err := io.ReadFull(st, got); err != nil {
						t.Errorf("stream %d: %v", st.id, err)
						return
					}
					if !bytes.Equal(got, want[st.id]) {
						t.Errorf("stream %d: the data differs", st.id)
					}
				})
			}
			wg.Wait()
			waitFor(t, "the budget given back", func() bool { return s.MemoryUsed() == 0 && heldBytes(s) == 0 })
		})
	}
}

// TestRecordSlowReader: over secio, a stream whose reader is slow holds segments of the
// records its data came in while other streams move megabytes past it; every byte the
// session holds is reserved, and the budget is whole again at the end.
func TestRecordSlowReader(t *testing.T) {
	a, b := recordPair(t)
	c, s := sessionPair(t, a, b, nil, nil)
	const fast, fastSize, slowSize = 3, 4 << 20, 512 << 10
	type sent struct {
		sum  [32]byte
		slow bool
	}
	sums := make(map[uint32]sent)
	var mu sync.Mutex
	var writers sync.WaitGroup
	for i := range fast + 1 {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := fastSize
		if i == 0 {
			n = slowSize
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(j*7 + i)
		}
		mu.Lock()
		sums[st.id] = sent{sha256.Sum256(data), i == 0}
		mu.Unlock()
		writers.Go(func() {
			if _, err := st.WriteFinal(data); err != nil {
				t.Errorf("write: %v", err)
			}
		})
	}
	var slow *Stream
	var fastDone sync.WaitGroup
	for range fast + 1 {
		st, err := s.AcceptStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		want := sums[st.id]
		mu.Unlock()
		if want.slow {
			slow = st
			continue
		}
		fastDone.Go(func() {
			h := sha256.New()
			if _, err := io.Copy(h, st); err != nil {
				t.Errorf("fast stream: %v", err)
			}
			if !bytes.Equal(h.Sum(nil), want.sum[:]) {
				t.Errorf("fast stream %d: the data differs", st.id)
			}
			st.Close() // its grown window's reservation goes back
		})
	}
	fastDone.Wait()
	// The slow stream has not been read at all: its window's worth waits, in the segments of
	// the records it came in.
	waitFor(t, "the slow stream's window to fill", func() bool { return slow.Buffered() == InitialStreamWindow })
	if segments(slow) == 0 {
		t.Fatal("the slow stream holds no segment: its large frames were copied")
	}
	if used, held := s.MemoryUsed(), heldBytes(s); used < held || held < InitialStreamWindow {
		t.Fatalf("the session holds %d bytes and has %d reserved", held, used)
	}
	h := sha256.New()
	buf := make([]byte, 4<<10)
	for {
		n, err := slow.Read(buf)
		h.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Microsecond)
	}
	if want := sums[slow.id].sum; !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("the slow stream's data differs")
	}
	writers.Wait()
	slow.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.MemoryUsed() != 0 || heldBytes(s) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("at the end: %d bytes reserved, %d held", s.MemoryUsed(), heldBytes(s))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestRecordOneByteFrames: a peer sending its data in 1-byte frames makes a session reading
// records hold and reserve exactly what a session reading a plain connection does (the
// frames are copied into shared chunks), whether each frame is a record or all are one.
func TestRecordOneByteFrames(t *testing.T) {
	const frames = 3000
	var wire []byte
	for i := range frames {
		flags := uint16(0)
		if i == 0 {
			flags = flagSYN
		}
		wire = append(append(wire, hdr(typeData, flags, 1, 1)...), byte(i))
	}
	measure := func(t *testing.T, s *Session, send func()) (used int64) {
		t.Helper()
		go send()
		st, err := s.AcceptStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the frames", func() bool { return st.Buffered() == frames })
		used = s.MemoryUsed()
		if held := heldBytes(s); held != used {
			t.Fatalf("%d bytes reserved for %d held", used, held)
		}
		got := make([]byte, frames)
		if _, err := io.ReadFull(st, got); err != nil {
			t.Fatal(err)
		}
		for i, b := range got {
			if b != byte(i) {
				t.Fatalf("byte %d is %d", i, b)
			}
		}
		waitFor(t, "the budget given back", func() bool { return s.MemoryUsed() == 0 })
		return used
	}
	s, p := newFramePeer(t, nil, true)
	plain := measure(t, s, func() { p.Write(wire) })
	if want := int64((frames + 511) / 512 * 512); plain != want {
		t.Fatalf("plain connection: %d bytes reserved, want %d", plain, want)
	}
	for _, cut := range []int{13, len(wire)} {
		t.Run(fmt.Sprintf("records of %d", cut), func(t *testing.T) {
			s, peer := newRecordPeer(t, nil)
			if used := measure(t, s, func() { writeCut(t, peer, wire, []int{cut}) }); used != plain {
				t.Fatalf("%d bytes reserved, %d over a plain connection", used, plain)
			}
		})
	}
}

// TestRecordSlackCounted: a segment keeps its whole slab alive, and the slab's other bytes
// (headers, frames copied or dropped) stay reserved with it: a peer that pads each record
// around one large frame for a stream nobody reads makes the session hold exactly what it
// has reserved, until the stream is read.
func TestRecordSlackCounted(t *testing.T) {
	s, peer := newRecordPeer(t, nil)
	// Stream 3 is opened and closed at once: what comes for it later is dropped.
	if _, err := peer.Write(hdr(typeData, flagSYN, 3, 0)); err != nil {
		t.Fatal(err)
	}
	closed, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	const records, big, pad = 5, 20000, 100000
	var want int64
	for i := range records {
		flags := uint16(0)
		if i == 0 {
			flags = flagSYN
		}
		rec := append(hdr(typeData, flags, 1, big), make([]byte, big)...)
		rec = append(rec, hdr(typeData, 0, 3, pad)...)
		rec = append(rec, make([]byte, pad)...)
		_, size := slabClass(len(rec) + 1) // the record type's byte (secio.Conn.NextRecord)
		want += int64(size)
		if _, err := peer.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the frames", func() bool { return st.Buffered() == records*big })
	waitFor(t, "the last record parsed", func() bool { return heldBytes(s) == want })
	if n := segments(st); n != records {
		t.Fatalf("%d segments, want %d", n, records)
	}
	if used := s.MemoryUsed(); used != want {
		t.Fatalf("%d bytes of slabs held, %d reserved", want, used)
	}
	if _, err := io.ReadFull(st, make([]byte, records*big)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the budget given back", func() bool { return s.MemoryUsed() == 0 && heldBytes(s) == 0 })
}

// TestRecordSlabRefused: a record whose slab the budget refuses is read through the
// connection's own buffer instead, frame by frame, as from a plain connection; the session
// and its streams go on.
func TestRecordSlabRefused(t *testing.T) {
	s, peer := newRecordPeer(t, &Config{MaxSessionMemory: InitialStreamWindow + chunkSize})
	if _, err := peer.Write(hdr(typeData, flagSYN, 3, 0)); err != nil {
		t.Fatal(err)
	}
	closed, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	// One record of 300 KiB, more than the session's budget: a 100-byte frame for stream
	// 1, 300 KiB dropped, and a header whose body comes in the next record.
	rec := append(hdr(typeData, flagSYN, 1, 100), bytes.Repeat([]byte{'a'}, 100)...)
	rec = append(rec, hdr(typeData, 0, 3, 300<<10)...)
	rec = append(rec, make([]byte, 300<<10)...)
	rec = append(rec, hdr(typeData, 0, 1, 5)...)
	if _, err := peer.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write([]byte("bcdef")); err != nil {
		t.Fatal(err)
	}
	st, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 105)
	if _, err := io.ReadFull(st, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(bytes.Repeat([]byte{'a'}, 100))+"bcdef" {
		t.Fatalf("got %q", got)
	}
	waitFor(t, "the budget given back", func() bool { return s.MemoryUsed() == 0 && heldBytes(s) == 0 })
}

// TestRecordSegmentOutlivesOthers: a record split into two segments, one for a stream
// nobody reads and one whose segment goes away (read, closed here, or reset by the peer;
// or the first of two segments of one stream, read): the unread segment keeps the whole
// slab alive, and all of it stays reserved until that segment goes too. A peer could
// otherwise pin up to eight times what a stream it never lets anyone read is charged (a
// segment may be an eighth of its slab), by sending the rest of each record to a stream
// it resets.
func TestRecordSegmentOutlivesOthers(t *testing.T) {
	const slow, other = 40000, 200000
	for _, how := range []string{"read", "closed", "reset by the peer", "same stream"} {
		t.Run(how, func(t *testing.T) {
			s, peer := newRecordPeer(t, nil)
			if how == "same stream" {
				// Stream 1's first segment is read, its second is not.
				rec := append(hdr(typeData, flagSYN, 1, other), make([]byte, other)...)
				rec = append(rec, hdr(typeData, 0, 1, slow)...)
				rec = append(rec, make([]byte, slow)...)
				_, size := slabClass(len(rec) + 1)
				if _, err := peer.Write(rec); err != nil {
					t.Fatal(err)
				}
				st, err := s.AcceptStream(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the frames", func() bool { return st.Buffered() == other+slow })
				if segments(st) != 2 {
					t.Fatalf("%d segments, want 2", segments(st))
				}
				if _, err := io.ReadFull(st, make([]byte, other)); err != nil {
					t.Fatal(err)
				}
				if held, used := heldBytes(s), s.MemoryUsed(); held != int64(size) || used < held {
					t.Fatalf("the session holds %d bytes (a %d-byte slab) and has %d reserved", held, size, used)
				}
				if _, err := io.ReadFull(st, make([]byte, slow)); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the budget given back", func() bool { return s.MemoryUsed() == 0 && heldBytes(s) == 0 })
				return
			}
			rec := append(hdr(typeData, flagSYN, 1, slow), make([]byte, slow)...)
			rec = append(rec, hdr(typeData, flagSYN, 3, other)...)
			rec = append(rec, make([]byte, other)...)
			_, size := slabClass(len(rec) + 1)
			if slow < size/shareFraction {
				t.Fatalf("a %d-byte frame is not shared from a %d-byte slab", slow, size)
			}
			if _, err := peer.Write(rec); err != nil {
				t.Fatal(err)
			}
			sts := map[uint32]*Stream{}
			for range 2 {
				st, err := s.AcceptStream(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				sts[st.id] = st
			}
			a, b := sts[1], sts[3]
			waitFor(t, "the frames", func() bool { return a.Buffered() == slow && b.Buffered() == other })
			if segments(a) != 1 || segments(b) != 1 {
				t.Fatalf("%d and %d segments, want one each", segments(a), segments(b))
			}
			switch how {
			case "read":
				if _, err := io.ReadFull(b, make([]byte, other)); err != nil {
					t.Fatal(err)
				}
			case "closed":
				b.Close()
			case "reset by the peer":
				if _, err := peer.Write(hdr(typeWindowUpdate, flagRST, 3, 0)); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the reset", func() bool { return segments(b) == 0 })
			}
			waitFor(t, "the other segment gone", func() bool { return segments(b) == 0 })
			if held, used := heldBytes(s), s.MemoryUsed(); held != int64(size) || used < held {
				t.Fatalf("the session holds %d bytes (a %d-byte slab) and has %d reserved", held, size, used)
			}
			if _, err := io.ReadFull(a, make([]byte, slow)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the budget given back", func() bool { return s.MemoryUsed() == 0 && heldBytes(s) == 0 })
		})
	}
}

// TestRecordParsedAfterClose: a Read that held the read turn returns with the rest of its
// record unparsed (a frame for the session behind its own), the turn stays free, and the
// session closes: the record's slab goes back at once, not when the session is collected.
func TestRecordParsedAfterClose(t *testing.T) {
	c, peer := handWrittenPeer(t, handPeers[1].new)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	handOverWritten(t, c, st, peer)
	done := blockedRead(t, st)
	rec := append(hdr(typeData, 0, st.id, 1), 'x')
	rec = append(rec, hdr(typePing, flagSYN, 0, 7)...)
	if _, err := peer.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, "Read", done); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the turn left", func() bool { return turnFree(c) })
	c.slabs.mu.Lock()
	live := c.slabs.live
	c.slabs.mu.Unlock()
	if live == 0 {
		t.Skip("the record was parsed whole before the Read returned")
	}
	closeBoth(c, peer)
	c.slabs.mu.Lock()
	live = c.slabs.live
	c.slabs.mu.Unlock()
	if live != 0 {
		t.Fatalf("a closed session keeps %d bytes of slabs alive", live)
	}
}
