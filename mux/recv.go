package mux

import (
	"errors"
	"io"
	"net"
)

// recvLoop is the session's frame reader, its one goroutine: it reads every frame, hands
// data to its stream and control to the session, and never writes to the connection
// itself (what it has to answer is queued), so a peer that stops reading cannot stop it.
func (s *Session) recvLoop() {
	defer s.wg.Done()
	err := s.readFrames()
	var perr *protocolError
	switch {
	case errors.As(err, &perr):
		s.log.Warn("mux: closing session: peer broke the protocol", "err", err, "remote", s.conn.RemoteAddr())
	case errors.Is(err, net.ErrClosed) && s.IsClosed():
		err = nil // our own Close
	}
	if err == nil {
		s.shutdown(ErrSessionClosed)
		return
	}
	s.shutdown(&closedError{cause: err})
}

func (s *Session) readFrames() error {
	var h header
	for {
		if _, err := io.ReadFull(s.conn, h[:]); err != nil {
			return err
		}
		if h.version() != protoVersion {
			return &protocolError{"invalid version"}
		}
		var err error
		switch h.typ() {
		case typeData, typeWindowUpdate:
			err = s.onStreamFrame(&h)
		case typePing:
			s.onPing(&h)
		case typeGoAway:
			err = s.onGoAway(&h)
		default:
			err = &protocolError{"invalid frame type"}
		}
		if err != nil {
			return err
		}
	}
}

func (s *Session) onPing(h *header) {
	switch f := h.flags(); {
	case f&flagSYN != 0:
		s.queuePong(h.length())
	case f&flagACK != 0:
		s.onPong(h.length())
	}
}

func (s *Session) onGoAway(h *header) error {
	if code := h.length(); code != goAwayNormal {
		return &goAwayError{code}
	}
	s.mu.Lock()
	s.remoteGoAway = true
	s.mu.Unlock()
	return nil
}

// onStreamFrame handles a data or window update frame.
func (s *Session) onStreamFrame(h *header) error {
	id, flags, length := h.streamID(), h.flags(), h.length()
	var st *Stream
	if flags&flagSYN != 0 {
		var err error
		if st, err = s.incoming(id); err != nil {
			return err
		}
	} else {
		s.mu.Lock()
		st = s.streams[id]
		s.mu.Unlock()
	}
	isData := h.typ() == typeData
	if st == nil {
		// Refused, or already ended here (reset, closed): its data is read and dropped.
		if isData {
			return s.discard(length)
		}
		return nil
	}
	st.mu.Lock()
	if flags&flagACK != 0 && !st.inbound && !st.acked {
		st.acked = true
		if st.openTimer != nil {
			st.openTimer.Stop()
		}
		s.mu.Lock()
		s.ackedLocked()
		s.mu.Unlock()
	}
	if flags&flagRST != 0 {
		st.remoteResetLocked()
		st.mu.Unlock()
		st.wake()
		if isData {
			return s.discard(length)
		}
		return nil
	}
	if !isData {
		st.sendWindow += length
		fin := s.finLocked(st, flags)
		st.mu.Unlock()
		if fin || length > 0 {
			st.wake()
		}
		return nil
	}
	if length > st.recvCredit {
		st.mu.Unlock()
		return &protocolError{"stream window exceeded"}
	}
	st.recvCredit -= length
	err := s.readData(st, int(length)) // unlocks and relocks st.mu
	fin := s.finLocked(st, flags)
	st.mu.Unlock()
	if length > 0 || fin {
		notify(st.readCh)
	}
	return err
}

// finLocked applies the peer's FIN, if flags carry one.
func (s *Session) finLocked(st *Stream, flags uint16) bool {
	if flags&flagFIN == 0 || st.finRecv {
		return false
	}
	st.finRecv = true
	if st.finSent {
		s.removeLocked(st)
	}
	return true
}

// readData reads a data frame's body into st's buffer, without holding st.mu while it
// waits for the network. st.mu is held on entry and on return.
func (s *Session) readData(st *Stream, n int) error {
	for n > 0 {
		if st.readClosed || st.resetErr != nil {
			st.mu.Unlock()
			err := s.discard(uint32(n))
			st.mu.Lock()
			return err
		}
		sp := st.buf.space(n)
		st.mu.Unlock()
		k, err := io.ReadFull(s.conn, sp)
		st.mu.Lock()
		st.buf.commit(k)
		n -= k
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if n > 0 {
			notify(st.readCh) // a large frame: the reader can start on what is here
		}
	}
	return nil
}

// discard reads and drops n bytes.
func (s *Session) discard(n uint32) error {
	_, err := io.CopyN(io.Discard, s.conn, int64(n))
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// incoming admits a stream the peer opens, or refuses it with a reset (nil stream). Only
// a broken protocol is an error: a duplicate ID, or an ID of the wrong parity.
func (s *Session) incoming(id uint32) (*Stream, error) {
	if id == 0 || (id%2 == 1) == s.client {
		return nil, &protocolError{"stream ID of the wrong side"}
	}
	s.mu.Lock()
	if _, dup := s.streams[id]; dup {
		s.mu.Unlock()
		return nil, &protocolError{"duplicate stream ID"}
	}
	if s.closed || s.localGoAway || len(s.streams) >= s.cfg.MaxStreams ||
		(s.handle == nil && len(s.acceptQ) >= s.cfg.AcceptBacklog) {
		s.mu.Unlock()
		s.queueReset(id)
		return nil, nil
	}
	charge := streamCharge(InitialStreamWindow)
	if !s.budget.reserve(charge) {
		s.mu.Unlock()
		s.log.Debug("mux: refusing a stream: memory budget exhausted", "budget", s.budget.String())
		s.queueReset(id)
		return nil, nil
	}
	st := newStream(s, id, true, charge)
	s.streams[id] = st
	s.holding[st] = struct{}{}
	handle := s.handle
	if handle == nil {
		s.acceptQ = append(s.acceptQ, st)
	}
	s.mu.Unlock()
	if handle != nil {
		s.accepted(st)
		go handle(st)
	} else {
		notify(s.acceptWake)
	}
	return st, nil
}
