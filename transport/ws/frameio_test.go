//go:build !js

package ws

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/transport"
)

// rawPair upgrades a raw client connection to a listener of a Transport with cfg, and
// returns the raw client, a reader of what the server sends, and the server's Conn.
func rawPair(t *testing.T, cfg Config) (net.Conn, *rawReader, *Conn) {
	t.Helper()
	ln := listen(t, New(&cfg), "/ip4/127.0.0.1/tcp/0/ws", transport.ListenOptions{})
	ch := serve(t, ln, 5*time.Second)
	c, br := rawUpgrade(t, ln, "")
	u := next(t, ch)
	if u.err != nil {
		t.Fatal(u.err)
	}
	t.Cleanup(func() { u.conn.Close() })
	// A test that waits for what never comes fails instead of hanging.
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, &rawReader{br}, u.conn.(*Conn)
}

type rawReader struct{ *bufio.Reader }

// TestReadDeadlineMidFrame: a read deadline that passes while a frame is arriving (in its
// payload, in its header, in a control frame before it) interrupts the read at once, as
// on TCP, and loses nothing: once the deadline is lifted the rest of the frame is read.
func TestReadDeadlineMidFrame(t *testing.T) {
	raw, rr, s := rawPair(t, Config{})
	payload := bytes.Repeat([]byte("0123456789"), 100)
	var stream []byte
	stream = append(stream, clientFrame(9, true, []byte("ping"))...)
	stream = append(stream, clientFrame(2, true, payload)...)
	stream = append(stream, clientFrame(2, true, []byte("next"))...)
	want := append(append([]byte(nil), payload...), "next"...)
	// Cut in the ping's header, in its payload, in the data frame's header, in its
	// payload, and in the last frame's header.
	cuts := []int{1, 4, 7, 8, 12, 500, 1000, len(stream) - 6}
	var got []byte
	buf := make([]byte, 2000)
	prev := 0
	for _, cut := range append(cuts, len(stream)) {
		if _, err := raw.Write(stream[prev:cut]); err != nil {
			t.Fatal(err)
		}
		prev = cut
		// Read what the piece brings, then time out on the rest.
		for {
			s.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			n, err := s.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				if !isTimeoutErr(err) {
					t.Fatalf("after %d bytes sent: read: %v, want a timeout", cut, err)
				}
				break
			}
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%q...), want the %d bytes sent", len(got), got[:min(len(got), 20)], len(want))
	}
	if op, p, err := readServerFrame(rr.Reader); err != nil || op != 10 || string(p) != "ping" {
		t.Fatalf("answer to the ping: opcode %d %q %v, want a pong", op, p, err)
	}
}

// TestStalledFrame: a frame that stops arriving leaves the connection as TCP would: every
// read with a deadline times out, and the frame is read whole once it comes, however late.
func TestStalledFrame(t *testing.T) {
	raw, _, s := rawPair(t, Config{})
	payload := bytes.Repeat([]byte("x"), 1000)
	f := clientFrame(2, true, payload)
	raw.Write(f[:500])
	buf := make([]byte, 2000)
	n, err := s.Read(buf)
	if err != nil || n != 500-8 {
		t.Fatalf("read %d bytes, %v; want the 492 that arrived", n, err)
	}
	for range 3 {
		s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := s.Read(buf); !isTimeoutErr(err) {
			t.Fatalf("read of a stalled frame: %v, want a timeout", err)
		}
	}
	s.SetReadDeadline(time.Time{})
	raw.Write(f[500:])
	if _, err := io.ReadFull(s, buf[:len(payload)-n]); err != nil {
		t.Fatalf("read of the rest of the frame: %v", err)
	}
}

// TestFragmentedMessage: a message in several frames, with a ping between them, reads
// as its bytes.
func TestFragmentedMessage(t *testing.T) {
	raw, rr, s := rawPair(t, Config{})
	var msg []byte
	msg = append(msg, clientFrame(2, false, []byte("frag"))...)
	msg = append(msg, clientFrame(9, true, []byte("ping"))...)
	msg = append(msg, clientFrame(0, false, []byte("men"))...)
	msg = append(msg, clientFrame(0, true, []byte("ted"))...)
	msg = append(msg, clientFrame(2, true, nil)...) // empty: nothing to read
	msg = append(msg, clientFrame(2, true, []byte("!"))...)
	raw.Write(msg)
	got := make([]byte, 11)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "fragmented!" {
		t.Fatalf("read %q, %v", got, err)
	}
	if op, p, err := readServerFrame(rr.Reader); err != nil || op != 10 || string(p) != "ping" {
		t.Fatalf("answer to a ping: opcode %d %q %v, want a pong", op, p, err)
	}
}

