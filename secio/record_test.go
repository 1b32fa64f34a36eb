package secio

import (
	"bytes"
	"context"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

// TestKeyUpdate sets the smallest key-update threshold on both sides and
// moves data both ways at once: a key update every keyUpdateMinRecords
// records, hundreds each way, every byte intact, none refused.
func TestKeyUpdate(t *testing.T) {
	for _, s := range []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305} {
		t.Run(s.String(), func(t *testing.T) {
			ca, cb := testConfig("a"), testConfig("b")
			ca.Ciphers, cb.Ciphers = []aead.Suite{s}, []aead.Suite{s}
			sa, sb := securePair(t, transports[1], ca, cb)
			// Every key is due for an update after its first record: the
			// sender waits for the peer's minimum.
			sa.out.updateAt, sb.out.updateAt = 1, 1
			const writes = 320 * keyUpdateMinRecords
			msg := func(side, i int) []byte {
				b := make([]byte, 1+i%40)
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
					buf := make([]byte, 64)
					for i := range writes {
						want := msg(side, i)
						if _, err := io.ReadFull(r, buf[:len(want)]); err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(buf[:len(want)], want) {
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
// (RFC 8446 5.5: 2^34.5 blocks for AES-GCM), and a sender reaches it only
// after more records than the receiver's minimum for a key update, even
// with records of the largest size.
func TestKeyUpdateThreshold(t *testing.T) {
	if keyUpdateBlocks > 1<<34 {
		t.Fatalf("key update after %d blocks, above 2^34", uint64(keyUpdateBlocks))
	}
	// A maximal frame counts its blocks and its counter block.
	largest := recordBlocks(MaxFrameSizeLimit + 1)
	if largest != (MaxFrameSizeLimit+1+15)/16+1 {
		t.Fatal(largest)
	}
	if records := keyUpdateBlocks / largest; records < keyUpdateMinRecords {
		t.Fatalf("%d records of the largest size reach the threshold, fewer than the %d a key update needs", records, keyUpdateMinRecords)
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
		// The traffic secret: the AEAD itself is rekeyed in place at the
		// update (with the vector kernels), so only the secret can make the
		// old key again.
		old := sa.out.secret
		for range keyUpdateMinRecords {
			if _, err := sa.Write([]byte("before")); err != nil {
				t.Fatal(err)
			}
		}
		sa.out.updateAt = 1
		if _, err := sa.Write([]byte("after")); err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat("before", keyUpdateMinRecords) + "after"
		if got, err := readN(sb, len(want)); err != nil || string(got) != want {
			t.Fatalf("%q, %v", got, err)
		}
		if sb.in.updates != 1 {
			t.Fatalf("%d updates", sb.in.updates)
		}
		var frame []byte
		if replay {
			frame = rec.writes[len(rec.writes)-3] // "before", under the old key
		} else {
			// The old key with the sequence number it would use next
			// (after the records "before" and the key update record).
			fake := &Conn{}
			if err := fake.out.install(sa.suite, &old); err != nil {
				t.Fatal(err)
			}
			fake.out.seq = keyUpdateMinRecords + 1
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
					c.Write(append(msg, msgClientHello, 0, 3))
					continue
				case "oversized ClientHello":
					// A length prefix the size of a large frame: refused
					// before anything is allocated for it.
					msg := binary.BigEndian.AppendUint32(nil, 8<<20)
					c.Write(append(msg, msgClientHello, 0, 3))
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
// its application had not read yet. The dialer half-closes at once; the listener waits for
// the peer's FIN, then resets: either way the peer reads all, and Close returns once the
// peer has closed.
func TestCloseLingers(t *testing.T) {
	defer func(d time.Duration) { closeLinger = d }(closeLinger)
	closeLinger = 2 * time.Second
	for _, closer := range []string{"dialer", "listener"} {
		t.Run(closer, func(t *testing.T) {
			sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
			if closer == "listener" {
				sa, sb = sb, sa
			}
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
		})
	}
}

// TestCloseLingerBounded: a peer that never closes its side, and keeps sending, holds a
// Close for at most closeLinger, the dialer's and the listener's; what it sends meanwhile
// is dropped, not buffered.
func TestCloseLingerBounded(t *testing.T) {
	defer func(d time.Duration) { closeLinger = d }(closeLinger)
	closeLinger = 200 * time.Millisecond
	for _, closer := range []string{"dialer", "listener"} {
		t.Run(closer, func(t *testing.T) {
			sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
			if closer == "listener" {
				sa, sb = sb, sa
			}
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
		})
	}
}

// nonceLog records the nonces that AEADs made through newAEAD seal with.
type nonceLog struct {
	mu     sync.Mutex
	nonces [][]byte
	made   int // AEADs made through newAEAD
	clears int // Clear calls on them
}

// sealSpy wraps an AEAD and logs every nonce Seal uses. It hides
// SealWithByte, so that every record goes through Seal.
type sealSpy struct {
	cipher.AEAD
	log *nonceLog
}

func (s *sealSpy) Seal(dst, nonce, plaintext, ad []byte) []byte {
	s.log.mu.Lock()
	s.log.nonces = append(s.log.nonces, bytes.Clone(nonce))
	s.log.mu.Unlock()
	return s.AEAD.Seal(dst, nonce, plaintext, ad)
}

// rekeyingSpy is a sealSpy over an AEAD that can be rekeyed in place; it
// forwards Rekey and counts Clear.
type rekeyingSpy struct{ sealSpy }

func (s *rekeyingSpy) Rekey(key []byte) error { return s.AEAD.(rekeyer).Rekey(key) }

func (s *rekeyingSpy) Clear() {
	s.log.mu.Lock()
	s.log.clears++
	s.log.mu.Unlock()
	s.AEAD.(rekeyer).Clear()
}

// spyOnAEADs makes every AEAD the package makes log into log until the test
// ends. Tests that use it must not run in parallel.
func spyOnAEADs(t *testing.T, log *nonceLog) {
	prev := newAEAD
	t.Cleanup(func() { newAEAD = prev })
	newAEAD = func(s aead.Suite, key []byte) (cipher.AEAD, error) {
		a, err := aead.New(s, key)
		if err != nil {
			return nil, err
		}
		log.mu.Lock()
		log.made++
		log.mu.Unlock()
		if _, ok := a.(rekeyer); ok {
			return &rekeyingSpy{sealSpy{a, log}}, nil
		}
		return &sealSpy{a, log}, nil
	}
}

// TestFirstNoncesDiffer: two connections between the same identities, each
// sending its Auth records and a first data record each way, never seal two
// records with the same nonce, and no record has the all-zero nonce (the
// nonce of every first record when it was the bare counter). The nonces are
// those the AEADs were given.
func TestFirstNoncesDiffer(t *testing.T) {
	for _, s := range []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305} {
		seen := map[string]int{}
		for conn := range 2 {
			var log nonceLog
			spyOnAEADs(t, &log)
			ca, cb := testConfig("a"), testConfig("b")
			ca.Ciphers, cb.Ciphers = []aead.Suite{s}, []aead.Suite{s}
			sa, sb := securePair(t, transports[0], ca, cb)
			exchangeData(t, sa, sb, []int{10})
			if len(log.nonces) != 4 {
				t.Fatalf("%s: %d records sealed, want 2 Auth and 2 data records", s, len(log.nonces))
			}
			for _, n := range log.nonces {
				if bytes.Equal(n, make([]byte, nonceSize)) {
					t.Fatalf("%s, connection %d: a record sealed with the all-zero nonce", s, conn)
				}
				if c, ok := seen[string(n)]; ok {
					t.Fatalf("%s: nonce %x used in connection %d and again in connection %d", s, n, c, conn)
				}
				seen[string(n)] = conn
			}
		}
	}
}

// TestKeysInPlace: with the vector kernels, a connection makes one AEAD per
// direction and keeps it: the traffic keys and every updated key are
// installed in it in place (overwriting the handshake and older keys), and
// Close clears both. With other AEADs every key is a new one (the old one
// cannot be cleared and is dropped). Close also overwrites the secrets and
// IVs, and so does a failed Read for its direction.
func TestKeysInPlace(t *testing.T) {
	var log nonceLog
	spyOnAEADs(t, &log)
	ca, cb := testConfig("a"), testConfig("b")
	ca.Ciphers = []aead.Suite{aead.AES128GCM}
	sa, sb := securePair(t, transports[1], ca, cb)
	sa.out.updateAt = 1
	for range 3*keyUpdateMinRecords + 1 {
		if _, err := sa.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := readN(sb, 3*keyUpdateMinRecords+1); err != nil {
		t.Fatal(err)
	}
	if sa.out.updates != 3 || sb.in.updates != 3 {
		t.Fatalf("%d key updates sent, %d received, want 3", sa.out.updates, sb.in.updates)
	}
	inPlace := strings.HasPrefix(aead.Implementation(aead.AES128GCM), "aesgcm/vaes")
	want := 4 // one per direction and side
	if !inPlace {
		want = 4 + 4 + 3 + 3 // and the traffic keys, and the updated keys on each side
	}
	if log.made != want {
		t.Fatalf("%s: %d AEADs made, want %d", aead.Implementation(aead.AES128GCM), log.made, want)
	}
	sa.Close()
	sb.Close()
	if inPlace && log.clears != 4 {
		t.Fatalf("Close cleared %d AEADs, want 4", log.clears)
	}
	for _, c := range []*Conn{sa, sb} {
		for _, k := range []*recordKey{&c.in.recordKey, &c.out.recordKey} {
			if k.secret != [secretSize]byte{} || k.iv != [nonceSize]byte{} {
				t.Fatal("a closed Conn still holds a secret or an IV")
			}
		}
	}
	// A Read that fails on hostile input overwrites its direction's keys.
	sc, sd := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	sc.out.mu.Lock()
	f := sealForTest(t, sc, []byte("tampered"))
	sc.out.mu.Unlock()
	f[len(f)-1] ^= 1
	sc.NetConn().Write(f)
	if _, err := sd.Read(make([]byte, 16)); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("%v, want ErrAuthFailed", err)
	}
	if sd.in.secret != [secretSize]byte{} || sd.in.iv != [nonceSize]byte{} {
		t.Fatal("a failed read side still holds its secret or IV")
	}
}

// sendRecords seals records of the given types (nil content) from c's write
// side and writes them to its connection at once. A key update moves the
// sender to its next key, as a sender does.
func sendRecords(t *testing.T, c *Conn, types ...byte) {
	t.Helper()
	c.out.mu.Lock()
	var wire []byte
	for _, typ := range types {
		content := []byte(nil)
		if typ == 'x' { // a one-byte data record
			typ, content = recordData, []byte("x")
		}
		wire = append(wire, sealTypeForTest(t, c, content, typ)...)
		if typ == recordKeyUpdate {
			if err := c.out.update(); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.out.mu.Unlock()
	go c.NetConn().Write(wire)
}

// repeat returns n copies of typ.
func repeat(typ byte, n int) []byte { return bytes.Repeat([]byte{typ}, n) }

// TestKeyUpdateTooSoon: a key update before the current key has protected
// keyUpdateMinRecords records closes the connection with ErrKeyUpdateTooSoon,
// before the receiver derives anything; one after exactly that many is
// followed. A flood of key updates is refused at its first record.
func TestKeyUpdateTooSoon(t *testing.T) {
	for _, before := range []int{0, 1, keyUpdateMinRecords - 1, keyUpdateMinRecords} {
		sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
		types := append(repeat('x', before), repeat(recordKeyUpdate, 1)[0], 'x')
		if before == 0 {
			types = repeat(recordKeyUpdate, 1000) // the flood
		}
		sendRecords(t, sa, types...)
		got, err := readN(sb, before+1)
		if before < keyUpdateMinRecords {
			if !errors.Is(err, ErrKeyUpdateTooSoon) {
				t.Fatalf("a key update after %d records: %v, want ErrKeyUpdateTooSoon", before, err)
			}
			if sb.in.updates != 0 || !sb.closed.Load() {
				t.Fatalf("after %d records: %d updates made, closed %v", before, sb.in.updates, sb.closed.Load())
			}
			continue
		}
		if err != nil || string(got) != strings.Repeat("x", before+1) || sb.in.updates != 1 {
			t.Fatalf("a key update after %d records: %q, %v, %d updates", before, got, err, sb.in.updates)
		}
	}
}

// TestNonDataRecords: up to maxNonDataRecords records in a row that deliver
// no data (empty data records, key updates) are read through; one more
// closes the connection with ErrTooManyNonDataRecords. A Write of nothing
// sends no record at all, so a sender that writes nothing often never comes
// near the limit.
func TestNonDataRecords(t *testing.T) {
	for _, c := range []struct {
		name  string
		types []byte
		ok    bool
	}{
		{"16 empty", append(repeat(recordData, maxNonDataRecords), 'x'), true},
		{"17 empty", append(repeat(recordData, maxNonDataRecords+1), 'x'), false},
		{"15 empty and a key update", append(append(repeat('x', keyUpdateMinRecords-1), repeat(recordData, maxNonDataRecords-1)...), recordKeyUpdate, 'x'), true},
		{"16 empty and a key update", append(append(repeat('x', keyUpdateMinRecords-1), repeat(recordData, maxNonDataRecords)...), recordKeyUpdate, 'x'), false},
		{"a one-byte record resets the count", append(append(repeat(recordData, maxNonDataRecords), 'x'), append(repeat(recordData, maxNonDataRecords), 'x')...), true},
	} {
		sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
		sendRecords(t, sa, c.types...)
		want := bytes.Count(c.types, []byte{'x'})
		got, err := readN(sb, want)
		if c.ok != (err == nil) {
			t.Fatalf("%s: %q, %v", c.name, got, err)
		}
		if !c.ok && (!errors.Is(err, ErrTooManyNonDataRecords) || !sb.closed.Load()) {
			t.Fatalf("%s: %v (closed %v), want ErrTooManyNonDataRecords", c.name, err, sb.closed.Load())
		}
	}
	// Writes of nothing send nothing.
	x, y := testutil.TCPPair(t)
	px := &probeConn{Conn: x}
	sa, sb, errA, errB := handshakePair(px, y, testConfig("a"), testConfig("b"))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	defer sa.Close()
	defer sb.Close()
	writes := px.writes.Load()
	for range 2 * maxNonDataRecords {
		if n, err := sa.Write(nil); n != 0 || err != nil {
			t.Fatal(n, err)
		}
	}
	if px.writes.Load() != writes {
		t.Fatal("a Write of nothing sent a record")
	}
}
