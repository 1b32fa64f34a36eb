package main

import (
	"context"
	"net"

	"github.com/tendril-p2p/tendril/mux"
)

// ---- tendril's multiplexer (package mux) over plain TCP ----
//
// The "encryption for free" comparison: tendril's own stream layer with no
// secure channel below it, so that the only difference from the tendril
// rows is secio and its AEAD (hashicorp/yamux over TCP differs in its
// coalescing too).

type muxTCPServer struct {
	serverBase
	ln net.Listener
}

// muxConfig is tendril's default mux configuration as the Service uses it:
// the Service sends its own keepalives.
func muxConfig() *mux.Config {
	cfg := mux.DefaultConfig()
	cfg.KeepAliveInterval = -1
	return cfg
}

func startMuxTCP(context.Context) (server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &muxTCPServer{ln: ln}
	s.wg.Go(s.accept)
	return s, nil
}

func (s *muxTCPServer) accept() {
	acceptLoop(s.ln.Accept, func(c net.Conn) {
		resetOnClose(c)
		sess, err := mux.Server(c, muxConfig())
		if err != nil {
			c.Close()
			return
		}
		if !s.admit(sess) {
			return
		}
		s.serve(sess, func() { s.release(sess) })
	})
}

// serve hands the session's inbound streams to serveStream; done runs
// once when the session has closed.
func (s *muxTCPServer) serve(sess *mux.Session, done func()) {
	s.wg.Add(1)
	sess.Serve(func(st *mux.Stream) {
		serveStream(st)
		st.Close()
	}, func(error) {
		done()
		s.wg.Done()
	})
}

func (s *muxTCPServer) Dial(ctx context.Context) (conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.ln.Addr().String())
	if err != nil {
		return nil, err
	}
	resetOnClose(c)
	sess, err := mux.Client(c, muxConfig())
	if err != nil {
		c.Close()
		return nil, err
	}
	// Both ends of a peer-to-peer connection accept streams.
	s.serve(sess, func() {})
	return muxTCPConn{sess}, nil
}

func (s *muxTCPServer) Close() error { return s.shutdown(s.ln) }

type muxTCPConn struct{ sess *mux.Session }

func (c muxTCPConn) OpenStream(ctx context.Context) (stream, error) {
	st, err := c.sess.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (c muxTCPConn) Close() error { return c.sess.Close() }
