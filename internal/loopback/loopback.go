// Package loopback is the skeleton of the test proxies (internal/faultnet, the bench
// module's delay proxy): a TCP server on a free loopback port that runs a handler for every
// connection it accepts, keeps the connections its handlers register, and on Close stops
// accepting, closes those connections and waits for every goroutine it started. Its Set of
// open connections also serves the bench module's transport servers, which accept on
// listeners of their own.
package loopback

import (
	"io"
	"net"
	"sync"
)

// Set holds the open connections (or sessions, or anything else closable) of a server that
// is shutting down: closing them is what unblocks the handlers it must wait for, and one a
// handler registers after the shutdown began would be missed, so the Set refuses it.
type Set struct {
	mu     sync.Mutex
	m      map[io.Closer]struct{}
	closed bool
}

// Track registers c, which CloseAll will close. Once CloseAll has begun it registers nothing
// and reports false: the caller should then close c itself.
func (s *Set) Track(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.m == nil {
		s.m = make(map[io.Closer]struct{})
	}
	s.m[c] = struct{}{}
	return true
}

// Untrack forgets c, once its handler is done with it.
func (s *Set) Untrack(c io.Closer) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

// CloseAll closes everything registered and refuses what comes later. It closes outside the
// lock, so that a Close that waits for a handler which calls Untrack cannot deadlock.
func (s *Set) CloseAll() {
	s.mu.Lock()
	s.closed = true
	m := s.m
	s.m = nil
	s.mu.Unlock()
	for c := range m {
		c.Close()
	}
}

// Server accepts connections on 127.0.0.1 and hands each to its handler.
type Server struct {
	ln    net.Listener
	wg    sync.WaitGroup
	conns Set
}

// Listen opens a server on a free loopback port; Serve starts it.
func Listen() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &Server{ln: ln}, nil
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
func (s *Server) Track(c net.Conn) bool { return s.conns.Track(c) }

// Untrack forgets c, once the handler is done with it.
func (s *Server) Untrack(c net.Conn) { s.conns.Untrack(c) }

// Close stops accepting, closes every registered connection and waits for the accept loop
// and every handler to return. It returns the listener's Close error.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.conns.CloseAll()
	s.wg.Wait()
	return err
}
