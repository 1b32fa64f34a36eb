package secio

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

// BenchmarkHandshake runs complete handshakes, both sides, over net.Pipe and
// over loopback TCP (dial and accept included; sockets closed with a reset
// so that TIME_WAIT does not pile up), for each key exchange. handshakes/s
// is wall-clock (both sides run in parallel when GOMAXPROCS >= 2);
// handshakes/cpu-s divides by the process's CPU time, which is the rate per
// core for a pair of endpoints (each endpoint alone does half the work).
// dialer-B and listener-B are the handshake bytes each side writes. The
// ".../retry" case starts with a classical share that the listener refuses
// (one more round trip). "tcp/tls13-default" is crypto/tls 1.3 with its
// defaults (X25519MLKEM768, AES-128-GCM) and a self-signed ECDSA P-256
// certificate, for a comparison in one run.
func BenchmarkHandshake(b *testing.B) {
	for _, tr := range []string{"pipe", "tcp"} {
		for _, kex := range []KeyExchange{P256MLKEM768, X25519MLKEM768, X25519, P256} {
			b.Run(tr+"/"+kex.String(), func(b *testing.B) {
				ca, cb := testConfig("a"), testConfig("b")
				ca.KeyExchanges, cb.KeyExchanges = []KeyExchange{kex}, []KeyExchange{kex}
				benchHandshake(b, tr, ca, cb)
			})
		}
		if tr == "tcp" {
			b.Run("tcp/tls13-default", benchTLSHandshake)
		}
		b.Run(tr+"/X25519MLKEM768/retry", func(b *testing.B) {
			ca, cb := testConfig("a"), testConfig("b")
			ca.KeyExchanges = []KeyExchange{X25519, X25519MLKEM768}
			cb.KeyExchanges = []KeyExchange{X25519MLKEM768}
			benchHandshake(b, tr, ca, cb)
		})
	}
}

func benchHandshake(b *testing.B, tr string, ca, cb *Config) {
	pair := func() (net.Conn, net.Conn) { return net.Pipe() }
	if tr == "tcp" {
		pair = loopbackDialer(b)
	}
	b.ReportAllocs()
	var wa, wb recorder
	{
		x, y := net.Pipe()
		sa, sb, errA, errB := handshakePair(&recordConn{Conn: x, rec: &wa}, &recordConn{Conn: y, rec: &wb}, ca, cb)
		if errA != nil || errB != nil {
			b.Fatal(errA, errB)
		}
		sa.close(false)
		sb.close(false)
	}
	dialerBytes, listenerBytes := 0, 0
	for _, w := range wa.writes {
		dialerBytes += len(w)
	}
	for _, w := range wb.writes {
		listenerBytes += len(w)
	}
	cpu0 := processCPUTime()
	for b.Loop() {
		x, y := pair()
		sa, sb, errA, errB := handshakePair(x, y, ca, cb)
		if errA != nil || errB != nil {
			b.Fatal(errA, errB)
		}
		// Without close records: over net.Pipe, with neither end
		// reading, each would wait for its timeout.
		sa.close(false)
		sb.close(false)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "handshakes/s")
	b.ReportMetric(float64(dialerBytes), "dialer-B")
	b.ReportMetric(float64(listenerBytes), "listener-B")
	// Both sides of b.N handshakes per CPU-second of the process: the
	// rate one core sustains when running both ends.
	if cpu := processCPUTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "handshakes/cpu-s")
	}
}

// loopbackDialer returns a function that dials a fresh loopback TCP
// connection to a listener kept for the benchmark. Both ends close with a
// reset (SO_LINGER 0).
func loopbackDialer(b *testing.B) func() (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	addr := ln.Addr().String()
	return func() (net.Conn, net.Conn) {
		x, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		y, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		x.(*net.TCPConn).SetLinger(0)
		y.(*net.TCPConn).SetLinger(0)
		return x, y
	}
}

var benchSuites = []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305}

