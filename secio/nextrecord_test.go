package secio

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// TestNextRecord: NextRecord reports the buffer a Read needs to take the next record's
// data whole (its length and the record type's byte), passing over records without data,
// counting what a short Read left as a record, keeping a record cut by a deadline, and
// ending with io.EOF at the peer's close record.
func TestNextRecord(t *testing.T) {
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	big := bytes.Repeat([]byte("0123456789abcdef"), 100000/16)
	raw := sa.NetConn()
	sa.out.mu.Lock()
	var wire []byte
	wire = append(wire, sealForTest(t, sa, []byte("hello"))...)
	wire = append(wire, sealForTest(t, sa, nil)...) // an empty data record: passed over
	wire = append(wire, sealForTest(t, sa, big)...)
	wire = append(wire, sealForTest(t, sa, []byte("!"))...)
	sa.out.mu.Unlock()
	if _, err := raw.Write(wire); err != nil {
		t.Fatal(err)
	}
	next := func(want int) {
		t.Helper()
		if n, err := sb.NextRecord(); n != want || err != nil {
			t.Fatalf("NextRecord: %d, %v; want %d", n, err, want)
		}
	}
	read := func(size int, want []byte) {
		t.Helper()
		p := make([]byte, size)
		n, err := sb.Read(p)
		if err != nil || !bytes.Equal(p[:n], want) {
			t.Fatalf("Read of %d bytes: %d, %v", size, n, err)
		}
	}
	next(6)
	next(6) // nothing is consumed until a Read
	read(6, []byte("hello"))
	next(len(big) + 1)
	read(len(big)+1, big)
	next(2)
	read(1, []byte("!")) // shorter than NextRecord asked for: the record is opened, one byte read
	sb.in.mu.Lock()
	left := len(sb.in.plain)
	sb.in.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d bytes of plaintext left", left)
	}

	// A short Read leaves the rest, which is the next "record".
	if _, err := sa.Write([]byte("split")); err != nil {
		t.Fatal(err)
	}
	next(6)
	read(2, []byte("sp"))
	next(3)
	read(3, []byte("lit"))

	// A record cut by the read deadline is kept.
	sa.out.mu.Lock()
	cut := sealForTest(t, sa, []byte("cut by a deadline"))
	sa.out.mu.Unlock()
	sb.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := sb.NextRecord(); !isTimeout(err) {
		t.Fatalf("NextRecord with nothing to read: %v, want a timeout", err)
	}
	raw.Write(cut[:7])
	sb.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := sb.NextRecord(); !isTimeout(err) {
		t.Fatalf("NextRecord of half a record: %v, want a timeout", err)
	}
	raw.Write(cut[7:])
	sb.SetReadDeadline(time.Time{})
	next(len("cut by a deadline") + 1)
	read(100, []byte("cut by a deadline"))

	sa.Close()
	if n, err := sb.NextRecord(); n != 0 || err != io.EOF {
		t.Fatalf("NextRecord after the peer's close: %d, %v; want io.EOF", n, err)
	}
}

// TestNextRecordRefusesBadRecords: a record that fails authentication is refused when it
// is opened, by the Read that takes it, and ends the connection as from Read.
func TestNextRecordRefusesBadRecords(t *testing.T) {
	sa, sb := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	sa.out.mu.Lock()
	f := sealForTest(t, sa, []byte("tampered"))
	sa.out.mu.Unlock()
	f[len(f)-1] ^= 1
	if _, err := sa.NetConn().Write(f); err != nil {
		t.Fatal(err)
	}
	n, err := sb.NextRecord()
	if err != nil {
		t.Fatalf("NextRecord: %v", err)
	}
	if _, err := sb.Read(make([]byte, n)); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Read of a tampered record: %v, want ErrAuthFailed", err)
	}
	if _, err := sb.NextRecord(); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("NextRecord after a tampered record: %v, want ErrAuthFailed", err)
	}
}
