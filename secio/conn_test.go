package secio

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/cipher/tea"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestRoundTripAllSuites(t *testing.T) {
	for _, tr := range transports {
		for _, kex := range []KeyExchange{X25519, P256} {
			for _, s := range []aead.Suite{aead.AES128GCM, aead.AES256GCM, aead.ChaCha20Poly1305} {
				t.Run(fmt.Sprintf("%s/%s/%s", tr.name, kex, s), func(t *testing.T) {
					ca, cb := testConfig("a"), testConfig("b")
					ca.Ciphers = []aead.Suite{s}
					ca.KeyExchanges = []KeyExchange{kex}
					cb.KeyExchanges = []KeyExchange{P256, X25519}
					sa, sb := securePair(t, tr, ca, cb)
					if sa.Suite() != s || sb.Suite() != s {
						t.Fatalf("suite %s/%s, want %s", sa.Suite(), sb.Suite(), s)
					}
					if sa.KeyExchange() != kex || sb.KeyExchange() != kex {
						t.Fatalf("kex %s/%s, want %s", sa.KeyExchange(), sb.KeyExchange(), kex)
					}
					if sa.RemotePeer() != cb.PrivateKey.PeerID() || sb.RemotePeer() != ca.PrivateKey.PeerID() {
						t.Fatal("remote peer IDs wrong")
					}
					if sa.LocalPeer() != ca.PrivateKey.PeerID() || !sa.Secure() || !sb.RemotePublicKey().Equal(ca.PrivateKey.Public()) {
						t.Fatal("local identity wrong")
					}
					exchangeData(t, sa, sb, []int{0, 1, 15, 16, 17, 1000, 64 << 10, 3<<20 + 7})
				})
			}
		}
	}
}

// exchangeData writes each size in both directions at once and checks the
// bytes read.
func exchangeData(t *testing.T, a, b *Conn, sizes []int) {
	t.Helper()
	for _, n := range sizes {
		msgA := make([]byte, n)
		msgB := make([]byte, n)
		rand.Read(msgA)
		rand.Read(msgB)
		errc := make(chan error, 2)
		go func() { _, err := a.Write(msgA); errc <- err }()
		go func() { _, err := b.Write(msgB); errc <- err }()
		gotB, err := readN(b, n)
		if err != nil {
			t.Fatalf("size %d: b read: %v", n, err)
		}
		gotA, err := readN(a, n)
		if err != nil {
			t.Fatalf("size %d: a read: %v", n, err)
		}
		for range 2 {
			if err := <-errc; err != nil {
				t.Fatalf("size %d: write: %v", n, err)
			}
		}
		if !bytes.Equal(gotB, msgA) || !bytes.Equal(gotA, msgB) {
			t.Fatalf("size %d: data corrupted", n)
		}
	}
}

func TestOneFramePerWrite(t *testing.T) {
	a, b := testutil.TCPPair(t)
	ca := &probeConn{Conn: a}
	cfgA, cfgB := testConfig("a"), testConfig("b")
	cfgA.MaxFrameSize = 4096
	sa, sb, errA, errB := handshakePair(ca, b, cfgA, cfgB)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	defer sa.Close()
	defer sb.Close()
	base := int(ca.writes.Load())
	for _, n := range []int{1, 12, 100, 4096} {
		if _, err := sa.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		if got := int(ca.writes.Load()) - base; got != 1 {
			t.Fatalf("Write(%d) made %d writes, want 1", n, got)
		}
		base = int(ca.writes.Load())
		if _, err := readN(sb, n); err != nil {
			t.Fatal(err)
		}
	}
	// Larger than the frame size: split into ceil(n/4096) frames.
	go sa.Write(make([]byte, 4096*3+1))
	if _, err := readN(sb, 4096*3+1); err != nil {
		t.Fatal(err)
	}
	if got := int(ca.writes.Load()) - base; got != 4 {
		t.Fatalf("Write(12289) made %d writes, want 4", got)
	}
	// The server's larger MaxFrameSize is capped by the client's 4096.
	if sb.MaxFrameSize() != 4096 || sa.MaxFrameSize() != 4096 {
		t.Fatalf("send limits %d/%d, want 4096", sa.out.maxLen, sb.out.maxLen)
	}
}

