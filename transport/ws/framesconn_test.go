//go:build !js

package ws

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
)

// rawServer accepts one connection on loopback and answers its upgrade by hand; it returns
// the Conn that Dial made, the raw server side and a reader of what the Conn sends.
func rawServer(t *testing.T, cfg Config) (*Conn, net.Conn, *bufio.Reader) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		c   net.Conn
		br  *bufio.Reader
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- result{err: err}
			return
		}
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			c.Close()
			ch <- result{err: err}
			return
		}
		_, err = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Accept: "+acceptKey(req.Header.Get("Sec-WebSocket-Key"))+"\r\nSec-WebSocket-Protocol: tendril\r\n\r\n")
		ch <- result{c, br, err}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := New(&cfg).Dial(ctx, ma.StringCast("/ip4/127.0.0.1/tcp/"+port+"/ws"))
	if err != nil {
		t.Fatal(err)
	}
	res := <-ch
	if res.err != nil {
		t.Fatal(res.err)
	}
	t.Cleanup(func() { d.(*Conn).ws.CloseNow(); res.c.Close() })
	// A test that waits for what never comes fails instead of hanging.
	res.c.SetDeadline(time.Now().Add(10 * time.Second))
	d.SetReadDeadline(time.Now().Add(10 * time.Second))
	return d.(*Conn), res.c, res.br
}

// readClientFrame reads one masked frame, as a client sends, and returns its opcode and
// unmasked payload.
func readClientFrame(br *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 == 0 {
		return 0, nil, errors.New("an unmasked frame from the client")
	}
	n := int(h[1] & 0x7f)
	if n >= 126 {
		return 0, nil, errors.New("a long frame")
	}
	var key [4]byte
	if _, err := io.ReadFull(br, key[:]); err != nil {
		return 0, nil, err
	}
	p := make([]byte, n)
	_, err := io.ReadFull(br, p)
	for i := range p {
		p[i] ^= key[i%4]
	}
	return h[0] & 0x0f, p, err
}

// TestBadFrames: a frame that breaks the protocol fails the read with ErrBadFrame, after
// the data before it, and closes the connection with status 1002, in both directions.
func TestBadFrames(t *testing.T) {
	bad := map[string][]byte{
		"reserved bit":             clientFrame(0x42, true, []byte("x")),
		"unknown opcode":           clientFrame(3, true, []byte("x")),
		"unmasked":                 frame(0x82, false, 0, []byte("x")),
		"fragmented ping":          clientFrame(9, false, []byte("x")),
		"long ping":                clientFrame(9, true, make([]byte, 126)),
		"continuation first":       clientFrame(0, true, []byte("x")),
		"message inside a message": append(clientFrame(2, false, []byte("a")), clientFrame(2, true, []byte("b"))...),
	}
	for name, f := range bad {
		t.Run(name, func(t *testing.T) {
			raw, rr, s := rawPair(t, Config{CloseTimeout: 500 * time.Millisecond})
			raw.Write(append(clientFrame(2, true, []byte("ok")), f...))
			got, err := io.ReadAll(s)
			if !errors.Is(err, ErrBadFrame) || !bytes.HasPrefix(got, []byte("ok")) {
				t.Fatalf("read %q, %v; want \"ok\", then ErrBadFrame", got, err)
			}
			if code := readCloseCode(t, rr.Reader); code != 1002 {
				t.Errorf("close status %d, want 1002", code)
			}
		})
	}
	t.Run("masked from the server", func(t *testing.T) {
		d, raw, br := rawServer(t, Config{CloseTimeout: 500 * time.Millisecond})
		raw.Write(append(frame(0x82, false, 0, []byte("ok")), frame(0x82, true, 5, []byte("x"))...))
		got, err := io.ReadAll(d)
		if !errors.Is(err, ErrBadFrame) || string(got) != "ok" {
			t.Fatalf("read %q, %v; want \"ok\", then ErrBadFrame", got, err)
		}
		if op, p, err := readClientFrame(br); err != nil || op != 8 || len(p) < 2 || int(p[0])<<8|int(p[1]) != 1002 {
			t.Errorf("frame from the client: opcode %d %q %v, want a close frame with status 1002", op, p, err)
		}
	})
}

