package memory

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// links are the shapes the connection tests run over: unshaped (the fast path), delayed,
// rate-limited with a buffer smaller than the tests' writes (flow control on every
// write).
var links = []struct {
	name string
	link Link
}{
	{"unshaped", Link{}},
	{"delay", Link{Delay: 2 * time.Millisecond}},
	{"rate+small-buffer", Link{Delay: time.Millisecond, Rate: 200 << 20, Buffer: 20000}},
}

// TestTransferChecksum sends megabytes both ways at once, in writes and reads of random
// sizes, and compares digests.
func TestTransferChecksum(t *testing.T) {
	for _, tc := range links {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t, tc.link)
			var wg sync.WaitGroup
			send := func(c *Conn, seed uint64) []byte {
				r := rand.New(rand.NewPCG(seed, 0))
				h := sha256.New()
				buf := make([]byte, 200<<10)
				for sent := 0; sent < 8<<20; {
					p := buf[:1+r.IntN(len(buf))]
					for i := range p {
						p[i] = byte(r.Uint32())
					}
					h.Write(p)
					if _, err := c.Write(p); err != nil {
						t.Error(err)
						break
					}
					sent += len(p)
				}
				if err := c.CloseWrite(); err != nil {
					t.Error(err)
				}
				return h.Sum(nil)
			}
			recv := func(c *Conn, seed uint64) []byte {
				r := rand.New(rand.NewPCG(seed, 1))
				h := sha256.New()
				buf := make([]byte, 100<<10)
				for {
					n, err := c.Read(buf[:1+r.IntN(len(buf))])
					h.Write(buf[:n])
					if err == io.EOF {
						return h.Sum(nil)
					}
					if err != nil {
						t.Error(err)
						return nil
					}
				}
			}
			var sentAB, sentBA, gotAB, gotBA []byte
			wg.Add(4)
			go func() { defer wg.Done(); sentAB = send(a, 1) }()
			go func() { defer wg.Done(); sentBA = send(b, 2) }()
			go func() { defer wg.Done(); gotAB = recv(b, 3) }()
			go func() { defer wg.Done(); gotBA = recv(a, 4) }()
			wg.Wait()
			if !bytes.Equal(sentAB, gotAB) || !bytes.Equal(sentBA, gotBA) {
				t.Fatal("the bytes read differ from those written")
			}
		})
	}
}

// TestHalfClose: after CloseWrite the peer reads the data, then io.EOF, and can still
// answer; writes on the half-closed side fail with net.ErrClosed.
func TestHalfClose(t *testing.T) {
	for _, tc := range links {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t, tc.link)
			if _, err := a.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			if err := a.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Write after CloseWrite: %v, want net.ErrClosed", err)
			}
			got, err := io.ReadAll(b)
			if err != nil || string(got) != "request" {
				t.Fatalf("peer read %q, %v; want the request then io.EOF", got, err)
			}
			if _, err := b.Write([]byte("reply")); err != nil {
				t.Fatalf("the peer's reply after our CloseWrite: %v", err)
			}
			b.Close()
			got, err = io.ReadAll(a)
			if err != nil || string(got) != "reply" {
				t.Fatalf("read %q, %v after CloseWrite; want the reply then io.EOF", got, err)
			}
		})
	}
}

// TestClose: Close ends both directions: the peer reads the data written before, then
// io.EOF, and its writes fail with ErrReset (ECONNRESET); this end's reads and writes
// fail with net.ErrClosed, pending ones too; closing again is an error.
func TestClose(t *testing.T) {
	for _, tc := range links {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t, tc.link)
			if _, err := a.Write([]byte("last words")); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("second Close: %v, want net.ErrClosed", err)
			}
			if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Read after Close: %v, want net.ErrClosed", err)
			}
			if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Write after Close: %v, want net.ErrClosed", err)
			}
			if err := a.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
				t.Errorf("SetDeadline after Close: %v, want net.ErrClosed", err)
			}
			got, err := io.ReadAll(b)
			if err != nil || string(got) != "last words" {
				t.Fatalf("peer read %q, %v; want the data then io.EOF", got, err)
			}
			_, err = b.Write([]byte("anyone?"))
			if !errors.Is(err, ErrReset) || !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("Write to a closed peer: %v, want ErrReset and ECONNRESET", err)
			}
		})
	}
}

