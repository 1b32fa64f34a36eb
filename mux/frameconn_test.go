package mux

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

func hdr(typ uint8, flags uint16, id, length uint32) []byte {
	h := []byte{protoVersion, typ}
	h = binary.BigEndian.AppendUint16(h, flags)
	h = binary.BigEndian.AppendUint32(h, id)
	return binary.BigEndian.AppendUint32(h, length)
}

// recConn records each Write to the underlying connection.
type recConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *recConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	return len(p), nil
}

func (c *recConn) Close() error { return nil }

func (c *recConn) writesSoFar() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

func (c *recConn) take() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.writes
	c.writes = nil
	return w
}

// newTestFrameConn returns a frameConn over a recorder. Its timer for held frames waits an
// hour, so that what a test sees written does not depend on how fast the machine runs it;
// TestEarlyFlush tests the timer.
func newTestFrameConn(maxHold int) (*frameConn, *recConn) {
	rc := &recConn{}
	fc := newFrameConn(rc, newTracker(100, 100), maxHold)
	fc.earlyDelay = time.Hour
	return fc, rc
}

func TestCoalesceWrites(t *testing.T) {
	fc, rc := newTestFrameConn(1024 + FrameHeaderSize)
	body := bytes.Repeat([]byte("b"), 1000)
	data := hdr(typeData, 0, 1, uint32(len(body)))

	// header then body: one write
	fc.Write(data)
	if w := rc.take(); len(w) != 0 {
		t.Fatalf("header of a data frame written alone: %d writes", len(w))
	}
	fc.Write(body)
	if w := rc.take(); len(w) != 1 || !bytes.Equal(w[0], append(bytes.Clone(data), body...)) {
		t.Fatalf("data frame: %d writes", len(w))
	}

	// body in pieces, header split too: still one write, at completion
	fc.Write(data[:5])
	fc.Write(data[5:])
	fc.Write(body[:1])
	fc.Write(body[1:600])
	if w := rc.take(); len(w) != 0 {
		t.Fatalf("incomplete frame written: %d writes", len(w))
	}
	fc.Write(body[600:])
	if w := rc.take(); len(w) != 1 || len(w[0]) != FrameHeaderSize+len(body) {
		t.Fatalf("pieced frame: %d writes", len(w))
	}

	// other header-only frames go out at once
	for _, h := range [][]byte{
		hdr(typeWindowUpdate, 0, 3, 1<<20),
		hdr(typeWindowUpdate, flagSYN|flagFIN, 3, 0),
		hdr(2, flagSYN, 0, 7), // ping
		hdr(3, 0, 0, 0),       // go away
		hdr(typeData, flagFIN, 1, 0),
	} {
		fc.Write(h)
		if w := rc.take(); len(w) != 1 || !bytes.Equal(w[0], h) {
			t.Fatalf("header-only frame %x: %d writes", h, len(w))
		}
	}

	// a stream's opening and acceptance travel with the next frame
	syn, ack := hdr(typeWindowUpdate, flagSYN, 5, 1<<20), hdr(typeWindowUpdate, flagACK, 4, 1<<20)
	fc.Write(syn)
	fc.Write(ack)
	if w := rc.take(); len(w) != 0 {
		t.Fatalf("opening written alone: %d writes", len(w))
	}
	fc.Write(data)
	fc.Write(body)
	want := append(append(append(bytes.Clone(syn), ack...), data...), body...)
	if w := rc.take(); len(w) != 1 || !bytes.Equal(w[0], want) {
		t.Fatalf("opening, acceptance and data: %d writes", len(w))
	}
	fc.Write(syn)
	fc.Write(hdr(typeWindowUpdate, 0, 5, 100))
	if w := rc.take(); len(w) != 1 || len(w[0]) != 2*FrameHeaderSize {
		t.Fatalf("opening and window update: %d writes", len(w))
	}

	// whole frames in one Write: each frame is written whole
	two := append(append(bytes.Clone(data), body...), hdr(typeWindowUpdate, 0, 1, 5)...)
	fc.Write(two)
	if w := rc.take(); len(w) != 2 || len(w[0]) != FrameHeaderSize+len(body) || len(w[1]) != FrameHeaderSize {
		t.Fatalf("two frames in one Write: %d writes", len(w))
	}

	// a frame larger than the coalescing limit passes through
	bigBody := make([]byte, 2000)
	fc.Write(hdr(typeData, 0, 1, uint32(len(bigBody))))
	fc.Write(bigBody[:1500])
	fc.Write(bigBody[1500:])
	if w := rc.take(); len(w) != 3 || len(w[0]) != FrameHeaderSize {
		t.Fatalf("oversize frame: %d writes", len(w))
	}
	// the stream of bytes is intact and framing resumes after it
	fc.Write(data)
	fc.Write(body)
	if w := rc.take(); len(w) != 1 {
		t.Fatalf("frame after passthrough: %d writes", len(w))
	}
}