func TestSmallReadsAndManyFrames(t *testing.T) {
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	var want bytes.Buffer
	go func() {
		for i := range 2000 {
			msg := []byte(fmt.Sprintf("frame %d;", i))
			sa.Write(msg)
		}
	}()
	for i := range 2000 {
		fmt.Fprintf(&want, "frame %d;", i)
	}
	got := make([]byte, 0, want.Len())
	buf := make([]byte, 3) // smaller than every frame
	for len(got) < want.Len() {
		n, err := sb.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("stream corrupted")
	}
}

func TestConcurrentReadWrite(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			sa, sb := securePair(t, tr, testConfig("a"), testConfig("b"))
			const total = 4 << 20
			var wg sync.WaitGroup
			check := func(c *Conn, seed byte) {
				defer wg.Done()
				buf := make([]byte, 7777)
				var pos int
				for pos < total {
					n, err := c.Read(buf)
					if err != nil {
						t.Errorf("read: %v", err)
						return
					}
					for i := range n {
						if buf[i] != byte(pos+i)^seed {
							t.Errorf("byte %d wrong", pos+i)
							return
						}
					}
					pos += n
				}
			}
			send := func(c *Conn, seed byte) {
				defer wg.Done()
				chunk := make([]byte, 10007)
				for pos := 0; pos < total; {
					n := min(len(chunk), total-pos)
					for i := range n {
						chunk[i] = byte(pos+i) ^ seed
					}
					if _, err := c.Write(chunk[:n]); err != nil {
						t.Errorf("write: %v", err)
						return
					}
					pos += n
				}
			}
			wg.Add(4)
			go send(sa, 1)
			go send(sb, 2)
			go check(sb, 1)
			go check(sa, 2)
			wg.Wait()
		})
	}
}

func TestCloseIdempotentAndErrors(t *testing.T) {
	sa, sb := securePair(t, transports[0], testConfig("a"), testConfig("b"))
	// The peer reads the close record: a clean EOF.
	peer := make(chan error, 1)
	go func() {
		_, err := sb.Read(make([]byte, 1))
		peer <- err
	}()
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sa.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if _, err := sa.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := <-peer; err != io.EOF {
		t.Fatalf("peer Read: %v, want io.EOF", err)
	}
}

func TestReadDeadlineRecoverable(t *testing.T) {
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	sb.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := sb.Read(make([]byte, 10))
	if !isTimeout(err) {
		t.Fatalf("Read: %v, want timeout", err)
	}
	// Half a frame arrives, then the deadline passes, then the rest.
	raw := sa.NetConn()
	sa.out.mu.Lock()
	frame := sealForTest(t, sa, []byte("hello, world"))
	sa.out.mu.Unlock()
	raw.Write(frame[:7])
	sb.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := sb.Read(make([]byte, 10)); !isTimeout(err) {
		t.Fatalf("Read: %v, want timeout", err)
	}
	raw.Write(frame[7:])
	sb.SetReadDeadline(time.Time{})
	got, err := readN(sb, 12)
	if err != nil || string(got) != "hello, world" {
		t.Fatalf("after timeout: %q, %v", got, err)
	}
}

// sealForTest builds the next data frame c would send for p, advancing
// c's counter (the caller holds c.out.mu).
func sealForTest(t testing.TB, c *Conn, p []byte) []byte {
	return sealTypeForTest(t, c, p, recordData)
}

// sealTypeForTest builds the next frame of record type typ.
func sealTypeForTest(t testing.TB, c *Conn, p []byte, typ byte) []byte {
	t.Helper()
	nonce, err := c.out.nextNonce()
	if err != nil {
		t.Fatal(err)
	}
	pt := append(bytes.Clone(p), typ)
	f := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(pt)+16), uint32(len(pt)+16))
	return c.out.aead.Seal(f, nonce, pt, f[:4])
}

