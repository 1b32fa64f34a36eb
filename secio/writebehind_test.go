package secio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// pattern returns n bytes that differ with their offset in the stream, so
// that a reordered, dropped or repeated frame shows.
func pattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		x := uint32(off + i)
		b[i] = byte(x ^ x>>8 ^ x>>16)
	}
	return b
}

// TestWriteBehindOrder mixes frames written by the caller and frames
// written behind; the peer must read exactly the stream written.
func TestWriteBehindOrder(t *testing.T) {
	sizes := []int{100, 70 << 10, 5, writeBehindMin, writeBehindMin - 1, 200 << 10, 1, 300,
		64 << 10, 64 << 10, 64 << 10, 7, 3 << 20, 12}
	total := 0
	for _, n := range sizes {
		total += n
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			a, b := securePair(t, tr, testConfig("a"), testConfig("b"))
			errc := make(chan error, 1)
			go func() {
				off := 0
				for _, n := range sizes {
					if _, err := a.Write(pattern(off, n)); err != nil {
						errc <- err
						return
					}
					off += n
				}
				errc <- nil
			}()
			got, err := readN(b, total)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, pattern(0, total)) {
				t.Fatal("the stream read differs from the stream written")
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			waitIdleWriter(t, a)
		})
	}
}

// waitIdleWriter fails unless c's write-behind goroutine exits once nothing
// is queued.
func waitIdleWriter(t *testing.T, c *Conn) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		w := c.out.wb.Load()
		if w == nil {
			t.Fatal("no frame was written behind")
		}
		w.mu.Lock()
		running, pending := w.running, w.pending
		w.mu.Unlock()
		if !running && pending == 0 {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("writer still running with %d frames pending", pending)
		}
	}
}

// TestWriteBehindCloseDrains checks that Close writes out what was queued:
// over net.Pipe nothing is written until the peer reads, so the frames are
// still queued when Close is called.
func TestWriteBehindCloseDrains(t *testing.T) {
	a, b := securePair(t, transports[0], testConfig("a"), testConfig("b"))
	const n = 64 << 10
	for i := range 3 {
		if _, err := a.Write(pattern(i*n, n)); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	for !a.closed.Load() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // Close is past the point of no return
	// Everything queued arrives, then the close record (io.ReadAll stops at
	// io.EOF).
	got, err := io.ReadAll(b)
	if err != nil {
		t.Fatalf("peer Read after the drained Close: %v, want the data and io.EOF", err)
	}
	if !bytes.Equal(got, pattern(0, 3*n)) {
		t.Fatal("queued frames arrived damaged")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestWriteBehindCloseBounded checks that Close does not wait forever for a
// peer that never reads, and that the Write blocked on the full queue
// returns.
func TestWriteBehindCloseBounded(t *testing.T) {
	defer func(d time.Duration) { closeDrainTimeout = d }(closeDrainTimeout)
	closeDrainTimeout = 100 * time.Millisecond
	a, _ := securePair(t, transports[0], testConfig("a"), testConfig("b"))
	const n = 64 << 10
	wrote := make(chan error, 1)
	go func() {
		var err error
		for i := 0; err == nil && i < 8; i++ { // more than the queue holds
			_, err = a.Write(pattern(i*n, n))
		}
		wrote <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the writes fill the queue
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v", d)
	}
	select {
	case err := <-wrote:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked Write: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Write blocked on the queue did not return")
	}
	waitIdleWriter(t, a)
}

// TestWriteBehindUserDeadline checks that a write deadline set by the user
// bounds Close's wait when it is the earlier one.
func TestWriteBehindUserDeadline(t *testing.T) {
	a, _ := securePair(t, transports[0], testConfig("a"), testConfig("b"))
	if _, err := a.Write(pattern(0, 64<<10)); err != nil {
		t.Fatal(err)
	}
	a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	a.Close()
	if d := time.Since(start); d > closeDrainTimeout/2 {
		t.Fatalf("Close took %v despite a 50ms write deadline", d)
	}
}

// TestWriteBehindErrorSticky checks that an error of the write-behind
// goroutine reaches the caller on a later Write and stays.
func TestWriteBehindErrorSticky(t *testing.T) {
	a, b := securePair(t, transports[0], testConfig("a"), testConfig("b"))
	b.NetConn().Close() // the peer goes away without reading
	var err error
	for start := time.Now(); err == nil && time.Since(start) < 5*time.Second; {
		_, err = a.Write(pattern(0, 64<<10))
	}
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Write after the peer went away: %v, want io.ErrClosedPipe", err)
	}
	if _, err2 := a.Write([]byte("x")); !errors.Is(err2, io.ErrClosedPipe) {
		t.Fatalf("error not sticky: %v", err2)
	}
	waitIdleWriter(t, a)
}

// TestWriteBehindSmallWritesDirect checks that small frames are written by
// the caller when nothing is queued: no goroutine is started.
func TestWriteBehindSmallWritesDirect(t *testing.T) {
	a, b := securePair(t, transports[1], testConfig("a"), testConfig("b"))
	for range 100 {
		if _, err := a.Write(make([]byte, writeBehindMin-1)); err != nil {
			t.Fatal(err)
		}
		if _, err := readN(b, writeBehindMin-1); err != nil {
			t.Fatal(err)
		}
	}
	if a.out.wb.Load() != nil {
		t.Fatal("small writes went through the write-behind queue")
	}
}
