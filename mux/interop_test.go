package mux

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	hyamux "github.com/hashicorp/yamux"
	gyamux "github.com/libp2p/go-yamux/v5"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

// peerSession is the part of another yamux implementation's session the interop test
// uses.
type peerSession interface {
	open() (net.Conn, error)
	accept() (net.Conn, error)
	Close() error
}

type goYamux struct{ *gyamux.Session }

func (s goYamux) open() (net.Conn, error)   { return s.OpenStream(context.Background()) }
func (s goYamux) accept() (net.Conn, error) { return s.AcceptStream() }

type hashicorpYamux struct{ *hyamux.Session }

func (s hashicorpYamux) open() (net.Conn, error)   { return s.OpenStream() }
func (s hashicorpYamux) accept() (net.Conn, error) { return s.AcceptStream() }

// TestInterop runs this package against go-yamux and hashicorp/yamux, each side as client
// and as server: streams both ways, several MiB each (so windows are updated and grow),
// half-close, and resets.
func TestInterop(t *testing.T) {
	peers := map[string]func(conn net.Conn, client bool) (peerSession, error){
		"go-yamux": func(conn net.Conn, client bool) (peerSession, error) {
			cfg := gyamux.DefaultConfig()
			cfg.LogOutput = io.Discard
			cfg.EnableKeepAlive = false
			var s *gyamux.Session
			var err error
			if client {
				s, err = gyamux.Client(conn, cfg, nil)
			} else {
				s, err = gyamux.Server(conn, cfg, nil)
			}
			return goYamux{s}, err
		},
		"hashicorp": func(conn net.Conn, client bool) (peerSession, error) {
			cfg := hyamux.DefaultConfig()
			cfg.LogOutput = io.Discard
			cfg.EnableKeepAlive = false
			var s *hyamux.Session
			var err error
			if client {
				s, err = hyamux.Client(conn, cfg)
			} else {
				s, err = hyamux.Server(conn, cfg)
			}
			return hashicorpYamux{s}, err
		},
	}
	for name, newPeer := range peers {
		for _, weClient := range []bool{true, false} {
			role := "we-server"
			if weClient {
				role = "we-client"
			}
			t.Run(name+"/"+role, func(t *testing.T) {
				a, b := testutil.TCPPair(t)
				var ours *Session
				var err error
				if weClient {
					ours, err = Client(a, nil)
				} else {
					ours, err = Server(a, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer ours.Close()
				peer, err := newPeer(b, !weClient)
				if err != nil {
					t.Fatal(err)
				}
				defer peer.Close()
				interop(t, ours, peer)
			})
		}
	}
}

func interop(t *testing.T, ours *Session, peer peerSession) {
	// The peer echoes every stream it accepts.
	go func() {
		for {
			st, err := peer.accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(st, st)
				st.Close()
			}()
		}
	}()
	// We echo every stream the peer opens.
	ours.Serve(func(st *Stream) {
		io.Copy(st, st)
		st.CloseWrite()
	}, nil)

	data := make([]byte, 2<<20)
	rand.Read(data)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { // we open
			st, err := ours.OpenStream(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			checkEcho(t, st, data[i:], st.CloseWrite)
		})
		wg.Go(func() { // the peer opens
			st, err := peer.open()
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			cw := func() error { return st.(interface{ CloseWrite() error }).CloseWrite() }
			if _, ok := st.(interface{ CloseWrite() error }); !ok {
				cw = st.Close // hashicorp's Close is a half-close
			}
			checkEcho(t, st, data[:len(data)-i], cw)
		})
	}
	wg.Wait()

	// A stream we reset fails on the peer's side too.
	st, err := ours.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte("x"))
	buf := make([]byte, 1)
	if _, err := io.ReadFull(st, buf); err != nil {
		t.Fatal(err)
	}
	st.Reset()
	if _, err := st.Write([]byte("y")); err == nil {
		t.Fatal("write after reset succeeded")
	}
}

func checkEcho(t *testing.T, st net.Conn, data []byte, closeWrite func() error) {
	t.Helper()
	st.SetDeadline(time.Now().Add(20 * time.Second))
	errc := make(chan error, 1)
	go func() {
		_, err := st.Write(data)
		if err == nil {
			err = closeWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(st)
	if werr := <-errc; werr != nil {
		t.Errorf("write: %v", werr)
		return
	}
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("echo: %d of %d bytes, %v", len(got), len(data), err)
	}
}