// TestNonce: a record's nonce is the key's IV with the sequence number XORed
// into its last 8 bytes; the sequence number starts at zero with each key and
// fails, never wraps, after its last value.
func TestNonce(t *testing.T) {
	var k recordKey
	k.iv = [nonceSize]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	for seq, want := range [][nonceSize]byte{
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13},
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14},
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15},
	} {
		if n, err := k.nextNonce(); err != nil || !bytes.Equal(n, want[:]) {
			t.Fatalf("sequence number %d: nonce %x, %v; want %x", seq, n, err, want)
		}
	}
	k.seq = 1<<32 | 0x0f
	if n, _ := k.nextNonce(); !bytes.Equal(n, []byte{1, 2, 3, 4, 5, 6, 7, 9, 9, 10, 11, 3}) {
		t.Fatalf("carry across 32 bits: %x", n)
	}
	k.seq = 1<<64 - 2
	if _, err := k.nextNonce(); err != nil {
		t.Fatal(err)
	}
	if n, err := k.nextNonce(); err != nil || !bytes.Equal(n, []byte{1, 2, 3, 4, 0xfa, 0xf9, 0xf8, 0xf7, 0xf6, 0xf5, 0xf4, 0xf3}) {
		t.Fatalf("last nonce %x, %v", n, err)
	}
	if _, err := k.nextNonce(); !errors.Is(err, ErrNonceExhausted) {
		t.Fatalf("after the last sequence number: %v", err)
	}
	// A new key starts again at zero.
	if err := k.install(aead.AES128GCM, &[secretSize]byte{1}); err != nil {
		t.Fatal(err)
	}
	if n, err := k.nextNonce(); err != nil || !bytes.Equal(n, k.iv[:]) {
		t.Fatalf("first nonce of a new key %x, %v; want its IV %x", n, err, k.iv)
	}
}

func TestNonceExhaustedEndsConn(t *testing.T) {
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	sa.out.seq = 1<<64 - 1
	if _, err := sa.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Write([]byte("one more")); !errors.Is(err, ErrNonceExhausted) {
		t.Fatalf("Write: %v", err)
	}
	if _, err := sa.Write([]byte("again")); !errors.Is(err, ErrNonceExhausted) {
		t.Fatalf("sticky: %v", err)
	}
	sb.in.seq = 1<<64 - 1
	if got, err := readN(sb, 4); err != nil || string(got) != "last" {
		t.Fatalf("read: %q %v", got, err)
	}
}

func TestFlippedBitInDataFrame(t *testing.T) {
	const msg = "attack at dawn, bring coffee"
	frameLen := 4 + len(msg) + 1 + 16
	for off := range frameLen {
		for _, bit := range []byte{0x01, 0x80} {
			sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
			sa.out.mu.Lock()
			f := sealForTest(t, sa, []byte(msg))
			sa.out.mu.Unlock()
			f[off] ^= bit
			go func() {
				sa.NetConn().Write(f)
				sa.NetConn().(*net.TCPConn).CloseWrite()
			}()
			buf := make([]byte, 100)
			n, err := sb.Read(buf)
			if n != 0 || err == nil {
				t.Fatalf("offset %d: Read %d bytes, %v", off, n, err)
			}
			if off >= 4 && !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("offset %d: %v, want ErrAuthFailed", off, err)
			}
			// Sticky: later reads return the error too.
			if _, err2 := sb.Read(buf); err2 == nil {
				t.Fatalf("offset %d: second Read succeeded", off)
			}
		}
	}
}

func TestOversizeLengthPrefix(t *testing.T) {
	for _, prefix := range [][]byte{{0, 0, 0x08, 0x12}, {0xff, 0xff, 0xff, 0xff}} {
		a, b := testutil.TCPPair(t)
		rb := &probeConn{Conn: b}
		cfgB := testConfig("b")
		cfgB.MaxFrameSize = 2048
		sa, sb, errA, errB := handshakePair(a, rb, testConfig("a"), cfgB)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		rb.maxRead.Store(0) // the handshake's hellos do not fit the small array
		// 2048+17 (the record type and tag) is accepted, one more is not; no buffer is borrowed for
		// it: every read went into the Conn's own small array.
		sa.NetConn().Write(prefix)
		_, err := sb.Read(make([]byte, 10))
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("prefix %x: Read: %v, want ErrFrameTooLarge", prefix, err)
		}
		if m := rb.maxRead.Load(); m > smallRead {
			t.Fatalf("prefix %x: read into a %d-byte buffer", prefix, m)
		}
		sa.Close()
		sb.Close()
	}
}

func TestTruncatedFrame(t *testing.T) {
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	sa.out.mu.Lock()
	f := sealForTest(t, sa, []byte("0123456789"))
	sa.out.mu.Unlock()
	sa.NetConn().Write(f[:len(f)-1])
	sa.NetConn().(*net.TCPConn).CloseWrite()
	_, err := sb.Read(make([]byte, 100))
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("Read: %v, want io.ErrUnexpectedEOF", err)
	}
	// Cut inside the length prefix.
	sa2, sb2 := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	sa2.NetConn().Write([]byte{0, 0})
	sa2.NetConn().(*net.TCPConn).CloseWrite()
	if _, err := sb2.Read(make([]byte, 100)); err != io.ErrUnexpectedEOF {
		t.Fatalf("Read: %v, want io.ErrUnexpectedEOF", err)
	}
}

