package secio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// FuzzHandshakeMessages feeds arbitrary bodies to the message parsers:
// none may panic, whatever parses re-encodes to the same bytes, and every
// refusal wraps ErrInvalidMessage.
func FuzzHandshakeMessages(f *testing.F) {
	var nonce [NonceSize]byte
	for _, k := range []KeyExchange{X25519, P256, X25519MLKEM768, P256MLKEM768, 9} {
		size := k.dialerShareSize()
		if size == 0 {
			size = 5
		}
		ch := appendClientHello(nil, &nonce, 1<<20, []KeyExchange{k, X25519}, aead.Preferred(), k, make([]byte, size))
		f.Add(ch[4:])
		sh := serverHello{version: ProtocolVersion, maxFrame: 1 << 20, kex: k, suite: aead.AES128GCM, share: make([]byte, k.listenerShareSize())}
		f.Add(appendServerHello(nil, &sh)[4:])
	}
	f.Add(appendHelloRetry(nil, X25519)[4:])
	f.Add(appendAuth(nil, msgListenerAuth, make([]byte, 32), make([]byte, 64)))
	f.Add(appendAuth(nil, msgDialerAuth, make([]byte, 32), make([]byte, 64)))
	f.Add([]byte{msgClientHello, 0, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > MaxHandshakeMessage {
			return
		}
		typed := func(err error) {
			if err != nil && !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("untyped error %v", err)
			}
		}
		var ch clientHello
		err := parseClientHello(&ch, body)
		typed(err)
		if err == nil {
			got := appendClientHello(nil, &ch.nonce, int(ch.maxFrame), ch.kexes, ch.ciphers, ch.shareKex, ch.share)
			// The encoder writes this package's version and pads
			// minimally; a parsed body may carry another version and more
			// padding.
			if g := unpadded(got[4:]); ch.version == ProtocolVersion && len(g) <= len(body) && !bytes.Equal(g, body[:len(g)]) {
				t.Fatalf("ClientHello round trip:\n in %x\nout %x", body, got[4:])
			}
			if len(ch.kexes) == 0 || len(ch.ciphers) == 0 || ch.maxFrame < MinFrameSize ||
				(ch.shareKex.Valid() && len(ch.share) != ch.shareKex.dialerShareSize()) {
				t.Fatal("parseClientHello accepted an invalid ClientHello")
			}
		}
		var sh serverHello
		retry, err := parseListenerReply(&sh, body)
		typed(err)
		if err == nil && retry == 0 {
			if sh.maxFrame < MinFrameSize {
				t.Fatal("parseListenerReply accepted a small frame size")
			}
			got := appendServerHello(nil, &sh)
			if g := unpadded(got[4:]); len(g) <= len(body) && !bytes.Equal(g, body[:len(g)]) {
				t.Fatalf("ServerHello round trip:\n in %x\nout %x", body, got[4:])
			}
		}
		for _, typ := range []byte{msgListenerAuth, msgDialerAuth} {
			pub, sig, err := parseAuth(body, typ)
			typed(err)
			if err == nil && !bytes.Equal(appendAuth(nil, typ, pub, sig), body) {
				t.Fatal("Auth round trip")
			}
		}
	})
}

// fuzzConn reads from a fixed input and discards writes. maxRead records
// the longest buffer a Read was given.
type fuzzConn struct {
	memConn // addresses and deadlines
	r       *bytes.Reader
	maxRead int
}

func (c *fuzzConn) Read(p []byte) (int, error) {
	c.maxRead = max(c.maxRead, len(p))
	return c.r.Read(p)
}
func (c *fuzzConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *fuzzConn) Close() error                { return nil }