// TestPings: pings are answered with the latest one's payload, one pong for a burst that
// arrives at once; the client's pong is masked.
func TestPings(t *testing.T) {
	raw, rr, s := rawPair(t, Config{})
	var burst []byte
	for i := range 100 {
		burst = append(burst, clientFrame(9, true, []byte("ping "+strconv.Itoa(i)))...)
	}
	raw.Write(append(burst, clientFrame(2, true, []byte("data"))...))
	if n, err := s.Read(make([]byte, 64<<10)); err != nil || n != 4 {
		t.Fatalf("read %d bytes, %v; want the 4 of data after the pings", n, err)
	}
	s.Write([]byte("mark")) // the pongs come before it
	pongs := 0
	for {
		op, p, err := readServerFrame(rr.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if op == 2 {
			break
		}
		if op != 10 {
			t.Fatalf("opcode %d, want pongs", op)
		}
		pongs++
		if pongs == 1 && string(p) != "ping 99" {
			t.Errorf("pong %q, want the latest ping's payload", p)
		}
	}
	if pongs != 1 {
		t.Errorf("%d pongs for a burst of 100 pings read at once, want 1", pongs)
	}

	d, rawS, br := rawServer(t, Config{})
	rawS.Write(append(frame(0x89, false, 0, []byte("hello")), frame(0x82, false, 0, []byte("x"))...))
	if _, err := io.ReadFull(d, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if op, p, err := readClientFrame(br); err != nil || op != 10 || string(p) != "hello" {
		t.Errorf("client's answer: opcode %d %q %v, want a masked pong \"hello\"", op, p, err)
	}
}

// TestPeerCloseInPieces: the peer's close frame, arriving a byte at a time behind data,
// ends the stream with io.EOF once it is whole, and is answered.
func TestPeerCloseInPieces(t *testing.T) {
	raw, rr, s := rawPair(t, Config{})
	stream := append(clientFrame(2, true, []byte("bye")), clientFrame(8, true, []byte{0x03, 0xe8, 'o', 'k'})...)
	go func() {
		for i := range stream {
			raw.Write(stream[i : i+1])
			time.Sleep(time.Millisecond)
		}
	}()
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "bye" {
		t.Fatalf("read %q, %v; want \"bye\" then io.EOF", got, err)
	}
	if code := readCloseCode(t, rr.Reader); code != 1000 {
		t.Errorf("answer: close status %d, want 1000", code)
	}
}

// TestCloseMidFrame: Close while a frame (data, a header, a pong) is half read hands the
// stream to the close handshake at that frame's end: it drops the rest of the data, reads
// on to the peer's close frame and waits for it, then ends the connection cleanly.
func TestCloseMidFrame(t *testing.T) {
	data := clientFrame(2, true, bytes.Repeat([]byte("d"), 1000))
	pong := clientFrame(10, true, []byte("pong"))
	cases := map[string]struct {
		stream []byte
		cut    int
	}{
		"in a payload": {data, 500},
		"in a header":  {append(clientFrame(2, true, []byte("x")), data...), 8},
		// (Not a ping: coder/websocket ends the close handshake at a ping, whose
		// answer it cannot send once its close frame is out.)
		"in a pong": {append(clientFrame(2, true, []byte("x")), pong...), 15},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			raw, rr, s := rawPair(t, Config{CloseTimeout: 5 * time.Second})
			raw.Write(c.stream[:c.cut])
			s.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			for {
				if _, err := s.Read(make([]byte, 2000)); err != nil {
					break
				}
			}
			start := time.Now()
			closed := make(chan error, 1)
			go func() { closed <- s.Close() }()
			if code := readCloseCode(t, rr.Reader); code != 1000 {
				t.Fatalf("close status %d, want 1000", code)
			}
			raw.Write(c.stream[c.cut:])
			time.Sleep(300 * time.Millisecond)
			select {
			case err := <-closed:
				t.Fatalf("Close returned (%v) before the peer's close frame", err)
			default:
			}
			raw.Write(clientFrame(8, true, []byte{0x03, 0xe8}))
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Errorf("Close took %v, want it to end at the peer's close frame", el)
			}
			raw.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := rr.ReadByte(); err != io.EOF {
				t.Errorf("after the close handshake: %v, want io.EOF (no reset)", err)
			}
		})
	}
}