// TestMessageTooBig: a message longer than MaxMessage fails the read with
// ErrMessageTooBig and closes the connection with status 1009.
func TestMessageTooBig(t *testing.T) {
	raw, rr, s := rawPair(t, Config{MaxMessage: MinMessage})
	raw.Write(clientFrame(2, true, make([]byte, MinMessage))) // the longest accepted
	raw.Write(clientFrame(2, true, make([]byte, MinMessage+1)))
	if _, err := io.ReadFull(s, make([]byte, MinMessage)); err != nil {
		t.Fatalf("message of MaxMessage bytes: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if code := readCloseCode(t, rr.Reader); code != 1009 {
			t.Errorf("close status %d, want 1009", code)
		}
		raw.Write(clientFrame(8, true, []byte{0x03, 0xf1})) // the close answer
	}()
	_, err := io.ReadFull(s, make([]byte, MinMessage+1))
	if !errors.Is(err, ErrMessageTooBig) {
		t.Fatalf("read of a message too big: %v, want ErrMessageTooBig", err)
	}
	<-done
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, ErrMessageTooBig) {
		t.Fatalf("read after: %v, want ErrMessageTooBig again", err)
	}
}

// TestTextMessage: a text message fails the read with ErrTextMessage and closes the
// connection with status 1008, policy violation.
func TestTextMessage(t *testing.T) {
	raw, rr, s := rawPair(t, Config{})
	raw.Write(clientFrame(1, true, []byte("hello")))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if code := readCloseCode(t, rr.Reader); code != 1008 {
			t.Errorf("close status %d, want 1008", code)
		}
		raw.Write(clientFrame(8, true, []byte{0x03, 0xf0}))
	}()
	if _, err := s.Read(make([]byte, 10)); !errors.Is(err, ErrTextMessage) {
		t.Fatalf("read of a text message: %v, want ErrTextMessage", err)
	}
	<-done
	if _, err := s.Write([]byte("after")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after the connection was refused: %v, want net.ErrClosed", err)
	}
}

// TestPeerGone: a peer whose TCP connection ends without a close frame is io.EOF between
// frames and io.ErrUnexpectedEOF within one.
func TestPeerGone(t *testing.T) {
	raw, _, s := rawPair(t, Config{})
	raw.Write(clientFrame(2, true, []byte("last")))
	raw.Close()
	if b, err := io.ReadAll(s); err != nil || string(b) != "last" {
		t.Fatalf("read %q, %v; want \"last\" then io.EOF", b, err)
	}

	raw, _, s = rawPair(t, Config{})
	raw.Write(clientFrame(2, true, []byte("cut short"))[:8])
	raw.Close()
	if _, err := io.ReadAll(s); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read of a frame cut short: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestClose: Close sends a close frame, the peer reads io.EOF after the data, and a
// second Close and any I/O after Close fail with net.ErrClosed.
func TestClose(t *testing.T) {
	tr := New(nil)
	d, a := pair(t, tr, tr, "/ip4/127.0.0.1/tcp/0/ws")
	io.WriteString(d, "bye")
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	if b, err := io.ReadAll(a); err != nil || string(b) != "bye" {
		t.Fatalf("peer read %q, %v; want \"bye\" then io.EOF", b, err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}
	if _, err := d.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := d.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Error("Write to a connection the peer closed succeeded")
	}
}

// TestCloseUnblocks: Close ends a Read and a Write blocked on the connection.
func TestCloseUnblocks(t *testing.T) {
	tr := New(&Config{CloseTimeout: 200 * time.Millisecond})
	d, _ := pair(t, tr, tr, "/ip4/127.0.0.1/tcp/0/ws")
	errs := make(chan error, 2)
	go func() {
		_, err := d.Read(make([]byte, 1))
		errs <- err
	}()
	go func() {
		var err error
		for err == nil {
			_, err = d.Write(make([]byte, 64<<10)) // the peer does not read
		}
		errs <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	d.Close()
	for range 2 {
		if err := <-errs; !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked call after Close: %v, want net.ErrClosed", err)
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Close took %v with CloseTimeout 200ms", el)
	}
}

// TestCloseBounded: Close waits for the peer's close frame for CloseTimeout at most.
func TestCloseBounded(t *testing.T) {
	_, rr, s := rawPair(t, Config{CloseTimeout: 300 * time.Millisecond})
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 3*time.Second {
		t.Errorf("Close with a silent peer took %v, want about 300ms", el)
	}
	if code := readCloseCode(t, rr.Reader); code != 1000 {
		t.Errorf("close status %d, want 1000", code)
	}
}
