package tendril

// Keepalive: one timer of the Service pings every session; a session whose peer does not
// answer is closed.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tendril-p2p/tendril/mux"
)

// ping checks that the peer answers within timeout, without waiting for it: a session that
// does not answer is closed.
func (s *Session) ping(timeout time.Duration) {
	s.mu.Lock()
	if s.state >= sessionTornDown || s.pinging {
		s.mu.Unlock()
		return
	}
	s.pinging = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, timeout)
		_, err := s.mux.Ping(ctx)
		cancel()
		s.mu.Lock()
		s.pinging = false
		s.mu.Unlock()
		// A ping that fails because the session is already closing is not a keepalive
		// failure: run records the real cause (an authentication failure, a reset, ...).
		if err != nil && s.ctx.Err() == nil && !errors.Is(err, mux.ErrSessionClosed) {
			s.abort(fmt.Errorf("%w: keepalive: peer did not answer within %v: %w", ErrSessionClosed, timeout, err))
		}
	}()
}

// tcpKeepAlive is the TCP keepalive setting for net.Dialer and net.ListenConfig: off (-1)
// while the Service's own keepalive pings every session, which also covers the secure and
// mux layers; the operating system's default (0) otherwise.
func (s *Service) tcpKeepAlive() time.Duration {
	if s.keepAlive > 0 {
		return -1
	}
	return 0
}

// keepAliveTick pings every session; a session whose ping is not answered within the mux's
// ConnectionWriteTimeout is closed. It runs on the timer's goroutine every keepAlive period
// while the Service has sessions: no goroutine of the Service waits in between.
func (s *Service) keepAliveTick() {
	s.mu.Lock()
	if s.closed || len(s.sessions) == 0 {
		s.pinging = false
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	for _, sess := range s.Sessions() {
		sess.ping(s.cfg.Mux.ConnectionWriteTimeout)
	}
	s.mu.Lock()
	if s.closed {
		s.pinging = false
	} else {
		s.kaTimer.Reset(s.keepAlive)
	}
	s.mu.Unlock()
}
