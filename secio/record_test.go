package secio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

// TestKeyUpdate sets a tiny key-update threshold on both sides and moves
// data both ways at once: hundreds of updates each way, every byte intact.
func TestKeyUpdate(t *testing.T) {
	for _, s := range []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305} {
		t.Run(s.String(), func(t *testing.T) {
			ca, cb := testConfig("a"), testConfig("b")
			ca.Ciphers, cb.Ciphers = []aead.Suite{s}, []aead.Suite{s}
			sa, sb := securePair(t, transports[1], ca, cb)
			// About 1 KiB per key: a 1000-byte frame is 64 blocks.
			sa.out.updateAt, sb.out.updateAt = 64, 64
			const writes, size = 400, 1000
			msg := func(side, i int) []byte {
				b := make([]byte, size)
				for j := range b {
					b[j] = byte(side*31 + i*7 + j)
				}
				return b
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for side, pair := range [][2]*Conn{{sa, sb}, {sb, sa}} {
				w, r := pair[0], pair[1]
				wg.Add(2)
				go func() {
					defer wg.Done()
					for i := range writes {
						if _, err := w.Write(msg(side, i)); err != nil {
							errs <- err
							return
						}
					}
				}()
				go func() {
					defer wg.Done()
					buf := make([]byte, size)
					for i := range writes {
						if _, err := io.ReadFull(r, buf); err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(buf, msg(side, i)) {
							errs <- errors.New("data changed across a key update")
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for _, c := range []*Conn{sa, sb} {
				if c.out.updates < 300 {
					t.Fatalf("%d key updates sent, want hundreds", c.out.updates)
				}
			}
			if sa.out.updates != sb.in.updates || sb.out.updates != sa.in.updates {
				t.Fatalf("updates sent/received: %d/%d, %d/%d", sa.out.updates, sb.in.updates, sb.out.updates, sa.in.updates)
			}
		})
	}
}

// The default threshold keeps a key below the AEAD bounds with a margin
// (RFC 8446 5.5: 2^34.5 blocks for AES-GCM).
func TestKeyUpdateThreshold(t *testing.T) {
	if keyUpdateBlocks > 1<<34 {
		t.Fatalf("key update after %d blocks, above 2^34", uint64(keyUpdateBlocks))
	}
	// A maximal frame counts its blocks and its counter block.
	if got := recordBlocks(MaxFrameSizeLimit + 1); got != (MaxFrameSizeLimit+1+15)/16+1 {
		t.Fatal(got)
	}
}

// After a key update, a frame sealed under the old key (with a fresh
// counter value) is refused, as is a replay of an earlier frame.
func TestOldKeyRefused(t *testing.T) {
	for _, replay := range []bool{false, true} {
		x, y := testutil.TCPPair(t)
		var rec recorder
		sa, sb, errA, errB := handshakePair(&recordConn{Conn: x, rec: &rec}, y, testConfig("a"), testConfig("b"))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		old := sa.out.recordKey
		if _, err := sa.Write([]byte("before")); err != nil {
			t.Fatal(err)
		}
		sa.out.updateAt = 1
		if _, err := sa.Write([]byte("after")); err != nil {
			t.Fatal(err)
		}
		if got, err := readN(sb, 11); err != nil || string(got) != "beforeafter" {
			t.Fatalf("%q, %v", got, err)
		}
		if sb.in.updates != 1 {
			t.Fatalf("%d updates", sb.in.updates)
		}
		var frame []byte
		if replay {
			frame = rec.writes[len(rec.writes)-3] // "before", under the old key
		} else {
			// The old key with the counter it would use next (after
			// "before" and the key update record).
			old.ctr.next()
			old.ctr.next()
			fake := &Conn{}
			fake.out.recordKey = old
			frame = sealForTest(t, fake, []byte("forged"))
		}
		if _, err := x.Write(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Read(make([]byte, 16)); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("replay %v: frame under the old key: %v, want ErrAuthFailed", replay, err)
		}
		sa.Close()
		sb.Close()
	}
}

// Close sends a close record: the peer reads io.EOF after the data. A
// connection cut at a frame boundary without one reads as ErrTruncated
// (which is io.ErrUnexpectedEOF, not io.EOF); cut inside a frame, as
// io.ErrUnexpectedEOF.
func TestCloseAndTruncation(t *testing.T) {
	for _, tr := range transports {
		sa, sb := securePair(t, tr, testConfig("a"), testConfig("b"))
		go func() {
			sa.Write([]byte("last words"))
			sa.Close()
		}()
		got, err := io.ReadAll(sb)
		if err != nil || string(got) != "last words" {
			t.Fatalf("%s: %q, %v; want the data and io.EOF", tr.name, got, err)
		}
		if _, err := sb.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("%s: sticky: %v", tr.name, err)
		}
	}
	// Cut at a frame boundary.
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	go func() {
		sa.Write([]byte("partial"))
		sa.NetConn().Close()
	}()
	got, err := io.ReadAll(sb)
	if string(got) != "partial" || !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
		t.Fatalf("cut at a boundary: %q, %v; want ErrTruncated", got, err)
	}
	// Cut inside a frame.
	sc, sd := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	go func() {
		sc.out.mu.Lock()
		f := sealForTest(t, sc, []byte("never whole"))
		sc.out.mu.Unlock()
		sc.NetConn().Write(f[:len(f)-3])
		sc.NetConn().Close()
	}()
	if _, err := io.ReadAll(sd); !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrTruncated) {
		t.Fatalf("cut inside a frame: %v, want io.ErrUnexpectedEOF", err)
	}
}

// Records that are not data: an unknown type, a close or key update record
// with content, and a handshake record after the handshake, each end the
// Conn with ErrInvalidFrame (and no close record of its own).
func TestBadRecords(t *testing.T) {
	for name, rec := range map[string]struct {
		typ     byte
		content []byte
	}{
		"unknown type":          {0x7f, []byte("x")},
		"type zero":             {0, nil},
		"handshake":             {recordHandshake, make([]byte, authLen)},
		"close with content":    {recordClose, []byte{0}},
		"key update w/ content": {recordKeyUpdate, []byte("next")},
	} {
		sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
		sa.out.mu.Lock()
		f := sealTypeForTest(t, sa, rec.content, rec.typ)
		sa.out.mu.Unlock()
		sa.NetConn().Write(f)
		if _, err := sb.Read(make([]byte, 64)); !errors.Is(err, ErrInvalidFrame) {
			t.Fatalf("%s: %v, want ErrInvalidFrame", name, err)
		}
		// sb closed without a close record: sa sees a truncation.
		if _, err := sa.Read(make([]byte, 1)); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Fatalf("%s: the peer of a failed Conn reads %v", name, err)
		}
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}

// TestPreAuthMemory: 128 strangers each send the largest ClientHello's
// length prefix and then trickle its body; 128 send the length prefix of an
// 8 MiB message; then 128 others complete a ClientHello and trickle their
// Auth record. Before anything is
// authenticated a Server holds at most what the handshake needs: the live
// heap stays well under 64 KiB per connection (the network's own buffers
// and goroutine stacks aside).
func TestPreAuthMemory(t *testing.T) {
	skipMemoryTest(t, "opens 256 connections")
	const n = 128
	for _, phase := range []string{"trickled ClientHello", "oversized ClientHello", "trickled Auth"} {
		t.Run(phase, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			cfg := testConfig("b")
			cfg.HelloTimeout = time.Minute
			cfg.HandshakeTimeout = time.Minute
			base := liveHeap()
			var clients []net.Conn
			accepted := make(chan struct{}, n)
			for range n {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				clients = append(clients, c)
				s, err := ln.Accept()
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					accepted <- struct{}{}
					Server(ctx, s, cfg)
				}()
				switch phase {
				case "trickled ClientHello":
					// The length prefix of the largest ClientHello and
					// its first bytes.
					msg := binary.BigEndian.AppendUint32(nil, MaxHandshakeMessage)
					c.Write(append(msg, msgClientHello, 0, 2))
					continue
				case "oversized ClientHello":
					// A length prefix the size of a large frame: refused
					// before anything is allocated for it.
					msg := binary.BigEndian.AppendUint32(nil, 8<<20)
					c.Write(append(msg, msgClientHello, 0, 2))
					continue
				}
				var nonce [NonceSize]byte
				e, err := generateEphemeral(X25519MLKEM768, newDetRand("stranger"), true)
				if err != nil {
					t.Fatal(err)
				}
				ch := appendClientHello(nil, &nonce, MaxFrameSizeLimit, DefaultKeyExchanges(), aead.Preferred(), X25519MLKEM768, e.appendDialerShare(nil))
				// The Auth record's length prefix and a first byte.
				c.Write(append(ch, 0, 0, 0, authLen+recordTypeSize+16, 0))
			}
			for range n {
				<-accepted
			}
			// Let every Server read what it was sent and block.
			time.Sleep(300 * time.Millisecond)
			used := float64(int64(liveHeap())-int64(base)) / n
			t.Logf("%s: %.0f bytes of live heap per connection", phase, used)
			if used > 64<<10 {
				t.Fatalf("%.0f bytes per unauthenticated connection, limit 64 KiB", used)
			}
			cancel()
			for _, c := range clients {
				c.Close()
			}
			wg.Wait()
		})
	}
}

