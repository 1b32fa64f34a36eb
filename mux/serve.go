package mux

// Serve hands every stream the peer opens to handle, each on a goroutine of its own that
// exists only while handle runs: no goroutine waits for streams in between. Once the
// session is closed, for whatever reason, closed is called once, on a goroutine of its
// own, with the cause as AcceptStream would return it; Close does not wait for it, nor for
// handle.
//
// Serve must be called at most once, and AcceptStream must not be used with it. Streams
// that arrived before Serve are handed over at once.
func (s *Session) Serve(handle func(*Stream), closed func(error)) {
	s.mu.Lock()
	s.handle, s.onClosed = handle, closed
	queued := s.acceptQ
	s.acceptQ = nil
	report := s.closed
	cause := s.closeErr
	s.mu.Unlock()
	for _, st := range queued {
		s.accepted(st)
		go handle(st)
	}
	if report && closed != nil {
		go closed(cause)
	}
}
