package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// holderPair returns a client stream whose next Read reads the connection itself (it holds
// the read turn while it waits), and the server's end of it. A first exchange lets the
// frame reader hand the turn over.
func holderPair(t *testing.T, newPair func() (net.Conn, net.Conn)) (*Session, *Stream, *Session, *Stream) {
	t.Helper()
	a, b := newPair()
	c, s := sessionPair(t, a, b, nil, nil)
	keepTurnFree(c, time.Hour)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	acc, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(acc, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	// The frame reader hands the turn over only when the Read it answered has not come back
	// yet (mayLeave); under load it may have, and the frame reader then keeps the turn.
	for i := 0; !turnFree(c); i++ {
		if i == 100 {
			t.Fatal("the frame reader never handed the read turn over")
		}
		handOver(t, c, st, func() error {
			_, err := acc.Write([]byte("!"))
			return err
		})
	}
	return c, st, s, acc
}

// turnFree reports whether nobody holds c's read turn.
func turnFree(c *Session) bool {
	c.turn.mu.Lock()
	defer c.turn.mu.Unlock()
	return !c.turn.held
}

// handPeers are the connections handWrittenPeer makes: net.Pipe, and secio, over which
// each of the peer's writes is a record of its own, so that a frame cut in two writes is a
// frame split across records.
var handPeers = []struct {
	name string
	new  func(t *testing.T) (net.Conn, net.Conn)
}{
	{"pipe", func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() }},
	{"secio", func(t *testing.T) (net.Conn, net.Conn) { return recordPair(t) }},
}

// settle gives the holder of the read turn time to read what was written to it, where a
// write does not wait for that (all but net.Pipe).
func settle() { time.Sleep(20 * time.Millisecond) }

// handWrittenPeer returns a client session over newPair's first end, whose peer (the
// second) the test writes by hand (what the client writes is read and dropped), with a
// handed-over turn kept free.
func handWrittenPeer(t *testing.T, newPair func(t *testing.T) (net.Conn, net.Conn)) (*Session, net.Conn) {
	t.Helper()
	a, peer := newPair(t)
	c, err := Client(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeBoth(c, peer) })
	keepTurnFree(c, time.Hour)
	go io.Copy(io.Discard, peer) // the SYNs, ACKs, window updates
	return c, peer
}

// keepTurnFree sets how long c's read turn stays free before its frame reader takes it
// back: long, for tests that need the next Read to take the turn however slowly it comes
// (a loaded machine under -race can take more than turnIdle between two statements).
func keepTurnFree(c *Session, d time.Duration) {
	c.turn.mu.Lock()
	c.turn.idleAfter = d
	if c.turn.idleArmed {
		c.turn.idle.Reset(d)
	}
	c.turn.mu.Unlock()
}

// handOver makes the frame reader hand the read turn to st: a Read of one byte waits on st
// before answer sends it (over net.Pipe a write returns only once the frame reader has read
// it, so an answer sent first would be buffered before anybody waits); the frame reader
// then hands it the small answer and, with nobody else waiting, the turn.
func handOver(t *testing.T, c *Session, st *Stream, answer func() error) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(st, make([]byte, 1))
		got <- err
	}()
	waitFor(t, "the Read to wait for its answer", func() bool {
		c.turn.mu.Lock()
		defer c.turn.mu.Unlock()
		return st.waitingRead || c.turn.holder == st
	})
	if err := answer(); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, "the first answer", got); err != nil {
		t.Fatal(err)
	}
}

// handOverWritten makes the frame reader of a handWrittenPeer session hand the read turn
// to st, answering st's Reads by hand (the first answer acknowledges the stream) until the
// turn is left free: as in holderPair, the frame reader keeps it when the Read it answered
// came back first.
func handOverWritten(t *testing.T, c *Session, st *Stream, peer net.Conn) {
	t.Helper()
	flags := uint16(flagACK)
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("the frame reader never handed the read turn over")
		}
		handOver(t, c, st, func() error {
			_, err := peer.Write(append(hdr(typeData, flags, st.id, 1), 'a'))
			return err
		})
		flags = 0
		if waitTurnFree(c, 100*time.Millisecond) {
			return
		}
	}
}

