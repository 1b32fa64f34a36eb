package tendril

// Making room: trimming idle inbound sessions at the high watermark, and closing inbound
// sessions that never open a protocol (Admission.IdleTimeout). The ledger (internal/admit)
// decides which sessions and when; this is its glue.

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/tendril-p2p/tendril/internal/admit"
)

// armIdleLocked queues a new inbound session for its idle check.
func (s *Service) armIdleLocked(sess *Session) {
	a := &s.adm
	at, arm := a.ledger.QueueIdle(&sess.adm.t, sess.id, sess.opened)
	if !arm {
		return
	}
	if a.idleTimer == nil {
		a.idleTimer = time.AfterFunc(time.Until(at), s.idleTick)
	} else {
		a.idleTimer.Reset(time.Until(at))
	}
}

// idleTick closes the inbound sessions whose idle check is due and on which no protocol was
// ever opened, and re-arms the timer for the next check. It runs on the timer's goroutine.
func (s *Service) idleTick() {
	now := time.Now()
	var due []*Session
	s.mu.Lock()
	a := &s.adm
	ids, next, more := a.ledger.DueIdle(now)
	for _, id := range ids {
		if sess := s.sessions[id]; sess != nil {
			due = append(due, sess)
		}
	}
	if more && !s.closed {
		a.idleTimer.Reset(next.Sub(now))
	}
	s.mu.Unlock()
	d := a.cfg.IdleTimeout
	for _, sess := range due {
		sess.mu.Lock()
		idle := !sess.used && sess.state == sessionOpen
		sess.mu.Unlock()
		if idle {
			sess.abort(fmt.Errorf("%w (%v)", ErrIdleSession, d))
		}
	}
}

// trim closes inbound sessions with no protocol open, oldest first and never protected
// ones, while inbound sessions are at or above the high watermark, down to the low one.
// It runs on the goroutine that registered a session, without the Service's lock.
func (s *Service) trim() {
	s.mu.Lock()
	a := &s.adm
	need := a.ledger.StartTrim()
	if need <= 0 {
		s.mu.Unlock()
		return
	}
	sessions := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		if sess.dir == Inbound && sess.adm.t.Counted() {
			sessions = append(sessions, sess)
		}
	}
	s.mu.Unlock()
	cands := make([]admit.Candidate, len(sessions))
	for i, sess := range sessions {
		cands[i] = admit.Candidate{Opened: sess.opened, Busy: sess.hasProtocol()}
	}
	var protected func(int) bool
	if p := a.cfg.Protect; p != nil {
		protected = func(i int) bool { return p(sessions[i]) }
	}
	victims := a.ledger.Victims(time.Now(), cands, need, protected)
	s.mu.Lock()
	a.ledger.EndTrim()
	// Their slots are free from now on, not once their teardown has run: the newcomer
	// that triggered the trim must not find them still counted.
	for _, i := range victims {
		s.releaseLocked(&sessions[i].adm)
	}
	s.mu.Unlock()
	for _, i := range victims {
		sess := sessions[i]
		if s.logs(slog.LevelDebug) {
			s.log.Debug("session trimmed", "peer", sess.peer, "session", sess.id)
		}
		sess.abort(fmt.Errorf("%w: inbound sessions at the high watermark %d", ErrTrimmed, a.cfg.HighWater))
	}
}

// hasProtocol reports whether a protocol stream is open or opening on the session.
func (s *Session) hasProtocol() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)+len(s.raw)+len(s.opening) > 0
}
