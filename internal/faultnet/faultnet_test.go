package faultnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sink accepts one connection and returns everything it reads until EOF or error.
func sink(t *testing.T) (addr string, got <-chan result) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan result, 1)
	go func() {
		defer ln.Close()
		c, err := ln.Accept()
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		ch <- result{b, err}
	}()
	return ln.Addr().String(), ch
}

// dialThrough starts a sink and a proxy to it with faults, and dials the proxy; the proxy and
// the connection are closed when the test ends.
func dialThrough(t *testing.T, faults ...Fault) (*net.TCPConn, <-chan result) {
	t.Helper()
	addr, ch := sink(t)
	p, err := New(addr, faults...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn), ch
}

type result struct {
	b   []byte
	err error
}

func record(body string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func run(t *testing.T, faults []Fault, records ...string) (sent []byte, got result) {
	t.Helper()
	c, ch := dialThrough(t, faults...)
	for _, r := range records {
		b := record(r)
		sent = append(sent, b...)
		c.Write(b)
	}
	c.CloseWrite()
	select {
	case got = <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("sink got nothing")
	}
	return sent, got
}

func TestPassThrough(t *testing.T) {
	sent, got := run(t, nil, "alpha", "", "gamma")
	if got.err != nil || !bytes.Equal(got.b, sent) {
		t.Fatalf("got %q, %v; want %q", got.b, got.err, sent)
	}
}

func TestFaults(t *testing.T) {
	recs := []string{"aaaa", "bbbbbbbb", "cccc", "dddddddd"}
	cat := func(rs ...string) []byte {
		var b []byte
		for _, r := range rs {
			b = append(b, record(r)...)
		}
		return b
	}
	flipped := cat(recs...)
	flipped[4+4+4+2] ^= 1 << 3 // record 1 (first with MinLen 8), byte 6

	cases := []struct {
		name  string
		f     Fault
		want  []byte
		reset bool
	}{
		{"flip", Fault{Kind: FlipBit, MinLen: 8, Offset: 6, Bit: 3}, flipped, false},
		{"dup", Fault{Kind: Duplicate, Record: 2}, cat("aaaa", "bbbbbbbb", "cccc", "cccc", "dddddddd"), false},
		{"drop-skip", Fault{Kind: Drop, MinLen: 8, Skip: 1}, cat("aaaa", "bbbbbbbb", "cccc"), false},
		{"truncate", Fault{Kind: Truncate, Record: 1, Offset: 6}, append(cat("aaaa"), record("bbbbbbbb")[:6]...), false},
		{"split", Fault{Kind: Split, Record: 1}, cat(recs...), false},
		{"delay", Fault{Kind: Delay, Record: 3, Delay: 50 * time.Millisecond}, cat(recs...), false},
		{"reset", Fault{Kind: Reset, Record: 2}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, got := run(t, []Fault{tc.f}, recs...)
			if tc.reset {
				if !errors.Is(got.err, syscall.ECONNRESET) {
					t.Fatalf("reset: got %q, %v; want ECONNRESET", got.b, got.err)
				}
				return
			}
			if got.err != nil || !bytes.Equal(got.b, tc.want) {
				t.Fatalf("got %q, %v\nwant %q", got.b, got.err, tc.want)
			}
		})
	}
}

func TestRawBytesBeyondMaxRecord(t *testing.T) {
	c, ch := dialThrough(t, Fault{Kind: FlipBit, Record: 5})
	junk := []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}
	c.Write(junk)
	c.CloseWrite()
	got := <-ch
	if got.err != nil || !bytes.Equal(got.b, junk) {
		t.Fatalf("got %x, %v", got.b, got.err)
	}
}