// waitTurnFree reports whether c's read turn is free within d.
func waitTurnFree(c *Session, d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		if turnFree(c) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// blockedRead starts a Read on st and waits until it holds the read turn.
func blockedRead(t *testing.T, st *Stream) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := st.Read(make([]byte, 1))
		done <- err
	}()
	waitFor(t, "the Read to hold the read turn", func() bool { return st.s.turn.holding.Load() == st })
	return done
}

func waitErr(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still blocked after 5 s", what)
		return nil
	}
}

// TestTurnReadReadsItself: once the frame reader has handed the turn over, a Read that
// waits reads the connection itself, and gets its data with no other goroutine reading.
func TestTurnReadReadsItself(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		c, st, _, acc := holderPair(t, newPair)
		for i := range 50 {
			done := blockedRead(t, st)
			c.turn.mu.Lock()
			loop := c.turn.loop
			c.turn.mu.Unlock()
			if loop {
				t.Fatalf("round %d: the frame reader runs beside the Read that holds the turn", i)
			}
			if _, err := acc.Write([]byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			if err := waitErr(t, "Read", done); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	})
}

// TestTurnHolderDeadline: a Read that holds the turn returns at its deadline although no
// frame comes, and the session goes on working.
func TestTurnHolderDeadline(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		_, st, _, acc := holderPair(t, newPair)
		done := blockedRead(t, st)
		st.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
		if err := waitErr(t, "Read past its deadline", done); !errors.Is(err, ErrTimeout) {
			t.Fatalf("Read past its deadline: %v", err)
		}
		st.SetReadDeadline(time.Time{})
		done = blockedRead(t, st)
		st.SetReadDeadline(time.Now().Add(-time.Second)) // already passed: wakes the holder at once
		if err := waitErr(t, "Read with a passed deadline", done); !errors.Is(err, ErrTimeout) {
			t.Fatalf("Read with a passed deadline: %v", err)
		}
		st.SetReadDeadline(time.Time{})
		go acc.Write([]byte("x")) // over net.Pipe it returns once the Read below has read it
		var b [1]byte
		if _, err := io.ReadFull(st, b[:]); err != nil || b[0] != 'x' {
			t.Fatalf("Read after the timeouts: %q, %v", b, err)
		}
	})
}

// TestTurnHolderClosed: closing or resetting a stream whose Read holds the turn ends that
// Read at once; the session's other streams keep working.
func TestTurnHolderClosed(t *testing.T) {
	for _, end := range []string{"Close", "Reset"} {
		t.Run(end, func(t *testing.T) {
			transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
				c, st, s, _ := holderPair(t, newPair)
				done := blockedRead(t, st)
				if end == "Close" {
					st.Close()
				} else {
					st.Reset()
				}
				err := waitErr(t, "Read of a closed stream", done)
				if !errors.Is(err, ErrStreamClosed) && !errors.Is(err, ErrStreamReset) {
					t.Fatalf("Read of a stream closed by %s: %v", end, err)
				}
				wait := echo(t, s)
				defer func() {
					s.Close()
					wait()
				}()
				if err := roundTrip(context.Background(), c, []byte("still here")); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// TestTurnHeaderCutByWake: a holder woken in the middle of a frame header (the peer wrote
// part of it; over secio, the header is split across two records) leaves what it read for
// the next reader; the frame arrives intact.
func TestTurnHeaderCutByWake(t *testing.T) {
	for _, hp := range handPeers {
		t.Run(hp.name, func(t *testing.T) { testTurnHeaderCutByWake(t, hp.new) })
	}
}

func testTurnHeaderCutByWake(t *testing.T, newPair func(t *testing.T) (net.Conn, net.Conn)) {
	c, peer := handWrittenPeer(t, newPair)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	handOverWritten(t, c, st, peer)
	frame := append(hdr(typeData, 0, st.id, 3), "xyz"...)
	done := blockedRead(t, st)
	if _, err := peer.Write(frame[:5]); err != nil { // net.Pipe: returns once the holder read them
		t.Fatal(err)
	}
	settle()
	st.SetReadDeadline(time.Now())
	if err := waitErr(t, "Read past its deadline", done); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Read past its deadline: %v", err)
	}
	st.SetReadDeadline(time.Time{})
	go peer.Write(frame[5:])
	got := make([]byte, 3)
	if _, err := io.ReadFull(st, got); err != nil || string(got) != "xyz" {
		t.Fatalf("the frame whose header was cut: %q, %v", got, err)
	}
}

// TestTurnNeverUnread: when nobody waits for frames after a Read that held the turn has
// returned, the connection is still read: the peer's pings are answered and its new
// streams accepted.
func TestTurnNeverUnread(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		c, st, s, acc := holderPair(t, newPair)
		done := blockedRead(t, st)
		keepTurnFree(c, turnIdle) // what is tested: the frame reader comes back
		acc.Write([]byte("x"))
		if err := waitErr(t, "Read", done); err != nil {
			t.Fatal(err)
		}
		// Nobody on c reads or waits from now on.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := s.Ping(ctx); err != nil {
			t.Fatalf("the peer's ping, with nobody waiting to read: %v", err)
		}
		accepted := make(chan struct{})
		c.Serve(func(st *Stream) {
			close(accepted)
			st.Close()
		}, nil)
		in, err := s.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		in.Write([]byte("new"))
		select {
		case <-accepted:
		case <-time.After(2 * time.Second):
			t.Fatal("the peer's new stream was not accepted: nobody reads the connection")
		}
	})
}