// liveHeap is the heap in use after two collections (the second empties
// sync.Pool's victim cache).
func liveHeap() uint64 { return testutil.SettledMemStats().HeapAlloc }

// TestCloseDuringWrite: Close while another goroutine writes still sends the close record
// (after that write): the peer reads a clean end, never a truncation.
func TestCloseDuringWrite(t *testing.T) {
	// TestMain shortens the close record's bound for pipes nobody reads; here the peer
	// reads, and the default bound is what is tested.
	defer func(d time.Duration) { closeNotifyTimeout = d }(closeNotifyTimeout)
	closeNotifyTimeout = time.Second
	for i := range 30 {
		sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
		stop := make(chan struct{})
		done := keepWriting(sa, 100, stop)
		readErr := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, sb)
			readErr <- err
		}()
		time.Sleep(time.Millisecond)
		sa.Close()
		close(stop)
		<-done
		if err := <-readErr; err != nil {
			t.Fatalf("try %d: the peer read %v after a Close during a write, want a clean end", i, err)
		}
	}
}

// TestNoCloseRecordAfterReset: once a Read has seen the peer reset the connection, Close
// writes no close record (it could only fail, with EPIPE and a SIGPIPE); before that it
// does.
func TestNoCloseRecordAfterReset(t *testing.T) {
	for _, reset := range []bool{false, true} {
		x, y := testutil.TCPPair(t)
		cx := &probeConn{Conn: x}
		sa, sb, errA, errB := handshakePair(cx, y, testConfig("a"), testConfig("b"))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		handshakeWrites := cx.writes.Load()
		if reset {
			y.(*net.TCPConn).SetLinger(0)
			sb.close(false) // a reset, without a close record
			if _, err := sa.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read after the peer's reset: %v, want ECONNRESET", err)
			}
		}
		sa.Close()
		want := int64(1)
		if reset {
			want = 0
		}
		if n := cx.writes.Load() - handshakeWrites; n != want {
			t.Fatalf("reset %v: %d writes at Close, want %d", reset, n, want)
		}
		sb.Close()
	}
}

