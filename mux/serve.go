package mux

// Serve hands every stream the peer opens to handle, each on a goroutine that exists only
// while handlers run: no goroutine waits for streams in between. At most
// Config.ServeConcurrency handlers run at once; a stream that arrives meanwhile waits in
// the accept backlog (Config.AcceptBacklog, beyond which streams are refused) and is
// acknowledged only when its handler starts, so that a peer opening streams faster than
// they are served is slowed down (its OpenStream waits) rather than costing a goroutine
// each. A stream counts against Config.MaxStreams until its handler returns, even if the
// peer reset it meanwhile.
//
// Once the session is closed, for whatever reason, closed is called once, on a goroutine
// of its own, with the cause as AcceptStream would return it; Close does not wait for it,
// nor for handle.
//
// Serve must be called at most once, and AcceptStream must not be used with it. Streams
// that arrived before Serve are handed over at once.
func (s *Session) Serve(handle func(*Stream), closed func(error)) {
	s.mu.Lock()
	s.handle, s.onClosed = handle, closed
	var start []*Stream
	for len(s.acceptQ) > 0 && s.serving < s.cfg.ServeConcurrency {
		start = append(start, s.popAcceptLocked())
		s.serving++
	}
	queued := s.acceptQ
	report := s.closed
	cause := s.closeErr
	s.mu.Unlock()
	for _, st := range queued {
		st.mu.Lock()
		st.serving = true
		st.mu.Unlock()
	}
	for _, st := range start {
		st.mu.Lock()
		st.serving = true
		st.mu.Unlock()
		s.accepted(st)
		go s.serve(handle, st)
	}
	if report && closed != nil {
		go closed(cause)
	}
}

// popAcceptLocked takes the first stream of the accept queue; s.mu is held.
func (s *Session) popAcceptLocked() *Stream {
	st := s.acceptQ[0]
	s.acceptQ[0] = nil
	s.acceptQ = s.acceptQ[1:]
	if len(s.acceptQ) == 0 {
		s.acceptQ = nil
	}
	return st
}

// serve runs handle for st, then for the streams that queued up meanwhile, and ends when
// none is left: one goroutine per running handler.
func (s *Session) serve(handle func(*Stream), st *Stream) {
	for st != nil {
		handle(st)
		st.mu.Lock()
		st.serving = false
		st.retireLocked()
		st.mu.Unlock()
		s.mu.Lock()
		if len(s.acceptQ) > 0 && !s.closed {
			st = s.popAcceptLocked()
		} else {
			st = nil
			s.serving--
		}
		s.mu.Unlock()
		if st != nil {
			s.accepted(st)
		}
	}
}
