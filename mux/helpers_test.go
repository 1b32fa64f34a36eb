package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
	"github.com/tendril-p2p/tendril/internal/testutil/pairs"
)

// transports runs f over each of pairs.All: net.Pipe, loopback TCP, WebSocket and
// the in-memory transport; and over secio on loopback TCP, whose input the mux reads a
// record at a time (records.go).
func transports(t *testing.T, f func(t *testing.T, newPair func() (net.Conn, net.Conn))) {
	for _, p := range pairs.All {
		t.Run(p.Name, func(t *testing.T) { f(t, func() (net.Conn, net.Conn) { return p.New(t) }) })
	}
	t.Run("secio", func(t *testing.T) { f(t, func() (net.Conn, net.Conn) { return recordPair(t) }) })
}

// sessionPairs runs f on each transport, with a client session configured by ccfg and a
// server session by scfg over a new pair of connections (see sessionPair).
func sessionPairs(t *testing.T, ccfg, scfg *Config, f func(t *testing.T, c, s *Session)) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		a, b := newPair()
		c, s := sessionPair(t, a, b, ccfg, scfg)
		f(t, c, s)
	})
}

// sessionPair starts a client over a and a server over b; both are closed at
// the end of the test.
func sessionPair(t testing.TB, a, b net.Conn, ccfg, scfg *Config) (*Session, *Session) {
	t.Helper()
	c, err := Client(a, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Server(b, scfg)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c, s
}

// hdr encodes a frame header, for tests that play a peer by hand.
func hdr(typ uint8, flags uint16, id, length uint32) []byte {
	h := []byte{protoVersion, typ}
	h = binary.BigEndian.AppendUint16(h, flags)
	h = binary.BigEndian.AppendUint32(h, id)
	return binary.BigEndian.AppendUint32(h, length)
}

// echo accepts streams on s and echoes each until EOF, then closes it.
func echo(t testing.TB, s *Session) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			st, err := s.AcceptStream(context.Background())
			if err != nil {
				return
			}
			wg.Go(func() {
				defer st.Close()
				if _, err := io.Copy(st, st); err != nil && !errors.Is(err, ErrSessionClosed) {
					t.Errorf("echo: %v", err)
				}
				_ = st.CloseWrite()
			})
		}
	})
	return wg.Wait
}

// roundTrip writes msg on a new stream, half-closes, and reads the echo.
func roundTrip(ctx context.Context, s *Session, msg []byte) error {
	st, err := s.OpenStream(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := st.Write(msg)
		if err == nil {
			err = st.CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(st)
	if werr := <-errc; werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo of %d bytes returned %d bytes", len(msg), len(got))
	}
	return nil
}

// openAnnounced opens n streams on s and writes a byte on each, so that the peer learns of
// it (a stream's opening travels with its first frame).
func openAnnounced(t testing.TB, s *Session, n int) []*Stream {
	t.Helper()
	var streams []*Stream
	for range n {
		st, err := s.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte{1})
		streams = append(streams, st)
	}
	return streams
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// framePeer plays the client side of a server session by hand over loopback TCP: the test
// writes the frames, and what the server sends is read (unless the peer was made with read
// false) and its resets recorded.
type framePeer struct {
	net.Conn
	mu     sync.Mutex
	resets map[uint32]bool
}

// newFramePeer starts a server session with cfg and returns it with the peer playing its
// client.
func newFramePeer(t *testing.T, cfg *Config, read bool) (*Session, *framePeer) {
	t.Helper()
	a, b := testutil.TCPPair(t)
	s, err := Server(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := &framePeer{Conn: a, resets: make(map[uint32]bool)}
	if read {
		go p.readFrames()
	}
	return s, p
}

func (p *framePeer) readFrames() {
	var h header
	for {
		if _, err := io.ReadFull(p.Conn, h[:]); err != nil {
			return
		}
		if h.typ() == typeData {
			if _, err := io.CopyN(io.Discard, p.Conn, int64(h.length())); err != nil {
				return
			}
		}
		if h.flags()&flagRST != 0 {
			p.mu.Lock()
			p.resets[h.streamID()] = true
			p.mu.Unlock()
		}
	}
}

func (p *framePeer) wasReset(id uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resets[id]
}

// send writes frames, failing the test on error.
func (p *framePeer) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	if _, err := p.Write(bytes.Join(frames, nil)); err != nil {
		t.Fatal(err)
	}
}

// closedWith waits for s to close and returns the cause AcceptStream reports.
func closedWith(t *testing.T, s *Session) error {
	t.Helper()
	select {
	case <-s.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("the session is still open")
	}
	_, err := s.AcceptStream(context.Background())
	return err
}

// atomicMax counts up and down (add) and keeps the largest value it was shown (see).
type atomicMax struct{ n, m atomic.Int64 }

func (a *atomicMax) add(d int64) int64 { return a.n.Add(d) }
func (a *atomicMax) load() int64       { return a.m.Load() }
func (a *atomicMax) see(v int64) {
	for {
		old := a.m.Load()
		if v <= old || a.m.CompareAndSwap(old, v) {
			return
		}
	}
}