func FuzzFrameReader(f *testing.F) {
	// Seeds: valid frames from a sender with the fixed keys of rawPair.
	x, y := newBufPair()
	sa, _ := rawPair(f, x, y, aead.AES128GCM)
	for _, m := range []string{"", "a", "hello, world"} {
		sa.Write([]byte(m))
	}
	sa.Write(make([]byte, 3000))
	var seed bytes.Buffer
	io.Copy(&seed, io.LimitReader(&bufConnReader{y}, int64(len(y.in.buf))))
	f.Add(seed.Bytes(), false, uint16(100))
	f.Add(seed.Bytes(), false, uint16(4096))
	f.Add(seed.Bytes(), false, uint16(1))
	f.Add([]byte{0, 0, 0, 16}, false, uint16(100))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, true, uint16(100))
	f.Add([]byte{0, 0, 0, 0x20, 1, 2, 3}, true, uint16(7))
	f.Fuzz(func(t *testing.T, data []byte, legacy bool, readSize uint16) {
		var c *Conn
		fc := &fuzzConn{r: bytes.NewReader(data)}
		const maxFrame = 4096
		if legacy {
			c, _ = LegacyTEA(fc, legacyKey, &LegacyConfig{MaxFrameSize: maxFrame})
		} else {
			_, c = rawPair(t, fc, fc, aead.AES128GCM)
			c.in.maxLen = maxFrame + recordTypeSize + 16
		}
		// Reads of every size: into the caller's buffer when a frame fits,
		// through the Conn's buffer otherwise.
		buf := make([]byte, 1+int(readSize)%8192)
		total := 0
		for {
			n, err := c.Read(buf)
			total += n
			if err != nil {
				break
			}
		}
		if total > len(data) {
			t.Fatal("read more plaintext than input")
		}
		// Never read into more than a buffer for one maximum frame,
		// whatever the input; after the final error nothing is held.
		if limit := max(classSize(bufferClass(maxFrame+recordTypeSize+16+frameHeaderSize)), greedyBuffer); fc.maxRead > limit {
			t.Fatalf("read into a %d-byte buffer, limit %d", fc.maxRead, limit)
		}
		if c.in.pooled != nil || len(c.in.buf) != smallRead {
			t.Fatalf("a failed Conn still holds a %d-byte buffer", len(c.in.buf))
		}
	})
}

type bufConnReader struct{ c *bufConn }

func (r *bufConnReader) Read(p []byte) (int, error) { return r.c.Read(p) }

// FuzzHandshakeInput feeds arbitrary bytes to a Server as the dialer's
// flights: without the dialer's keys no input may complete the handshake,
// and none may panic.
func FuzzHandshakeInput(f *testing.F) {
	var nonce [NonceSize]byte
	ch := appendClientHello(nil, &nonce, 1<<20, []KeyExchange{X25519}, []aead.Suite{aead.AES128GCM}, X25519, x25519Point)
	f.Add(ch)
	f.Add(append(bytes.Clone(ch), append([]byte{0, 0, 0, 0x73}, make([]byte, 0x73)...)...))
	chP := appendClientHello(nil, &nonce, 1<<20, []KeyExchange{P256, X25519}, []aead.Suite{aead.AES128GCM}, P256, make([]byte, 65))
	f.Add(append(chP, ch...))
	f.Add(binary.BigEndian.AppendUint32(nil, 5000))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := testConfig("a")
		cfg.Rand = newDetRand("fuzz")
		cfg.KeyExchanges = []KeyExchange{X25519, P256}
		_, err := Server(context.Background(), &fuzzConn{r: bytes.NewReader(data)}, cfg)
		if err == nil {
			t.Fatal("handshake completed on fuzz input")
		}
	})
}