func TestQueuedResetWaitsForFrameBoundary(t *testing.T) {
	fc, rc := newTestFrameConn(64)
	rst := appendRST(nil, 9)

	// idle: the flusher writes it
	fc.queueRST(9)
	fc.wg.Wait()
	if w := rc.take(); len(w) != 1 || !bytes.Equal(w[0], rst) {
		t.Fatalf("idle reset: %x", w)
	}

	// while a passthrough frame is on the wire, it waits for the frame's end
	fc.Write(hdr(typeData, 0, 1, 100))
	fc.Write(make([]byte, 50))
	fc.queueRST(9)
	fc.wg.Wait()
	if w := rc.take(); len(w) != 2 {
		t.Fatalf("reset written inside a frame: %d writes", len(w))
	}
	fc.Write(make([]byte, 50))
	if w := rc.take(); len(w) != 2 || len(w[0]) != 50 || !bytes.Equal(w[1], rst) {
		t.Fatalf("reset after frame: %x", w)
	}

	// while a frame is held, it waits too, and precedes the next frame
	fc.Write(hdr(typeData, 0, 1, 10))
	fc.queueRST(9)
	fc.wg.Wait()
	if w := rc.take(); len(w) != 0 {
		t.Fatalf("reset written while a frame is held: %d writes", len(w))
	}
	fc.Write(make([]byte, 10))
	if w := rc.take(); len(w) != 2 || len(w[0]) != 22 || !bytes.Equal(w[1], rst) {
		t.Fatalf("held frame then reset: %x", w)
	}
	fc.Close()
	fc.queueRST(9) // ignored after Close
	fc.wait()
	if w := rc.take(); len(w) != 0 {
		t.Fatal("reset written after Close")
	}
}

// chunkConn returns reads in random small pieces.
type chunkConn struct {
	net.Conn
	mu  sync.Mutex
	rng *rand.Rand
}

func (c *chunkConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	n := 1 + c.rng.IntN(20)
	c.mu.Unlock()
	return c.Conn.Read(p[:min(n, len(p))])
}