// TestCloseLingers: a Conn closed while data from the peer sits unread in its socket still
// ends cleanly for the peer: everything written before Close, then io.EOF. Without the
// linger the kernel answers the unread data with a reset, and the peer's kernel drops what
// its application had not read yet.
func TestCloseLingers(t *testing.T) {
	defer func(d time.Duration) { closeLinger = d }(closeLinger)
	closeLinger = 2 * time.Second
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	if _, err := sb.Write(make([]byte, 4<<10)); err != nil { // sa never reads it
		t.Fatal(err)
	}
	// More than the peer's socket takes while it does not read: the rest waits in sa's
	// send buffer when sa closes.
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(i)
	}
	if _, err := sa.Write(want); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // sb's 4 KiB are in sa's socket now
	closed := make(chan error, 1)
	go func() { closed <- sa.Close() }()
	time.Sleep(50 * time.Millisecond) // a reset, if any, reaches sb's socket before it reads
	got, err := io.ReadAll(sb)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the peer read %d of %d bytes, then %v; want all, then a clean end", len(got), len(want), err)
	}
	sb.Close()
	select {
	case <-closed:
	case <-time.After(time.Second):
		t.Fatal("Close still lingers after the peer closed")
	}
}

// TestCloseLingerBounded: a peer that never closes its side, and keeps sending, holds a
// Close for at most closeLinger; what it sends meanwhile is dropped, not buffered.
func TestCloseLingerBounded(t *testing.T) {
	defer func(d time.Duration) { closeLinger = d }(closeLinger)
	closeLinger = 200 * time.Millisecond
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	stop := make(chan struct{})
	done := keepWriting(sb, 16<<10, stop) // the peer ignores the close record: it writes on and never closes
	time.Sleep(20 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		sa.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still lingers 5 s after the close record, with closeLinger 200 ms")
	}
	close(stop)
	sb.Close()
	<-done
}