// FuzzDecryptedAuth reaches the decrypted handshake messages: a harness
// peer with deterministic keys runs a real handshake, but seals the fuzz
// input as its Auth record (the last byte is the record type), so that the
// other side opens it and parses it: as a ListenerAuth read by a Client,
// or as a DialerAuth read by a Server. Only the genuine Auth may complete
// the handshake; nothing may panic; errors are typed.
func FuzzDecryptedAuth(f *testing.F) {
	good := func(typ byte) []byte {
		return append(appendAuth(nil, typ, testKey("b").pub.key, make([]byte, SignatureSize)), recordHandshake)
	}
	f.Add(good(msgListenerAuth), false)
	f.Add(good(msgDialerAuth), true)
	f.Add(append(appendAuth(nil, msgListenerAuth, smallOrderKeys[2][:], make([]byte, SignatureSize)), recordHandshake), false)
	f.Add(append(good(msgListenerAuth)[:50], recordHandshake), false)
	f.Add([]byte{recordData}, true)
	f.Fuzz(func(t *testing.T, pt []byte, toListener bool) {
		if len(pt) == 0 || len(pt) > 512 {
			return
		}
		x, y := newBufPair()
		ca, cb := testConfig("a"), testConfig("b")
		ca.KeyExchanges, cb.KeyExchanges = []KeyExchange{X25519}, []KeyExchange{X25519}
		ca.Rand, cb.Rand = newDetRand("fuzz a"), newDetRand("fuzz b")
		var err error
		if toListener {
			go func() { defer x.Close(); dialerWith(x, ca, pt) }()
			_, err = Server(context.Background(), y, cb)
		} else {
			go func() { defer y.Close(); listenerWith(y, cb, pt) }()
			_, err = Client(context.Background(), x, ca)
		}
		x.Close()
		y.Close()
		if err == nil {
			t.Fatalf("a forged Auth %x completed the handshake", pt)
		}
		for _, want := range []error{ErrInvalidMessage, ErrAuthFailed, ErrInvalidKey, ErrInvalidSignature, ErrSelfDial, io.ErrUnexpectedEOF} {
			if errors.Is(err, want) {
				return
			}
		}
		t.Fatalf("untyped error %v", err)
	})
}

// listenerWith runs a listener that sends pt as its Auth plaintext.
func listenerWith(conn net.Conn, cfg *Config, pt []byte) error {
	hs := &handshakeState{ctx: context.Background()}
	if err := cfg.withDefaults(&hs.cfg); err != nil {
		return err
	}
	hs.c = newConn(conn)
	hs.th = transcriptStart
	if err := hs.readClientHello(time.Now().Add(time.Second)); err != nil {
		return err
	}
	return hs.sendServerHello(pt)
}

// dialerWith runs a dialer that skips its checks of the listener's Auth (to
// reach the listener's own checks) and sends pt as its Auth plaintext, or its
// real Auth if pt is nil.
func dialerWith(conn net.Conn, cfg *Config, pt []byte) error {
	hs := &handshakeState{ctx: context.Background(), dialer: true}
	if err := cfg.withDefaults(&hs.cfg); err != nil {
		return err
	}
	hs.c = newConn(conn)
	hs.th = transcriptStart
	io.ReadFull(hs.cfg.rand, hs.nonce[:])
	kex := hs.cfg.kexes[0]
	if err := hs.sendClientHello(kex); err != nil {
		return err
	}
	if _, err := hs.readServerHello(true); err != nil {
		return err
	}
	if err := hs.processServerHello(kex); err != nil {
		return err
	}
	in := &hs.c.in
	hdr, body, total, err := in.nextFrame(conn)
	if err != nil {
		return err
	}
	hs.th.Write(hdr)
	hs.th.Write(body)
	nonce, _ := in.nextNonce()
	if _, err := in.aead.Open(body[:0], nonce, body, hdr); err != nil {
		return err
	}
	in.consume(total)
	return hs.sendDialerAuth(pt)
}