// TestTurnBodyCutByWake: a holder woken in the middle of a frame body (the peer sent part of
// it and stalls; over secio, the rest comes in a record of its own) returns at its
// deadline, and the next reader reads the rest: the frame arrives intact, for the holder's
// own stream and for another one.
func TestTurnBodyCutByWake(t *testing.T) {
	for _, hp := range handPeers {
		t.Run(hp.name, func(t *testing.T) { testTurnBodyCutByWake(t, hp.new) })
	}
}

func testTurnBodyCutByWake(t *testing.T, newPair func(t *testing.T) (net.Conn, net.Conn)) {
	for _, own := range []bool{true, false} {
		t.Run(map[bool]string{true: "own", false: "other"}[own], func(t *testing.T) {
			c, peer := handWrittenPeer(t, newPair)
			var sts [2]*Stream
			var err error
			for i := range sts {
				if sts[i], err = c.OpenStream(context.Background()); err != nil {
					t.Fatal(err)
				}
				if _, err := sts[i].Write([]byte("q")); err != nil {
					t.Fatal(err)
				}
			}
			st, target := sts[0], sts[1]
			if own {
				target = st
			}
			if _, err := peer.Write(hdr(typeWindowUpdate, flagACK, sts[1].id, 0)); err != nil {
				t.Fatal(err)
			}
			handOverWritten(t, c, st, peer)
			var got []byte
			done := make(chan error, 1)
			go func() {
				b := make([]byte, 3)
				n, err := st.Read(b)
				got = b[:n]
				done <- err
			}()
			waitFor(t, "the Read to hold the read turn", func() bool { return c.turn.holding.Load() == st })
			frame := append(hdr(typeData, 0, target.id, 3), "xyz"...)
			if _, err := peer.Write(frame[:13]); err != nil { // the header and "x"
				t.Fatal(err)
			}
			settle()
			st.SetReadDeadline(time.Now())
			err = waitErr(t, "Read past its deadline", done)
			if err != nil && !errors.Is(err, ErrTimeout) {
				t.Fatalf("Read past its deadline: %v", err)
			}
			if !own && len(got) != 0 {
				t.Fatalf("the holder read %q of another stream's frame", got)
			}
			st.SetReadDeadline(time.Time{})
			go peer.Write(frame[13:])
			rest := make([]byte, 3-len(got))
			if _, err := io.ReadFull(target, rest); err != nil {
				t.Fatal(err)
			}
			if all := string(got) + string(rest); all != "xyz" {
				t.Fatalf("the frame whose body was cut: %q", all)
			}
		})
	}
}

// TestAbortWithTurnFree: Abort closes the session at once even when nobody reads the
// connection (the read turn is free and its idle timer far off), so a locally aborted
// session does not stay open until a reader happens to see the connection fail.
func TestAbortWithTurnFree(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		c, st, _, _ := holderPair(t, newPair)
		c.Abort()
		select {
		case <-c.CloseChan():
		case <-time.After(5 * time.Second):
			t.Fatal("the session is still open 5 s after Abort with nobody reading")
		}
		if _, err := st.Write([]byte("x")); !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("Write after Abort: %v, want ErrSessionClosed", err)
		}
	})
}