// allocPair returns two AES-128-GCM Conns over in-memory buffers for a test that counts
// allocations; it skips under the race detector, where sync.Pool drops items at random.
func allocPair(t *testing.T) (a, b *Conn) {
	t.Helper()
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	x, y := newBufPair()
	return rawPair(t, x, y, aead.AES128GCM)
}

func TestReadSteadyStateAllocs(t *testing.T) {
	a, b := allocPair(t)
	msg := make([]byte, 16<<10)
	buf := make([]byte, 16<<10)
	small := make([]byte, 100)
	// Warm up buffers.
	a.Write(msg)
	io.ReadFull(b, buf)
	allocs := testing.AllocsPerRun(100, func() {
		a.Write(msg)
		io.ReadFull(b, buf)
		a.Write(msg[:100])
		io.ReadFull(b, small[:50])
		io.ReadFull(b, small[:50])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Write+Read", allocs)
	}
}

// holdsNoBuffer fails unless c's read side is back on its own small array
// with nothing buffered.
func holdsNoBuffer(t *testing.T, c *Conn) {
	t.Helper()
	c.in.mu.Lock()
	defer c.in.mu.Unlock()
	if c.in.pooled != nil || len(c.in.buf) != smallRead || c.in.r != c.in.w || len(c.in.plain) != 0 {
		t.Fatalf("idle conn holds a %d-byte read buffer (pooled %v), %d bytes buffered, %d plaintext",
			len(c.in.buf), c.in.pooled != nil, c.in.w-c.in.r, len(c.in.plain))
	}
}

func TestIdleConnHoldsNoBuffer(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			sa, sb := securePair(t, tr, testConfig("a"), testConfig("b"))
			exchangeData(t, sa, sb, []int{1 << 20, 300 << 10, 5000, 100, 0, 1})
			holdsNoBuffer(t, sa)
			holdsNoBuffer(t, sb)
		})
	}
}

func TestPartialFrameTail(t *testing.T) {
	x, y := newBufPair()
	a, b := rawPair(t, x, y, aead.AES128GCM)
	a.out.mu.Lock()
	big := sealForTest(t, a, bytes.Repeat([]byte{1}, 1400))
	next := sealForTest(t, a, bytes.Repeat([]byte{2}, 150))
	a.out.mu.Unlock()
	// One frame that needs a pooled buffer (greedyBuffer bytes), then part
	// of the next: the greedy read takes both.
	if room := classSize(bufferClass(greedyBuffer)) - len(big); room < 100 {
		t.Fatalf("the pooled buffer has room for only %d bytes after the frame", room)
	}
	x.Write(append(append([]byte(nil), big...), next[:100]...))
	got, err := readN(b, 1400)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{1}, 1400)) {
		t.Fatalf("first frame: %v", err)
	}
	// The 100-byte tail moved into the Conn's own array; the pooled buffer
	// is back in its pool.
	if b.in.pooled != nil || len(b.in.buf) != smallRead || b.in.w-b.in.r != 100 {
		t.Fatalf("after the first frame: pooled %v, %d-byte buffer, %d bytes buffered",
			b.in.pooled != nil, len(b.in.buf), b.in.w-b.in.r)
	}
	x.Write(next[100:])
	got, err = readN(b, 150)
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{2}, 150)) {
		t.Fatalf("second frame: %v", err)
	}
	holdsNoBuffer(t, b)

	// A buffered partial frame longer than the small array keeps its
	// pooled buffer until the frame is complete.
	a.out.mu.Lock()
	f := sealForTest(t, a, bytes.Repeat([]byte{3}, 5000))
	a.out.mu.Unlock()
	x.Write(f[:3000])
	done := make(chan error, 1)
	go func() {
		got, err := readN(b, 5000)
		if err == nil && !bytes.Equal(got, bytes.Repeat([]byte{3}, 5000)) {
			err = errors.New("data corrupted")
		}
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	x.Write(f[3000:])
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	holdsNoBuffer(t, b)
}