func TestInspectSplitReads(t *testing.T) {
	// A stream of frames: 4 SYNs (limit 2), data, FINs, read through
	// arbitrary cuts and buffer sizes.
	var in []byte
	in = append(in, hdr(typeWindowUpdate, flagSYN, 1, 0)...)
	in = append(in, hdr(typeData, flagSYN, 3, 5)...)
	in = append(in, "hello"...)
	in = append(in, hdr(typeWindowUpdate, flagSYN, 5, 0)...)
	in = append(in, hdr(typeData, flagSYN|flagFIN, 7, 3)...)
	in = append(in, "abc"...)
	in = append(in, hdr(typeData, flagRST, 1, 0)...)
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1)) // used by the writer goroutine only
		bufSize := 1 + rng.IntN(40)
		a, b := net.Pipe()
		go func() {
			rest := in
			for len(rest) > 0 {
				n := min(len(rest), 1+rng.IntN(15))
				a.Write(rest[:n])
				rest = rest[n:]
			}
			a.Close()
		}()
		rc := &recConn{Conn: b}
		tr := newTracker(2, 10)
		fc := newFrameConn(rc, tr, 1<<10)
		var out []byte
		for {
			buf := make([]byte, bufSize)
			n, err := fc.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		fc.wg.Wait()
		b.Close()
		want := bytes.Clone(in)
		// streams 5 and 7 exceed the limit of 2: their SYN flags are cleared
		binary.BigEndian.PutUint16(want[2*FrameHeaderSize+5+2:], 0)
		binary.BigEndian.PutUint16(want[3*FrameHeaderSize+5+2:], flagFIN)
		if !bytes.Equal(out, want) {
			t.Fatalf("seed %d, buffer %d: delivered\n%x\nwant\n%x", seed, bufSize, out, want)
		}
		var resets []byte
		for _, w := range rc.take() {
			resets = append(resets, w...)
		}
		if !bytes.Equal(resets, append(appendRST(nil, 5), appendRST(nil, 7)...)) {
			t.Fatalf("seed %d: resets %x", seed, resets)
		}
		if n := tr.count(); n != 1 { // stream 1 was reset by the peer, 3 lives
			t.Fatalf("seed %d: %d live streams", seed, n)
		}
	}
}

// frameCheckConn verifies that every Write carries exactly one whole frame and
// counts frames by type.
type frameCheckConn struct {
	net.Conn
	mu         sync.Mutex
	writes     int
	maxWrite   int
	dataFrames int // data frames with a body
	headerOnly int
	bad        []string
}

// Write checks that p is whole frames: stream openings and acceptances
// (held for the next frame, or sent on their own by a Read or the timer),
// then at most one other frame, last.
func (c *frameCheckConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.maxWrite = max(c.maxWrite, len(p))
	for rest := p; len(rest) > 0; {
		if len(rest) < FrameHeaderSize || len(rest) < FrameHeaderSize+bodyLen(rest) {
			c.bad = append(c.bad, fmt.Sprintf("write of %d bytes ends inside a frame", len(p)))
			break
		}
		n := FrameHeaderSize + bodyLen(rest)
		if !isEarly(rest) && len(rest) > n {
			c.bad = append(c.bad, fmt.Sprintf("write of %d bytes has frames after a frame that is not an opening", len(p)))
		}
		if n > FrameHeaderSize {
			c.dataFrames++
		} else {
			c.headerOnly++
		}
		rest = rest[n:]
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *frameCheckConn) counts() (writes, data, headerOnly int, bad []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.dataFrames, c.headerOnly, c.bad
}

// TestFrameCount checks on the wire that N stream writes make N data frames
// in exactly N connection writes, the stream's opening traveling with the
// first, and that every other frame is one write.
func TestFrameCount(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		a, b := newPair()
		ca, cb := &frameCheckConn{Conn: a}, &frameCheckConn{Conn: b}
		cfg := &Config{KeepAliveInterval: -1}
		c, s := sessionPair(t, ca, cb, cfg, cfg)
		const n = 200
		done := make(chan error, 1)
		go func() {
			st, err := s.AcceptStream(context.Background())
			if err != nil {
				done <- err
				return
			}
			// read everything: the server sends window updates as it goes
			_, err = io.Copy(io.Discard, st)
			if err == nil {
				err = st.Close()
			}
			done <- err
		}()
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, 8<<10) // 200 x 8 KiB = 1.6 MiB, more than one window
		for range n {
			if _, err := st.Write(msg); err != nil {
				t.Fatal(err)
			}
		}
		st.CloseWrite()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		waitFor(t, "stream to close", func() bool { return c.NumStreams() == 0 })
		writes, data, headerOnly, bad := ca.counts()
		if len(bad) > 0 {
			t.Fatalf("client writes not one frame each: %q", bad[:min(len(bad), 5)])
		}
		if data != n {
			t.Fatalf("client sent %d data frames for %d writes", data, n)
		}
		// SYN (a window update) and FIN; the SYN travels with the first data frame, or alone
		// if the writer stalled past the hold timer.
		if (writes != data+1 && writes != data+2) || headerOnly != 2 {
			t.Fatalf("client: %d writes, %d data frames, %d header-only frames", writes, data, headerOnly)
		}
		swrites, sdata, sheader, sbad := cb.counts()
		if len(sbad) > 0 || sdata != 0 || swrites != sheader || sheader < 2 {
			t.Fatalf("server: %d writes, %d data frames, %d header-only frames, bad %q", swrites, sdata, sheader, sbad)
		}
		t.Logf("client: %d writes for %d data frames + %d other; server: %d window updates and closes", writes, data, headerOnly, sheader)
	})
}

