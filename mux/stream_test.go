package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestHalfClose(t *testing.T) {
	sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
		done := make(chan error, 1)
		go func() {
			st, err := s.AcceptStream(context.Background())
			if err != nil {
				done <- err
				return
			}
			req, err := io.ReadAll(st) // until the client's CloseWrite
			if err == nil {
				_, err = st.Write(append([]byte("re: "), req...))
			}
			if err == nil {
				err = st.Close()
			}
			done <- err
		}()
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte("question")); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte("more")); !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("write after CloseWrite = %v", err)
		}
		resp, err := io.ReadAll(st)
		if err != nil || string(resp) != "re: question" {
			t.Fatalf("response %q, %v", resp, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		st.Close()
		if _, err := st.Read(make([]byte, 1)); !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("read after Close = %v", err)
		}
		waitFor(t, "streams to be freed", func() bool { return c.NumStreams() == 0 && s.NumStreams() == 0 })
	})
}

func TestReset(t *testing.T) {
	sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
		ctx := context.Background()
		st, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte("hi"))
		acc, err := s.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		blocked := make(chan error, 1)
		go func() {
			_, err := st.Read(make([]byte, 1)) // blocked until the reset
			blocked <- err
		}()
		time.Sleep(10 * time.Millisecond)
		if err := st.Reset(); err != nil {
			t.Fatal(err)
		}
		st.Reset() // idempotent
		if err := <-blocked; !errors.Is(err, ErrStreamReset) {
			t.Fatalf("blocked Read after Reset = %v", err)
		}
		if _, err := st.Write([]byte("x")); !errors.Is(err, ErrStreamReset) {
			t.Fatalf("Write after Reset = %v", err)
		}
		acc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 10)
		var rerr error
		for rerr == nil {
			_, rerr = acc.Read(buf)
		}
		if !errors.Is(rerr, ErrStreamReset) {
			t.Fatalf("remote Read after Reset = %v", rerr)
		}
		waitFor(t, "streams to be freed", func() bool { return c.NumStreams() == 0 && s.NumStreams() == 0 })
	})
}

func TestDeadlines(t *testing.T) {
	a, b := net.Pipe()
	c, s := sessionPair(t, a, b, nil, nil)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = st.Read(make([]byte, 1))
	var ne net.Error
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past deadline = %v", err)
	}
	// the stream still works after a timeout
	st.SetDeadline(time.Time{})
	st.Write([]byte("ok"))
	acc, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	acc.Write([]byte("!"))
	if _, err := io.ReadFull(st, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	// a write blocked on a full window times out
	st.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	big := make([]byte, 4<<20)
	if _, err := st.Write(big); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Write past deadline = %v", err)
	}
}

// TestStreamEOFvsSessionLoss checks that a stream ended by the peer reads
// io.EOF, while a stream cut by the loss of the session reads
// ErrSessionClosed.
func TestStreamEOFvsSessionLoss(t *testing.T) {
	a, b := testutil.TCPPair(t)
	c, s := sessionPair(t, a, b, nil, nil)
	ctx := context.Background()
	ended, _ := c.OpenStream(ctx)
	cut, _ := c.OpenStream(ctx)
	ended.Write([]byte("a"))
	cut.Write([]byte("b"))
	sEnded, err := s.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sCut, err := s.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ended.CloseWrite()
	if got, err := io.ReadAll(sEnded); err != nil || string(got) != "a" {
		t.Fatalf("ended stream: %q, %v", got, err)
	}
	a.Close() // the connection dies
	got, err := io.ReadAll(sCut)
	if string(got) != "b" || !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("cut stream: %q, %v; want ErrSessionClosed", got, err)
	}
}

// TestLargeTransfer moves 16 MiB each way with unequal windows: the server's
// 4 MiB window lets the client send frames larger than the client's own
// coalescing limit, which then pass through.
func TestLargeTransfer(t *testing.T) {
	a, b := testutil.TCPPair(t)
	c, s := sessionPair(t, a, b, &Config{MaxStreamWindow: MinStreamWindow}, &Config{MaxStreamWindow: 4 << 20})
	wait := echo(t, s)
	data := make([]byte, 16<<20)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(data)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		st.Write(data)
		st.CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, st)
	if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), sha256Sum(data)) {
		t.Fatalf("echo: %d bytes, %v", n, err)
	}
	st.Close()
	c.Close()
	s.Close()
	wait()
}