func TestBufferClasses(t *testing.T) {
	prev := 0
	for i := range numClasses {
		size := classSize(i)
		// Each class is at most half again the one before: a buffer is
		// never more than a third empty.
		if size <= prev || (i > 0 && 2*size > 3*prev) {
			t.Fatalf("class %d: %d bytes after %d", i, size, prev)
		}
		if bufferClass(size) != i || bufferClass(prev+1) != i {
			t.Fatalf("class %d (%d bytes): bufferClass(%d) = %d, bufferClass(%d) = %d",
				i, size, size, bufferClass(size), prev+1, bufferClass(prev+1))
		}
		prev = size
	}
	for _, n := range []int{1, 512, 513, 768, 769, 1 << 20, 1<<20 + 36} {
		if c := bufferClass(n); classSize(c) < n || (c > 0 && classSize(c-1) >= n) {
			t.Fatalf("bufferClass(%d) = %d (%d bytes)", n, c, classSize(c))
		}
	}
	largest := max(MaxFrameSizeLimit+recordTypeSize+16, tea.CiphertextLen(MaxFrameSizeLimit)) + frameHeaderSize
	if classSize(numClasses-1) < largest {
		t.Fatalf("largest class %d bytes, a frame may need %d", classSize(numClasses-1), largest)
	}
}

func TestLargeFrameAllocs(t *testing.T) {
	a, b := allocPair(t)
	msg := make([]byte, 256<<10)
	buf := make([]byte, 100<<10) // smaller than the frame: in-place path
	a.Write(msg)
	io.ReadFull(b, make([]byte, len(msg)))
	allocs := testing.AllocsPerRun(50, func() {
		a.Write(msg)
		for range 3 {
			io.ReadFull(b, buf[:len(msg)/4])
		}
		io.ReadFull(b, buf[:len(msg)/4])
	})
	// Pools may be emptied by a GC during the run; on average nothing is
	// allocated.
	if allocs >= 1 {
		t.Fatalf("%v allocations per 256 KiB Write+Read", allocs)
	}
}

// stuckConn returns (0, nil) from every Read.
type stuckConn struct{ net.Conn }

func (stuckConn) Read(p []byte) (int, error) { return 0, nil }

func TestNoProgressReader(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	l, _ := LegacyTEA(stuckConn{a}, legacyKey, nil)
	defer l.Close()
	if _, err := l.Read(make([]byte, 10)); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("Read: %v, want io.ErrNoProgress", err)
	}
}

func TestBurstReadsFewSyscalls(t *testing.T) {
	x, y := newBufPair()
	ry := &probeConn{Conn: y}
	a, b := rawPair(t, x, ry, aead.AES128GCM)
	const frames, size = 20, 300 // 6.4 KB of frames longer than the small array
	for range frames {
		if _, err := a.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 4096)
	for range frames {
		if _, err := io.ReadFull(b, buf[:size]); err != nil {
			t.Fatal(err)
		}
	}
	// One read into the small array, then one into a greedy buffer that
	// takes the whole burst.
	if n := ry.reads.Load(); n > 2 {
		t.Fatalf("%d frames took %d reads", frames, n)
	}
	holdsNoBuffer(t, b)
}

func TestCloseGivesBufferBack(t *testing.T) {
	x, y := newBufPair()
	a, b := rawPair(t, x, y, aead.AES128GCM)
	a.out.mu.Lock()
	f := sealForTest(t, a, make([]byte, 5000))
	a.out.mu.Unlock()
	x.Write(f[:3000])
	// A Read that has to stop at a partial frame keeps it in a pooled
	// buffer; a deadline would do this on a real conn, here the transport
	// ends.
	x.Close()
	if _, err := b.Read(make([]byte, 10)); err != io.ErrUnexpectedEOF {
		t.Fatalf("Read: %v", err)
	}
	holdsNoBuffer(t, b)

	// The same partial frame, left behind by a timed-out Read, goes back
	// on Close.
	x2, y2 := newBufPair()
	a2, b2 := rawPair(t, x2, &timeoutAfterConn{y2}, aead.AES128GCM)
	a2.out.mu.Lock()
	f2 := sealForTest(t, a2, make([]byte, 5000))
	a2.out.mu.Unlock()
	x2.Write(f2[:3000])
	if _, err := b2.Read(make([]byte, 10)); !isTimeout(err) {
		t.Fatalf("Read: %v, want a timeout", err)
	}
	if b2.in.pooled == nil {
		t.Fatal("the partial frame was not kept")
	}
	b2.Close()
	holdsNoBuffer(t, b2)
}

// timeoutAfterConn returns a timeout instead of blocking when nothing is
// buffered.
type timeoutAfterConn struct{ *bufConn }

func (c *timeoutAfterConn) Read(p []byte) (int, error) {
	in := c.bufConn.in
	in.mu.Lock()
	empty := in.r == len(in.buf)
	in.mu.Unlock()
	if empty {
		return 0, os.ErrDeadlineExceeded
	}
	return c.bufConn.Read(p)
}
