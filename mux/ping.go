package mux

import (
	"context"
	"time"
)

// pingState is a ping in flight. Concurrent Pings share it.
type pingState struct {
	id   uint32
	sent time.Time // when it was written; zero before
	done chan struct{}
	rtt  time.Duration
}

// startPing starts a ping unless one is in flight, and returns the one in flight. An
// urgent ping is written at once, a lazy one with the next frame.
func (s *Session) startPing(urgent bool) *pingState {
	s.pmu.Lock()
	p := s.ping
	if p == nil {
		s.pingSeq++
		p = &pingState{id: s.pingSeq, done: make(chan struct{})}
		s.ping = p
		s.pmu.Unlock()
		s.queuePing(p.id, urgent)
		return p
	}
	s.pmu.Unlock()
	if urgent {
		s.queuePing(p.id, true) // a lazy one in flight: send it now
	}
	return p
}

// pingSent records when our ping left; the caller holds sem.
func (s *Session) pingSent(id uint32) {
	s.pmu.Lock()
	if p := s.ping; p != nil && p.id == id && p.sent.IsZero() {
		p.sent = time.Now()
	}
	s.pmu.Unlock()
}

// onPong handles the answer to a ping.
func (s *Session) onPong(id uint32) {
	s.pmu.Lock()
	p := s.ping
	if p == nil || p.id != id || p.sent.IsZero() {
		s.pmu.Unlock()
		return // not ours, or a duplicate
	}
	s.ping = nil
	s.pmu.Unlock()
	p.rtt = time.Since(p.sent)
	if old := time.Duration(s.rtt.Load()); old <= 0 {
		s.rtt.Store(int64(p.rtt)) // the first measurement of the session's own replaces a seed
	} else {
		s.rtt.Store(int64(old*7/8 + p.rtt/8))
	}
	close(p.done)
}

// Ping sends a ping and returns the round-trip time. It fails with ErrTimeout if no answer
// comes within Config.ConnectionWriteTimeout and returns ctx.Err() if ctx is done first.
// Concurrent calls share one ping.
func (s *Session) Ping(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.IsClosed() {
		return 0, ErrSessionClosed
	}
	p := s.startPing(true)
	t := time.NewTimer(s.cfg.ConnectionWriteTimeout)
	defer t.Stop()
	s.expect()
	defer s.expected()
	select {
	case <-p.done:
		return p.rtt, nil
	case <-t.C:
		s.abandonPing(p)
		return 0, ErrTimeout
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-s.done:
		return 0, ErrSessionClosed
	}
}

// abandonPing forgets a ping that went unanswered, so that the next Ping sends a new one.
func (s *Session) abandonPing(p *pingState) {
	s.pmu.Lock()
	if s.ping == p {
		s.ping = nil
	}
	s.pmu.Unlock()
}

// RTT returns the smoothed round-trip time measured by the session's pings, or 0 before
// the first measurement: the first stream that reads bulk data sends a ping with its window
// update if no estimate is there yet (windows grow only with a round-trip time), and every
// Ping and keepalive measures again. SeedRTT gives a first estimate from below.
func (s *Session) RTT() time.Duration {
	rtt := time.Duration(s.rtt.Load())
	if rtt < 0 {
		return -rtt // a seed
	}
	return rtt
}

// SeedRTT gives the session a first estimate of the round-trip time, measured below it (a
// secure connection's handshake round trip, say: secio.Conn.HandshakeRTT), if it has none
// yet; its first ping's measurement replaces it. It costs nothing on the wire, where a ping of the session's own
// would cost a frame each way and a timer.
func (s *Session) SeedRTT(d time.Duration) {
	if d > 0 {
		s.rtt.CompareAndSwap(0, -int64(d))
	}
}