// FuzzRecords drives the record layer with a sequence of records sealed
// under the right keys: data (empty or not), key updates (the sender moves to
// its next key after sealing one, or, for a desynchronised sender, does not),
// close records, records of unknown type, and control records with content.
// The reader must deliver exactly the data records before the first bad one,
// in order, follow every key update that comes after keyUpdateMinRecords
// records under its key and refuse an earlier one (ErrKeyUpdateTooSoon),
// refuse the record after maxNonDataRecords in a row without data
// (ErrTooManyNonDataRecords), stop at a close record with io.EOF, and fail
// every other way with a typed error.
func FuzzRecords(f *testing.F) {
	f.Add([]byte{0, 3, 'a', 'b', 'c', 1, 0, 0, 2, 'h', 'i', 3, 0})
	f.Add([]byte{6, 64, 1, 0, 1, 0, 6, 64, 1, 0, 0, 1, 'x'})
	f.Add([]byte{6, 70, 2, 0, 0, 1, 'x'})
	f.Add([]byte{4, 1, 0x07})
	f.Add([]byte{5, 1, 'x'})
	f.Add([]byte{7, 16, 0, 1, 'x', 7, 17})
	f.Add([]byte{6, 63, 7, 15, 1, 0, 0, 1, 'x'})
	f.Fuzz(func(t *testing.T, ops []byte) {
		x, y := newBufPair()
		sa, sb := rawPair(t, x, y, aead.AES128GCM)
		var wire, want []byte
		var wantErr error
		nonData := 0 // records in a row without data, as the reader counts them
		// noData adds a record that delivers no data to the count and
		// reports whether the reader refuses it for that.
		noData := func() bool {
			if nonData++; nonData > maxNonDataRecords {
				wantErr = ErrTooManyNonDataRecords
				return true
			}
			return false
		}
		// keyUpdate seals a key update and reports whether the reader
		// accepts it.
		keyUpdate := func() bool {
			seq := sa.out.seq
			wire = append(wire, sealTypeForTest(t, sa, nil, recordKeyUpdate)...)
			if noData() {
				return false
			}
			if seq < keyUpdateMinRecords {
				wantErr = ErrKeyUpdateTooSoon
				return false
			}
			return true
		}
		data := func(content []byte) {
			wire = append(wire, sealTypeForTest(t, sa, content, recordData)...)
			if len(content) == 0 {
				noData()
				return
			}
			nonData = 0
			want = append(want, content...)
		}
		for len(ops) >= 2 && wantErr == nil {
			op, n := ops[0]%8, int(ops[1])
			ops = ops[2:]
			content := ops[:min(n, len(ops))]
			switch op {
			case 0, 3, 4, 5:
				ops = ops[len(content):]
			}
			switch op {
			case 0: // data
				data(content)
			case 1: // key update, then the sender moves on
				keyUpdate()
				if err := sa.out.update(); err != nil {
					t.Fatal(err)
				}
			case 2: // key update announced, old key kept: the next frame fails
				if keyUpdate() {
					wire = append(wire, sealTypeForTest(t, sa, []byte("x"), recordData)...)
					wantErr = ErrAuthFailed
				}
			case 3:
				wire = append(wire, sealTypeForTest(t, sa, nil, recordClose)...)
				wantErr = io.EOF
			case 4: // a type this side does not know
				typ := byte(n)
				if typ >= recordHandshake && typ <= recordClose {
					typ = 0x7f
				}
				wire = append(wire, sealTypeForTest(t, sa, content, typ)...)
				wantErr = ErrInvalidFrame
			case 5: // a control record with content
				if len(content) == 0 {
					content = []byte{0}
				}
				wire = append(wire, sealTypeForTest(t, sa, content, recordKeyUpdate)...)
				wantErr = ErrInvalidFrame
			case 6: // n one-byte data records
				for i := 0; i < n && wantErr == nil; i++ {
					data([]byte{byte(i)})
				}
			case 7: // n empty data records
				for i := 0; i < n && wantErr == nil; i++ {
					data(nil)
				}
			}
		}
		if wantErr == nil {
			wantErr = ErrTruncated
		}
		fc := &fuzzConn{r: bytes.NewReader(wire)}
		sb.conn = fc
		got, err := io.ReadAll(sb)
		if !bytes.Equal(got, want) {
			t.Fatalf("read %q, want %q", got, want)
		}
		if wantErr == io.EOF {
			if err != nil {
				t.Fatalf("after a close record: %v, want io.EOF", err)
			}
		} else if !errors.Is(err, wantErr) {
			t.Fatalf("error %v, want %v", err, wantErr)
		}
	})
}