// TestCloseUnblocks: Close wakes a Read waiting for data and a Write waiting for space,
// on this end (net.ErrClosed) and on the peer's (io.EOF, ErrReset).
func TestCloseUnblocks(t *testing.T) {
	for _, closeSelf := range []bool{true, false} {
		a, b := pair(t, Link{Buffer: 10})
		if _, err := a.Write(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		go func() { _, err := a.Write(make([]byte, 1)); errs <- err }()
		go func() { _, err := a.Read(make([]byte, 1)); errs <- err }()
		time.Sleep(20 * time.Millisecond)
		select {
		case err := <-errs:
			t.Fatalf("a Read or Write returned before Close: %v", err)
		default:
		}
		wantW, wantR := ErrReset, io.EOF
		if closeSelf {
			a.Close()
			wantW, wantR = net.ErrClosed, net.ErrClosed
		} else {
			b.Close()
		}
		for range 2 {
			select {
			case err := <-errs:
				if !errors.Is(err, wantW) && !errors.Is(err, wantR) {
					t.Errorf("close (this end %v): %v, want %v or %v", closeSelf, err, wantW, wantR)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("close (this end %v) did not unblock Read and Write", closeSelf)
			}
		}
	}
}

// TestDeadlines: a timeout is a net.Error with Timeout() that wraps
// os.ErrDeadlineExceeded; a Write that times out reports what it wrote; deadlines are
// re-settable after they passed.
func TestDeadlines(t *testing.T) {
	a, b := pair(t, Link{Buffer: 100})
	start := time.Now()
	a.SetReadDeadline(start.Add(20 * time.Millisecond))
	_, err := a.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v, want a timeout", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Read timed out after %v, before its deadline", d)
	}
	a.SetReadDeadline(time.Time{})
	b.Write([]byte("x"))
	if _, err := a.Read(make([]byte, 1)); err != nil {
		t.Fatalf("Read after clearing a passed deadline: %v", err)
	}

	a.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	n, err := a.Write(make([]byte, 150))
	if n != 100 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write of 150 bytes into a 100-byte buffer: %d, %v; want 100 and a timeout", n, err)
	}
	a.SetWriteDeadline(time.Now().Add(time.Hour))
	go io.ReadFull(b, make([]byte, 150))
	if n, err := a.Write(make([]byte, 50)); n != 50 || err != nil {
		t.Fatalf("Write after extending the deadline: %d, %v", n, err)
	}
}

// TestWriteBlocksWhenFull: a direction holds Buffer bytes written and unread; Write then
// waits until the peer reads.
func TestWriteBlocksWhenFull(t *testing.T) {
	a, b := pair(t, Link{Buffer: 1000})
	if n, err := a.Write(make([]byte, 1000)); n != 1000 || err != nil {
		t.Fatalf("filling the buffer: %d, %v", n, err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.Write([]byte("more")); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("Write into a full buffer returned at once (%v)", err)
	case <-time.After(30 * time.Millisecond):
	}
	if _, err := b.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Write still blocked after the peer read")
	}
}

// TestWriteCopies: Write keeps no reference to its slice.
func TestWriteCopies(t *testing.T) {
	for _, tc := range links {
		a, b := pair(t, tc.link)
		p := []byte("original")
		a.Write(p)
		copy(p, "XXXXXXXX")
		got := make([]byte, 8)
		if _, err := io.ReadFull(b, got); err != nil || string(got) != "original" {
			t.Fatalf("%s: read %q, %v after the writer reused its slice", tc.name, got, err)
		}
	}
}

// TestEmptyReadWrite: zero-length reads and writes return at once, as on a socket.
func TestEmptyReadWrite(t *testing.T) {
	a, _ := pair(t, Link{})
	if n, err := a.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil): %d, %v", n, err)
	}
	if n, err := a.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil): %d, %v", n, err)
	}
}
