// Package loopback is the skeleton of the test proxies (internal/faultnet, the bench
// module's delay proxy): a TCP server on a free loopback port that runs a handler for every
// connection it accepts, keeps the connections its handlers register, and on Close stops
// accepting, closes those connections and waits for every goroutine it started.
package loopback

import (
	"net"
	"sync"
)

// Server accepts connections on 127.0.0.1 and hands each to its handler.
type Server struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// Listen opens a server on a free loopback port; Serve starts it.
func Listen() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &Server{ln: ln, conns: make(map[net.Conn]struct{})}, nil
}

// Serve starts accepting: it runs handle(c) on a new goroutine for every connection c, until
// Close. Call it once.
func (s *Server) Serve(handle func(c *net.TCPConn)) {
	s.wg.Go(func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { handle(c.(*net.TCPConn)) })
		}
	})
}

// Addr returns the address the server listens on.
func (s *Server) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// Track registers c, which Close will close. Once Close has begun it registers nothing and
// reports false: the handler should then close c itself and return.
func (s *Server) Track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// Untrack forgets c, once the handler is done with it.
func (s *Server) Untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close stops accepting, closes every registered connection and waits for the accept loop
// and every handler to return. It returns the listener's Close error.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	err := s.ln.Close()
	for c := range conns {
		c.Close()
	}
	s.wg.Wait()
	return err
}