// TestSessionSplitReads runs echo traffic and the stream limit over a
// connection whose reads return a few bytes at a time.
func TestSessionSplitReads(t *testing.T) {
	a, b := net.Pipe()
	sa := &chunkConn{Conn: a, rng: rand.New(rand.NewPCG(1, 2))}
	sb := &chunkConn{Conn: b, rng: rand.New(rand.NewPCG(3, 4))}
	c, s := sessionPair(t, sa, sb, nil, &Config{MaxStreams: 8})
	wait := echo(t, s)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			msg := bytes.Repeat([]byte{byte(i)}, 1000*i+1)
			if err := roundTrip(context.Background(), c, msg); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	waitFor(t, "streams to be freed", func() bool { return s.NumStreams() == 0 })
	c.Close()
	s.Close()
	wait()
}

func TestManyRefusals(t *testing.T) {
	// A peer opening streams far beyond the limit gets them all reset, and
	// memory stays bounded by the limit.
	a, b := tcpPair(t)
	c, s := sessionPair(t, a, b, nil, &Config{MaxStreams: 2, AcceptBacklog: 2})
	var streams []*Stream
	for range 500 {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
		if s.NumStreams() > 2 {
			t.Fatalf("server holds %d streams", s.NumStreams())
		}
	}
	for _, st := range streams[2:] {
		st.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := st.Read(make([]byte, 1)); err != ErrStreamReset {
			t.Fatalf("Read = %v", err)
		}
	}
	waitFor(t, "client to count only live streams", func() bool { return c.NumStreams() == 2 })
}

// TestWritesFitMaxFrameSize checks that with the same configuration on both
// sides, bulk transfers never write more than MaxFrameSize at once and every
// write is one frame: what the secure connection's frame limit relies on.
func TestWritesFitMaxFrameSize(t *testing.T) {
	for _, cfg := range []*Config{nil, {MaxStreamWindow: MinStreamWindow}} {
		a, b := tcpPair(t)
		ca, cb := &frameCheckConn{Conn: a}, &frameCheckConn{Conn: b}
		c, s := sessionPair(t, ca, cb, cfg, cfg)
		wait := echo(t, s)
		msg := make([]byte, 6<<20)
		if err := roundTrip(context.Background(), c, msg); err != nil {
			t.Fatal(err)
		}
		c.Close()
		s.Close()
		wait()
		for _, fc := range []*frameCheckConn{ca, cb} {
			writes, data, _, bad := fc.counts()
			if len(bad) > 0 || fc.maxWrite > MaxFrameSize(cfg) || data < (6<<20)/MaxFrameSize(cfg) {
				t.Fatalf("window %d: %d writes, %d data frames, largest write %d > %d, bad %q",
					MaxFrameSize(cfg)-FrameHeaderSize, writes, data, fc.maxWrite, MaxFrameSize(cfg), bad)
			}
			t.Logf("window %d: %d writes, %d data frames, largest write %d", MaxFrameSize(cfg)-FrameHeaderSize, writes, data, fc.maxWrite)
		}
	}
}

