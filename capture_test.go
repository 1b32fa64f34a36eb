package tendril

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/tendril-p2p/tendril/secio"
)

// recordingProxy relays one connection to target and keeps every byte of
// each direction.
type recordingProxy struct {
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	up, down bytes.Buffer
}

func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			return
		}
		relay := func(dst, src net.Conn, rec *bytes.Buffer) {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				p.mu.Lock()
				rec.Write(buf[:n])
				p.mu.Unlock()
				if n > 0 {
					dst.Write(buf[:n])
				}
				if err != nil {
					dst.Close()
					return
				}
			}
		}
		p.wg.Add(2)
		go relay(s, c, &p.up)
		go relay(c, s, &p.down)
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// TestCaptureHidesIdentities records a default connection between two
// Services, with a protocol message each way: neither node's public key nor
// its peer ID appears in the capture in any form, and the first record each
// way carries an ML-KEM-768 share (the encapsulation key up, the ciphertext
// down).
func TestCaptureHidesIdentities(t *testing.T) {
	const proto = "/capture"
	got := make(chan []byte, 2)
	h := HandlerFuncs{OnReceived: func(c *Context, msg []byte) { got <- bytes.Clone(msg) }}
	cfg := Config{Protocols: []Protocol{{Name: proto, Versions: []string{"1.0"}, Handler: h}}}
	a, b := newService(t, cfg), newService(t, cfg)
	_, target, err := listen(t, b).hostPort()
	if err != nil {
		t.Fatal(err)
	}
	p := newRecordingProxy(t, target)
	addr := MustParseAddr("/ip4/127.0.0.1/tcp/" + strconv.Itoa(p.ln.Addr().(*net.TCPAddr).Port)).WithPeer(b.ID())
	sess := dialOpen(t, a, addr, proto)
	if err := sess.Send(proto, []byte("hello b")); err != nil {
		t.Fatal(err)
	}
	<-got
	if err := b.Send(a.ID(), proto, []byte("hello a")); err != nil {
		t.Fatal(err)
	}
	<-got
	sess.Close()
	a.Close()
	b.Close()
	p.ln.Close()
	p.wg.Wait()

	p.mu.Lock()
	up, down := p.up.Bytes(), p.down.Bytes()
	p.mu.Unlock()
	capture := append(bytes.Clone(up), down...)
	for _, svc := range []*Service{a, b} {
		pub := svc.PublicKey().Bytes()
		id := svc.ID()
		for name, form := range map[string][]byte{
			"public key":        pub,
			"public key (hex)":  []byte(hex.EncodeToString(pub)),
			"peer ID":           id.Bytes(),
			"peer ID digest":    id.Bytes()[2:],
			"peer ID (base58)":  []byte(id.String()),
			"peer ID (hex)":     []byte(hex.EncodeToString(id.Bytes())),
			"public key prefix": pub[:8],
		} {
			if bytes.Contains(capture, form) {
				t.Fatalf("the capture contains %s's %s", id, name)
			}
		}
	}
	// The first record each way: a ClientHello whose share is for
	// P256MLKEM768 (65 + 1184 bytes), a ServerHello whose share is the
	// P-256 key and the ciphertext (65 + 1088).
	first := func(b []byte) []byte {
		if len(b) < 4 {
			t.Fatal("nothing captured")
		}
		n := binary.BigEndian.Uint32(b)
		if len(b) < 4+int(n) {
			t.Fatal("first record cut")
		}
		return b[4 : 4+n]
	}
	ch, sh := first(up), first(down)
	// ClientHello: type, version, nonce (32), max frame (4), kex list, cipher
	// list, then the share's code and length.
	off := 1 + 2 + 32 + 4
	off += 1 + int(ch[off])
	off += 1 + int(ch[off])
	if ch[0] != 0x11 || secio.KeyExchange(ch[off]) != secio.P256MLKEM768 || binary.BigEndian.Uint16(ch[off+1:]) != 65+1184 {
		t.Fatalf("ClientHello %x... carries no ML-KEM-768 encapsulation key", ch[:min(len(ch), off+3)])
	}
	// ServerHello: type, version, nonce, max frame, kex, cipher, share length.
	off = 1 + 2 + 32 + 4
	if sh[0] != 0x13 || secio.KeyExchange(sh[off]) != secio.P256MLKEM768 || binary.BigEndian.Uint16(sh[off+2:]) != 65+1088 {
		t.Fatalf("ServerHello %x... carries no ML-KEM-768 ciphertext", sh[:min(len(sh), off+4)])
	}
}