// unpadded strips the padding endMessage adds ([0] or [1, 0]): a parsed message may carry
// any padding length, so round trips compare what comes before it.
func unpadded(msg []byte) []byte {
	if n := len(msg); n >= 2 && msg[n-2] == 1 && msg[n-1] == 0 {
		return msg[:n-2]
	}
	return msg[:len(msg)-1]
}

// pieceConn hands its data to Read in pieces of the sizes given (cycled),
// and at each Read checks the reader's memory: what the read side holds
// (charged to budget) is at most readAhead beyond what has arrived of the
// record it is receiving.
type pieceConn struct {
	memConn
	t          *testing.T
	data       []byte
	pieces     []int
	next, off  int
	boundaries []int // where each record starts in data, and where data ends
	budget     *testBudget
}

func (c *pieceConn) Read(p []byte) (int, error) {
	// The record being received is the one that the next byte belongs to.
	start := 0
	for _, b := range c.boundaries {
		if b <= c.off {
			start = b
		}
	}
	if held := c.budget.Used(); held > int64(c.off-start)+readAhead {
		c.t.Fatalf("%d bytes of a record arrived, %d held: more than %d beyond", c.off-start, held, readAhead)
	}
	if c.off == len(c.data) {
		return 0, io.EOF
	}
	n := min(len(p), c.pieces[c.next%len(c.pieces)], len(c.data)-c.off)
	c.next++
	copy(p, c.data[c.off:c.off+n])
	c.off += n
	return n, nil
}
func (c *pieceConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *pieceConn) Close() error                { return nil }

// FuzzRecordBuffers reads records of sizes from a few bytes to 320 KiB that
// arrive in pieces of any size: every record is read intact, the read side
// never holds more than readAhead beyond what has arrived of the record in
// hand (checked at every read of the connection), and once the close record
// is read it holds nothing.
func FuzzRecordBuffers(f *testing.F) {
	f.Add([]byte{1, 0xff, 0xff, 40})
	f.Add([]byte{3, 0x33, 0x34, 0, 10, 0x0d, 0x00, 1, 100, 255, 7})
	f.Add([]byte{2, 0x0c, 0xcd, 0x0c, 0xcc, 0, 0, 3})
	f.Add([]byte{4, 0, 1, 0, 2, 0x40, 0, 0x10, 0, 200, 200, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 4 {
			return
		}
		records := 1 + int(in[0])%4
		if len(in) < 1+2*records+1 {
			return
		}
		var sizes []int
		for i := range records {
			sizes = append(sizes, 5*int(binary.BigEndian.Uint16(in[1+2*i:])))
		}
		var pieces []int
		for _, b := range in[1+2*records:] {
			pieces = append(pieces, 1+int(b)*int(b)*4) // 1 byte to 254 KiB
		}
		x, y := newBufPair()
		sa, sb := rawPair(t, x, y, aead.AES128GCM)
		var wire, want []byte
		var boundaries []int
		for i, n := range sizes {
			msg := make([]byte, n)
			for j := range msg {
				msg[j] = byte(i*31 + j*7)
			}
			boundaries = append(boundaries, len(wire))
			wire = append(wire, sealTypeForTest(t, sa, msg, recordData)...)
			want = append(want, msg...)
		}
		boundaries = append(boundaries, len(wire))
		wire = append(wire, sealTypeForTest(t, sa, nil, recordClose)...)
		budget := &testBudget{}
		sb.in.mem = budget
		sb.conn = &pieceConn{t: t, data: wire, pieces: pieces, boundaries: boundaries, budget: budget}
		got, err := io.ReadAll(sb)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("records of %v bytes in pieces of %v: %v, data equal %v", sizes, pieces, err, bytes.Equal(got, want))
		}
		if budget.Used() != 0 {
			t.Fatalf("%d bytes held after the close record", budget.Used())
		}
	})
}