func TestBufClasses(t *testing.T) {
	for _, n := range []int{13, 100, 4096 + 12, 4096 + 13, 1<<20 + 12, 16<<20 + 12, 16<<20 + 13} {
		p := getBuf(n)
		if cap(*p) < n {
			t.Fatalf("getBuf(%d) has capacity %d", n, cap(*p))
		}
		if n == 1<<20+12 && cap(*p) != n {
			t.Fatalf("a full-window frame takes a buffer of %d bytes", cap(*p))
		}
		putBuf(p)
	}
}

// TestEarlyFlush: a held opening goes out when a Read is about to wait, a held acceptance
// does not (the opener does not wait for it); the timer sends what nothing else sent.
func TestEarlyFlush(t *testing.T) {
	fc, rc := newTestFrameConn(1024)
	syn, ack := hdr(typeWindowUpdate, flagSYN, 7, 1<<20), hdr(typeWindowUpdate, flagACK, 8, 1<<20)

	fc.Write(ack)
	fc.flushOpening()
	if w := rc.take(); len(w) != 0 {
		t.Fatalf("a Read sent a held acceptance: %d writes", len(w))
	}
	fc.Write(syn)
	fc.flushOpening()
	if w := rc.take(); len(w) != 1 || !bytes.Equal(w[0], append(bytes.Clone(ack), syn...)) {
		t.Fatalf("a Read did not send the held opening: %q", w)
	}

	// The timer: on a frameConn of its own, with the real delay.
	fc.Close()
	fc.wait()
	fc, rc = newTestFrameConn(1024)
	fc.earlyDelay = earlyFlushDelay
	start := time.Now()
	fc.Write(ack)
	for len(rc.writesSoFar()) == 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the timer never sent the held acceptance")
		}
		time.Sleep(100 * time.Microsecond)
	}
	if w := rc.take(); len(w) != 1 || !bytes.Equal(w[0], ack) {
		t.Fatalf("timer: %q after %v", w, time.Since(start))
	}

	// More held frames than fit: the oldest go out, order kept.
	var all []byte
	for i := range maxEarly + 1 {
		h := hdr(typeWindowUpdate, flagSYN, uint32(11+2*i), 0)
		all = append(all, h...)
		fc.Write(h)
	}
	fc.flushOpening()
	if got := bytes.Join(rc.take(), nil); !bytes.Equal(got, all) {
		t.Fatalf("overflowing held frames: wire %x, want %x", got, all)
	}

	// Close stops the timer (goleak in TestMain checks its goroutine).
	fc.Write(syn)
	fc.Close()
	fc.wait()
}

// TestBacklogFreedByACK: the ACK yamux sends as it hands a stream to AcceptStream frees its
// place in the backlog at once; the peer, which may open another stream as soon as it sees
// the ACK, must not be refused because AcceptStream has not returned yet.
func TestBacklogFreedByACK(t *testing.T) {
	tr := newTracker(100, 2)
	for _, id := range []uint32{2, 4} {
		if admit, fresh := tr.admitInbound(id); !admit || !fresh {
			t.Fatalf("SYN %d refused under the backlog", id)
		}
	}
	if admit, _ := tr.admitInbound(6); admit {
		t.Fatal("SYN beyond the backlog admitted")
	}
	tr.frame(hdr(typeWindowUpdate, flagACK, 2, 0), true) // yamux accepts stream 2
	if admit, _ := tr.admitInbound(8); !admit {
		t.Fatal("SYN refused after an ACK freed a place in the backlog")
	}
	tr.accepted(2) // AcceptStream returns: nothing more to free
	if admit, _ := tr.admitInbound(10); admit {
		t.Fatal("accepted() freed the place a second time")
	}
}
