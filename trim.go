package tendril

// Making room: trimming idle inbound sessions at the high watermark, and closing inbound
// sessions that never open a protocol (Admission.IdleTimeout).

import (
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// armIdleLocked queues a new inbound session for its idle check.
func (s *Service) armIdleLocked(sess *Session) {
	a := &s.adm
	d := a.cfg.IdleTimeout
	if d <= 0 || sess.dir != Inbound {
		return
	}
	a.idleQ = append(a.idleQ, idleCheck{id: sess.id, at: sess.opened.Add(d)})
	if !a.idleArmed {
		a.idleArmed = true
		if a.idleTimer == nil {
			a.idleTimer = time.AfterFunc(d, s.idleTick)
		} else {
			a.idleTimer.Reset(time.Until(a.idleQ[0].at))
		}
	}
}

// idleTick closes the inbound sessions whose idle check is due and on which no protocol was
// ever opened, and re-arms the timer for the next check. It runs on the timer's goroutine.
func (s *Service) idleTick() {
	now := time.Now()
	var due []*Session
	s.mu.Lock()
	a := &s.adm
	n := 0
	for n < len(a.idleQ) && !a.idleQ[n].at.After(now) {
		if sess := s.sessions[a.idleQ[n].id]; sess != nil {
			due = append(due, sess)
		}
		n++
	}
	a.idleQ = append(a.idleQ[:0], a.idleQ[n:]...)
	a.idleArmed = len(a.idleQ) > 0 && !s.closed
	if a.idleArmed {
		a.idleTimer.Reset(a.idleQ[0].at.Sub(now))
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
	if a.cfg.HighWater <= 0 || a.inbound < a.cfg.HighWater || a.trimming {
		s.mu.Unlock()
		return
	}
	a.trimming = true
	need := a.inbound - a.cfg.LowWater
	cands := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		if sess.dir == Inbound && sess.adm.counted {
			cands = append(cands, sess)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(cands, func(x, y *Session) int { return x.opened.Compare(y.opened) })
	var victims []*Session
	young := time.Now().Add(-a.cfg.GracePeriod)
	for _, sess := range cands {
		if len(victims) == need || sess.opened.After(young) {
			break // the rest are younger still
		}
		if sess.hasProtocol() || (a.cfg.Protect != nil && a.cfg.Protect(sess)) {
			continue
		}
		victims = append(victims, sess)
	}
	s.mu.Lock()
	a.trimming = false
	// Their slots are free from now on, not once their teardown has run: the newcomer
	// that triggered the trim must not find them still counted.
	for _, sess := range victims {
		s.releaseLocked(&sess.adm)
	}
	s.mu.Unlock()
	for _, sess := range victims {
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
