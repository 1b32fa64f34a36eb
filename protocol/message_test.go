package protocol

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"testing/iotest"
)

func TestMessageRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 3, 4, 5, 100, 4096, growStep - 1, growStep, growStep + 1, retainSize, retainSize + 7, 3 << 20, DefaultMaxMessageSize}
	var stream bytes.Buffer
	w := NewWriter(&stream, 0)
	for i, n := range sizes {
		if err := w.WriteMessage(pattern(n, byte(i))); err != nil {
			t.Fatalf("WriteMessage(%d): %v", n, err)
		}
	}
	data := stream.Bytes()
	readers := map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(data) },
		"halfread": func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		// one byte per Read: slow, so only under -short=false and without -race
		"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
	}
	if testing.Short() || raceEnabled {
		delete(readers, "onebyte")
	}
	for name, mk := range readers {
		t.Run(name, func(t *testing.T) {
			for _, alloc := range []bool{false, true} {
				r := NewReader(mk(), 0)
				for i, n := range sizes {
					var msg []byte
					var err error
					if alloc {
						msg, err = r.ReadMessageAlloc()
					} else {
						msg, err = r.ReadMessage()
					}
					if err != nil {
						t.Fatalf("ReadMessage #%d (%d bytes): %v", i, n, err)
					}
					if msg == nil || !bytes.Equal(msg, pattern(n, byte(i))) {
						t.Fatalf("message #%d: got %d bytes, want %d", i, len(msg), n)
					}
				}
				if _, err := r.ReadMessage(); err != io.EOF {
					t.Fatalf("at end: %v, want io.EOF", err)
				}
			}
		})
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

func TestMessageTooLarge(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 10)
	if err := w.WriteMessage(make([]byte, 11)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("WriteMessage(11) with max 10 = %v", err)
	}
	if buf.Len() != 0 {
		t.Fatal("oversize message wrote bytes")
	}
	if err := w.WriteMessage(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if w.MaxSize() != 10 || NewWriter(&buf, -1).MaxSize() != DefaultMaxMessageSize {
		t.Fatal("MaxSize")
	}

	// A reader refuses an announced length over its limit without reading
	// further or allocating the body, and stays failed.
	hdr := binary.BigEndian.AppendUint32(nil, 0xffffffff)
	r := NewReader(bytes.NewReader(append(hdr, 1, 2, 3)), 0)
	allocs := testing.AllocsPerRun(1, func() {
		if _, err := r.ReadMessage(); !errors.Is(err, ErrMessageTooLarge) {
			t.Fatalf("ReadMessage = %v, want ErrMessageTooLarge", err)
		}
	})
	if allocs > 3 { // the wrapped error only
		t.Fatalf("oversize header cost %v allocations", allocs)
	}
	if _, err := r.ReadMessage(); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("second ReadMessage = %v, want sticky ErrMessageTooLarge", err)
	}
	r = NewReader(bytes.NewReader(AppendFrame(nil, make([]byte, 11))), 10)
	if _, err := r.ReadMessage(); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("11 > 10: %v", err)
	}
	if NewReader(nil, 10).MaxSize() != 10 {
		t.Fatal("Reader.MaxSize")
	}
}

// TestMessageLazyAllocation checks that a peer announcing a 4 MiB message
// but sending a few bytes does not make the reader allocate 4 MiB.
func TestMessageLazyAllocation(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, DefaultMaxMessageSize)
	frame = append(frame, "only this"...)
	var err error
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			r := NewReader(bytes.NewReader(frame), 0)
			_, err = r.ReadMessage()
		}
	}).AllocedBytesPerOp()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated message: %v, want io.ErrUnexpectedEOF", err)
	}
	if allocs > 2*growStep {
		t.Fatalf("reader allocated %d bytes for a 9-byte truncated message", allocs)
	}
}

func TestMessageTruncated(t *testing.T) {
	frame := AppendFrame(nil, []byte("hello"))
	for cut := 1; cut < len(frame); cut++ {
		r := NewReader(bytes.NewReader(frame[:cut]), 0)
		if _, err := r.ReadMessage(); err != io.ErrUnexpectedEOF {
			t.Fatalf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	r := NewReader(bytes.NewReader(nil), 0)
	if _, err := r.ReadMessage(); err != io.EOF {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
	r = NewReader(iotest.ErrReader(net.ErrClosed), 0)
	if _, err := r.ReadMessage(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("error passthrough: %v", err)
	}
}

// countingWriter counts Write calls.
type countingWriter struct {
	writes int
	buf    bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.buf.Write(p)
}

func TestWriteMessageOneWrite(t *testing.T) {
	for _, n := range []int{0, 1, 64, 4096, retainSize, retainSize + 1, 1 << 20} {
		var cw countingWriter
		w := NewWriter(&cw, 0)
		for range 3 {
			if err := w.WriteMessage(make([]byte, n)); err != nil {
				t.Fatal(err)
			}
		}
		if cw.writes != 3 {
			t.Fatalf("3 messages of %d bytes took %d writes", n, cw.writes)
		}
		if cw.buf.Len() != 3*(n+MessageHeaderSize) {
			t.Fatalf("wrote %d bytes", cw.buf.Len())
		}
	}
}

func TestWriteMessageError(t *testing.T) {
	a, b := net.Pipe()
	b.Close()
	if err := NewWriter(a, 0).WriteMessage([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("WriteMessage on closed pipe = %v", err)
	}
	a.Close()
}

func TestAppendFrame(t *testing.T) {
	got := AppendFrame([]byte{0xaa}, []byte("hi"))
	if !bytes.Equal(got, []byte{0xaa, 0, 0, 0, 2, 'h', 'i'}) {
		t.Fatalf("AppendFrame = %x", got)
	}
}

// TestReaderRetention checks that a reader drops a large buffer after use.
func TestReaderRetention(t *testing.T) {
	var stream bytes.Buffer
	stream.Write(AppendFrame(nil, make([]byte, 1<<20)))
	stream.Write(AppendFrame(nil, []byte("small")))
	r := NewReader(&stream, 0)
	if _, err := r.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	if msg, err := r.ReadMessage(); err != nil || string(msg) != "small" {
		t.Fatal(msg, err)
	}
	if cap(r.buf) > retainSize {
		t.Fatalf("reader keeps %d bytes", cap(r.buf))
	}
}

func ExampleWriter() {
	var stream bytes.Buffer
	w := NewWriter(&stream, 0)
	_ = w.WriteMessage([]byte("hello"))
	_ = w.WriteMessage([]byte("world"))
	fmt.Printf("% x\n", stream.Bytes()[:9])

	r := NewReader(bufio.NewReader(&stream), 0)
	for {
		msg, err := r.ReadMessage()
		if err != nil {
			fmt.Println(err)
			break
		}
		fmt.Printf("%s\n", msg)
	}
	// Output:
	// 00 00 00 05 68 65 6c 6c 6f
	// hello
	// world
	// EOF
}

func BenchmarkWriteMessage(b *testing.B) {
	for _, n := range []int{64, 1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			w := NewWriter(io.Discard, 0)
			msg := make([]byte, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.WriteMessage(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// repeatReader serves the same bytes forever.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

func BenchmarkReadMessage(b *testing.B) {
	for _, n := range []int{64, 1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := NewReader(&repeatReader{data: AppendFrame(nil, make([]byte, n))}, 0)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.ReadMessage(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