// TestStreamAfterEnd: the function runs once the stream ends, however it ends, and not
// after stop.
func TestStreamAfterEnd(t *testing.T) {
	ends := map[string]func(local, remote *Stream, c *Session){
		"peer reset":     func(_, remote *Stream, _ *Session) { remote.Reset() },
		"local reset":    func(local, _ *Stream, _ *Session) { local.Reset() },
		"closed here":    func(local, _ *Stream, _ *Session) { local.Close() },
		"both closed":    func(local, remote *Stream, _ *Session) { local.CloseWrite(); remote.CloseWrite() },
		"session closed": func(_, _ *Stream, c *Session) { c.Close() },
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			a, b := net.Pipe()
			c, s := sessionPair(t, a, b, nil, nil)
			local, err := c.OpenStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			local.Write([]byte("x"))
			remote, err := s.AcceptStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan struct{})
			local.AfterEnd(func() { close(ran) })
			stopped := false
			stop := local.AfterEnd(func() { stopped = true })
			if !stop() {
				t.Fatal("stop before the end did not stop")
			}
			select {
			case <-ran:
				t.Fatal("ran before the stream ended")
			case <-time.After(10 * time.Millisecond):
			}
			end(local, remote, c)
			select {
			case <-ran:
			case <-time.After(5 * time.Second):
				t.Fatal("did not run after the stream ended")
			}
			if stopped {
				t.Fatal("a stopped function ran")
			}
			late := make(chan struct{})
			local.AfterEnd(func() { close(late) })
			<-late
		})
	}
}

// TestStreamOverBudget: data that arrives and does not fit the budget resets its stream with
// ErrMemoryBudget; the session and its other streams go on, and an idle stream holds
// nothing of the budget once its data is read.
func TestStreamOverBudget(t *testing.T) {
	a, b := net.Pipe()
	c, s := sessionPair(t, a, b, nil, &Config{MaxSessionMemory: 400 << 10})
	var remote []*Stream
	var written sync.WaitGroup
	for range 2 {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// Within the window, not read by the acceptor until both are written (over
		// net.Pipe, a Write returns once the peer has read it).
		written.Go(func() { st.Write(make([]byte, 240<<10)) })
		r, err := s.AcceptStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		remote = append(remote, r)
		written.Wait()
	}
	_, err := io.ReadFull(remote[1], make([]byte, 240<<10))
	if !errors.Is(err, ErrMemoryBudget) || !errors.Is(err, ErrStreamReset) {
		t.Fatalf("the stream beyond the budget: %v, want a reset matching ErrMemoryBudget", err)
	}
	if _, err := io.ReadFull(remote[0], make([]byte, 240<<10)); err != nil {
		t.Fatalf("the stream within the budget: %v", err)
	}
	waitFor(t, "the budget given back", func() bool { return s.MemoryUsed() == 0 })
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte("still there"))
	r, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatalf("the session after a stream over budget: %v", err)
	}
	if _, err := io.ReadFull(r, make([]byte, 11)); err != nil {
		t.Fatalf("the session after a stream over budget: %v", err)
	}
}

// slowClose is a connection whose Close takes a while, as a secure connection's does when
// it writes out what it queued and lingers for the peer's close.
type slowClose struct {
	net.Conn
	d time.Duration
}

func (c slowClose) Close() error {
	time.Sleep(c.d)
	return c.Conn.Close()
}

// TestDeadlinesWhileSessionFails: a Read holding the read turn with a 200 ms deadline
// returns within a second when the peer breaks the protocol and closing the connection
// takes seconds (before, the Read ran the session's shutdown itself: 5 s behind a stuck
// writer); a Write with a 300 ms deadline returns within a second while the connection's
// write is stuck (before: after ConnectionWriteTimeout, 10 s).
func TestDeadlinesWhileSessionFails(t *testing.T) {
	t.Run("read", func(t *testing.T) {
		var raw net.Conn // the server's connection: the test writes garbage on it
		_, st, _, _ := holderPair(t, func() (net.Conn, net.Conn) {
			a, b := net.Pipe()
			raw = b
			return slowClose{a, 3 * time.Second}, b
		})
		st.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		start := time.Now()
		done := blockedRead(t, st)
		go raw.Write([]byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}) // not a frame
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the Read is still blocked")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a Read with a 200 ms deadline returned after %v", d)
		}
	})
	t.Run("write", func(t *testing.T) {
		a, peer := net.Pipe() // the peer reads nothing: every write blocks
		defer peer.Close()
		c, err := Client(a, &Config{ConnectionWriteTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		start := time.Now()
		_, err = st.Write([]byte("hello"))
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a Write with a 300 ms deadline returned after %v (%v)", d, err)
		}
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Write = %v, want ErrTimeout", err)
		}
	})
}

