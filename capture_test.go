package tendril

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/tendril-p2p/tendril/secio"
)

// TestCaptureHidesIdentities records a default connection between two
// Services, with a protocol message each way: neither node's public key nor
// its peer ID appears in the capture in any form, and the first record each
// way carries an ML-KEM-768 share (the encapsulation key up, the ciphertext
// down).
func TestCaptureHidesIdentities(t *testing.T) {
	needTCP(t)
	const proto = "/capture"
	got := make(chan []byte, 2)
	h := HandlerFuncs{OnReceived: func(c *Context, msg []byte) { got <- bytes.Clone(msg) }}
	cfg := Config{Protocols: []Protocol{{Name: proto, Versions: []string{"1.0"}, Handler: h}}}
	a, b := newService(t, cfg), newService(t, cfg)
	_, target, err := listen(t, b).hostPort()
	if err != nil {
		t.Fatal(err)
	}
	p := newTapProxy(t, target)
	addr := p.addr().WithPeer(b.ID())
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
	p.close()
	up, down := p.up.Bytes(), p.down.Bytes()
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