// BenchmarkConnWriteRead sends writes through a pair of Conns over an
// in-memory buffered connection (no TCP, one goroutine): framing, AEAD and
// the two copies of the in-memory transport. 16 KiB is a record the reader
// takes in one buffer; 256 KiB + 48 B is the mux's batch of four 64 KiB
// frames, the largest record the root package sends.
func BenchmarkConnWriteRead(b *testing.B) {
	for _, s := range benchSuites {
		for _, size := range []int{16 << 10, 256<<10 + 48} {
			b.Run(fmt.Sprintf("%s/%dKiB", s, size>>10), func(b *testing.B) {
				x, y := newBufPair()
				sa, sb := rawPair(b, x, y, s)
				msg := make([]byte, size)
				buf := make([]byte, size)
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := sa.Write(msg); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(sb, buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkReadArrived reads records over loopback TCP that have wholly
// arrived in the reader's socket before Read is called (the timer stops
// while they are written): the reading side's cost alone, with the socket's
// copy into the process. A record longer than readAhead is read straight
// into its buffer where the Conn can ask the socket how much has arrived,
// otherwise received in chunks and copied.
func BenchmarkReadArrived(b *testing.B) {
	for _, s := range benchSuites {
		for _, size := range []int{16 << 10, 256<<10 + 48} {
			b.Run(fmt.Sprintf("%s/%dKiB", s, size>>10), func(b *testing.B) {
				ca, cb := testConfig("a"), testConfig("b")
				ca.Ciphers = []aead.Suite{s}
				sa, sb := securePair(b, transports[1], ca, cb)
				for _, c := range []*Conn{sa, sb} {
					c.NetConn().(*net.TCPConn).SetReadBuffer(4 << 20)
					c.NetConn().(*net.TCPConn).SetWriteBuffer(4 << 20)
				}
				q := newSocketQueue(sb.NetConn())
				frameLen := frameHeaderSize + size + recordTypeSize + s.Overhead()
				msg := make([]byte, size)
				buf := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					if _, err := sa.Write(msg); err != nil {
						b.Fatal(err)
					}
					for {
						n, ok := q.waiting()
						if !ok {
							b.Skip("the socket cannot tell how many bytes wait in it")
						}
						if n >= frameLen {
							break
						}
						runtime.Gosched()
					}
					b.StartTimer()
					if _, err := io.ReadFull(sb, buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkConnWriteReadBudget is BenchmarkConnWriteRead with a memory
// budget (a mutex-guarded counter, as mux.Budget is) charged for the read
// buffers: what Config.Memory adds per record.
func BenchmarkConnWriteReadBudget(b *testing.B) {
	for _, size := range []int{16 << 10, 256<<10 + 48} {
		b.Run(fmt.Sprintf("AES-128-GCM/%dKiB", size>>10), func(b *testing.B) {
			x, y := newBufPair()
			sa, sb := rawPair(b, x, y, aead.AES128GCM)
			sb.in.mem = &testBudget{parent: &testBudget{}}
			msg := make([]byte, size)
			buf := make([]byte, size)
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sa.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(sb, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkControlRecords is what a record costs its receiver when it carries
// no data, against one that carries a byte: an empty data record, and a key
// update (the receiver derives the sender's next secret, key and IV and sets
// up its AEAD: in place with the vector kernels) as the 65th record of its
// key, the earliest it is accepted. "hostile-mix" is the most costly stream a
// peer can keep up without being refused, per record: four runs of 15 empty
// records and a one-byte one, then a key update, over and over. The records
// are sealed beforehand, a batch at a time with the timer stopped; the timed
// loop is the receiver's readFrame alone, one record per operation.
func BenchmarkControlRecords(b *testing.B) {
	for _, kind := range []string{"data-1B", "empty-data", "key-update", "hostile-mix"} {
		b.Run(kind, func(b *testing.B) {
			x, y := newBufPair()
			sa, sb := rawPair(b, x, y, aead.AES128GCM)
			const batch = 16 * (keyUpdateMinRecords + 1)
			var wire []byte
			keyUpdate := func() {
				wire = append(wire, sealTypeForTest(b, sa, nil, recordKeyUpdate)...)
				if err := sa.out.update(); err != nil {
					b.Fatal(err)
				}
			}
			seal := func() {
				wire = wire[:0]
				for i := range batch {
					switch kind {
					case "data-1B":
						wire = append(wire, sealTypeForTest(b, sa, []byte{1}, recordData)...)
					case "empty-data":
						wire = append(wire, sealTypeForTest(b, sa, nil, recordData)...)
					case "key-update":
						sa.out.seq = keyUpdateMinRecords
						keyUpdate()
					default:
						if j := i % (keyUpdateMinRecords + 1); j == keyUpdateMinRecords {
							keyUpdate()
						} else if j%maxNonDataRecords == maxNonDataRecords-1 {
							wire = append(wire, sealTypeForTest(b, sa, []byte{1}, recordData)...)
						} else {
							wire = append(wire, sealTypeForTest(b, sa, nil, recordData)...)
						}
					}
				}
			}
			src := &fuzzConn{r: bytes.NewReader(nil)}
			p := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%batch == 0 {
					b.StopTimer()
					seal()
					src.r.Reset(wire)
					b.StartTimer()
				}
				switch kind {
				case "key-update":
					sb.in.seq = keyUpdateMinRecords // as the sender sealed it
					sb.in.nonData = 0               // as data records around it would
				case "empty-data":
					sb.in.nonData = 0
				}
				if _, err := sb.in.readFrame(src, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawSealOpen is the floor for BenchmarkConnWriteRead: Seal and
// Open of the same size with the same suite, in place, no framing.
func BenchmarkRawSealOpen(b *testing.B) {
	for _, s := range benchSuites {
		b.Run(s.String()+"/16KiB", func(b *testing.B) {
			key := make([]byte, s.KeySize())
			a, _ := aead.New(s, key)
			nonce := make([]byte, 12)
			msg := make([]byte, 16<<10)
			buf := make([]byte, 0, len(msg)+16)
			out := make([]byte, len(msg))
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				ct := a.Seal(buf[:0], nonce, msg, nil)
				if _, err := a.Open(out[:0], nonce, ct, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTCP compares bulk throughput over loopback TCP: secio with
// AES-128-GCM against crypto/tls 1.3 with TLS_AES_128_GCM_SHA256, same
// write sizes, in the same run. 256 KiB + 48 B is the mux's batch, a record
// longer than a read buffer may commit ahead of arrival. cpu-ns/op is the
// process's CPU time per write (both ends), steadier than the wall clock on
// a shared machine; copied-B/op, the bytes per write that the reader copied
// out of chunks (a long record that had not arrived when its length prefix
// was read).
func BenchmarkTCP(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 64 << 10, 256<<10 + 48} {
		b.Run(fmt.Sprintf("secio/AES-128-GCM/%dKiB", size>>10), func(b *testing.B) {
			ca, cb := testConfig("a"), testConfig("b")
			ca.Ciphers = []aead.Suite{aead.AES128GCM}
			w, r := securePair(b, transports[1], ca, cb)
			benchStream(b, w, r, size)
		})
		b.Run(fmt.Sprintf("tls13/AES-128-GCM/%dKiB", size>>10), func(b *testing.B) {
			w, r := tlsPair(b)
			benchStream(b, w, r, size)
		})
	}
}

func benchStream(b *testing.B, w, r net.Conn, size int) {
	msg := make([]byte, size)
	done := make(chan error, 1)
	total := int64(0)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPUTime()
	defer func() {
		b.ReportMetric(float64(processCPUTime()-cpu)/float64(b.N), "cpu-ns/op")
	}()
	go func() {
		buf := make([]byte, 64<<10)
		want := int64(b.N) * int64(size)
		var got int64
		for got < want {
			n, err := r.Read(buf)
			got += int64(n)
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range b.N {
		n, err := w.Write(msg)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(n)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if c, ok := r.(*Conn); ok {
		b.ReportMetric(float64(c.in.copied)/float64(b.N), "copied-B/op")
	}
}

// tlsConfigs returns crypto/tls 1.3 configurations for a server with a new self-signed
// P-256 certificate for "bench" and for a client that trusts it.
func tlsConfigs(b *testing.B) (srv, cli *tls.Config) {
	b.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "bench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		DNSNames:     []string{"bench"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(der)
	pool.AddCert(leaf)
	srv = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS13}
	cli = &tls.Config{RootCAs: pool, ServerName: "bench", MinVersion: tls.VersionTLS13}
	return srv, cli
}

// tlsHandshake runs a TLS handshake, the client on x and the server on y at once.
func tlsHandshake(b *testing.B, x, y net.Conn, srvCfg, cliCfg *tls.Config) (cli, srv *tls.Conn) {
	srv, cli = tls.Server(y, srvCfg), tls.Client(x, cliCfg)
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		b.Fatal(err)
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return cli, srv
}

func tlsPair(b *testing.B) (net.Conn, net.Conn) {
	b.Helper()
	srvCfg, cliCfg := tlsConfigs(b)
	x, y := testutil.TCPPair(b)
	cli, srv := tlsHandshake(b, x, y, srvCfg, cliCfg)
	if cs := cli.ConnectionState().CipherSuite; cs != tls.TLS_AES_128_GCM_SHA256 {
		b.Fatalf("TLS suite %s, want TLS_AES_128_GCM_SHA256", tls.CipherSuiteName(cs))
	}
	b.Cleanup(func() { cli.Close(); srv.Close() })
	return cli, srv
}

// BenchmarkBufConnTransport is the in-memory transport alone, for reading
// BenchmarkConnWriteRead: one Write and one Read of a 16 KiB frame.
func BenchmarkBufConnTransport(b *testing.B) {
	x, y := newBufPair()
	frame := make([]byte, 16<<10+20)
	buf := make([]byte, 20<<10)
	b.SetBytes(16 << 10)
	b.ReportAllocs()
	for b.Loop() {
		x.Write(frame)
		if _, err := io.ReadFull(y, buf[:len(frame)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPRoundTrip sends a small message over loopback TCP and waits
// for it to come back: one small frame each way per operation, the pattern
// of request/response traffic.
func BenchmarkTCPRoundTrip(b *testing.B) {
	for _, size := range []int{64, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			sa, sb := securePair(b, transports[1], testConfig("a"), testConfig("b"))
			go func() {
				buf := make([]byte, size)
				for {
					if _, err := io.ReadFull(sb, buf); err != nil {
						return
					}
					if _, err := sb.Write(buf); err != nil {
						return
					}
				}
			}()
			msg := make([]byte, size)
			buf := make([]byte, 4096) // a multiplexer reads with a 4 KiB buffer
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sa.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(sa, buf[:size]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
		})
	}
}

// benchTLSHandshake runs crypto/tls 1.3 handshakes over loopback TCP, as
// benchHandshake does secio's, and reports the bytes each side writes.
func benchTLSHandshake(b *testing.B) {
	srvCfg, cliCfg := tlsConfigs(b)
	pair := loopbackDialer(b)
	one := func(x, y net.Conn) {
		tlsHandshake(b, x, y, srvCfg, cliCfg)
		x.Close()
		y.Close()
	}
	var wa, wb recorder
	x, y := pair()
	one(&recordConn{Conn: x, rec: &wa}, &recordConn{Conn: y, rec: &wb})
	count := func(r *recorder) (n int) {
		for _, w := range r.writes {
			n += len(w)
		}
		return n
	}
	b.ReportAllocs()
	cpu0 := processCPUTime()
	for b.Loop() {
		one(pair())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "handshakes/s")
	b.ReportMetric(float64(count(&wa)), "dialer-B")
	b.ReportMetric(float64(count(&wb)), "listener-B")
	if cpu := processCPUTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "handshakes/cpu-s")
	}
}

// BenchmarkSealRecord seals data records of the mux's write sizes (one
// 16 KiB write-behind frame, one 64 KiB data frame with its header, a
// 256 KiB batch of four) into pooled frames and gives them back: path=split
// reads the data from the writer's buffer (aesgcm's SealWithByte, where the
// kernels run), path=copy copies it into the frame and seals in place (what
// other AEADs do). The same binary measures both, so runs can alternate.
func BenchmarkSealRecord(b *testing.B) {
	for _, size := range []int{16 << 10, 64<<10 + 12, 4 * (64<<10 + 12)} {
		for _, path := range []string{"split", "copy"} {
			b.Run(fmt.Sprintf("%dB/path=%s", size, path), func(b *testing.B) {
				var out outHalf
				if err := out.install(aead.AES128GCM, &[secretSize]byte{}); err != nil {
					b.Fatal(err)
				}
				if path == "copy" {
					out.byteSealer = nil
				} else if out.byteSealer == nil {
					b.Skipf("%s has no SealWithByte", aead.Implementation(aead.AES128GCM))
				}
				chunk := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					f, err := out.sealRecord(chunk, recordData)
					if err != nil {
						b.Fatal(err)
					}
					putBuffer(f)
				}
			})
		}
	}
}