// TestWriteFinal: the end of the stream rides on the data's last frame (one frame, where
// Write and CloseWrite are two), and the peer reads the data then io.EOF.
func TestWriteFinal(t *testing.T) {
	a, peer := net.Pipe()
	defer peer.Close()
	c, err := Client(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan header, 4)
	go func() {
		var h header
		for {
			if _, err := io.ReadFull(peer, h[:]); err != nil {
				close(frames)
				return
			}
			if h.typ() == typeData {
				io.CopyN(io.Discard, peer, int64(h.length()))
			}
			frames <- h
		}
	}()
	if _, err := st.WriteFinal([]byte("request")); err != nil {
		t.Fatal(err)
	}
	h := <-frames
	if h.typ() != typeData || h.flags() != flagSYN|flagFIN || h.length() != 7 {
		t.Fatalf("first frame: type %d flags %#x length %d, want data SYN|FIN of 7 bytes", h.typ(), h.flags(), h.length())
	}
	if _, err := st.Write([]byte("x")); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("Write after WriteFinal: %v, want ErrStreamClosed", err)
	}
}

// TestDeadlineSetWhileBlocked sets deadlines on streams whose Reads and Writes are already
// blocked with no deadline set: a deadline set to now, or one that passes later, must wake
// each of them, whether it holds the read turn or waits for it.
func TestDeadlineSetWhileBlocked(t *testing.T) {
	sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
		const n = 6
		var streams []*Stream
		for range n {
			st, err := c.OpenStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
		}
		errs := make(chan error, 2*n)
		for _, st := range streams {
			go func() {
				_, err := st.Read(make([]byte, 1))
				errs <- err
			}()
		}
		// Writes blocked on a full window: the server never reads.
		var writers []*Stream
		for range 2 {
			st, err := c.OpenStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			writers = append(writers, st)
			go func() {
				_, err := st.Write(make([]byte, 4<<20))
				errs <- err
			}()
		}
		time.Sleep(100 * time.Millisecond) // every call blocked, with no deadline set
		for i, st := range streams {
			if i%2 == 0 {
				st.SetReadDeadline(time.Now())
			} else {
				st.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			}
		}
		writers[0].SetWriteDeadline(time.Now())
		writers[1].SetDeadline(time.Now().Add(20 * time.Millisecond))
		for range n + len(writers) {
			select {
			case err := <-errs:
				if !errors.Is(err, ErrTimeout) {
					t.Fatalf("blocked call after its deadline = %v, want ErrTimeout", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("a blocked call slept through its deadline")
			}
		}
	})
}

// TestCloseStopsPeerWriter: a reader that closes its stream without reading everything
// resets the stream for the peer, whose blocked or later Write fails with ErrStreamReset
// instead of waiting for ever for window (it waited until its own deadline: a relay
// circuit whose target gave up stayed full until the relay's duration limit). What the
// closing side wrote before its Close is still read in full by the peer, then io.EOF.
func TestCloseStopsPeerWriter(t *testing.T) {
	for _, readFirst := range []int{0, 1000, InitialStreamWindow} {
		t.Run(fmt.Sprintf("read=%d", readFirst), func(t *testing.T) {
			sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
				st, err := c.OpenStream(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				writeErr := make(chan error, 1)
				go func() {
					_, err := st.Write(make([]byte, 8<<20)) // far beyond any window
					writeErr <- err
				}()
				acc, err := s.AcceptStream(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if readFirst > 0 {
					if _, err := io.ReadFull(acc, make([]byte, readFirst)); err != nil {
						t.Fatal(err)
					}
				}
				reply := bytes.Repeat([]byte("reply"), 1000)
				if _, err := acc.Write(reply); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond) // the writer blocked on the window
				acc.Close()
				select {
				case err := <-writeErr:
					if !errors.Is(err, ErrStreamReset) {
						t.Fatalf("peer's Write after Close = %v, want ErrStreamReset", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the peer's Write still waits for window after the reader closed")
				}
				got, err := io.ReadAll(st)
				if err != nil || !bytes.Equal(got, reply) {
					t.Fatalf("peer read %d bytes of the %d written before Close, err %v", len(got), len(reply), err)
				}
				waitFor(t, "streams and their memory to be freed", func() bool {
					return c.NumStreams() == 0 && s.NumStreams() == 0 && c.MemoryUsed() == 0 && s.MemoryUsed() == 0
				})
			})
		})
	}
}
