package mux

import (
	"errors"
	"io"
	"math"
	"net"
	"time"
)

// recvLoop is the session's frame reader: it reads frames while it holds the read turn
// (turn.go), hands data to its stream and control to the session, and never writes to the
// connection itself (what it has to answer is queued), so a peer that stops reading cannot
// stop it.
func (s *Session) recvLoop() {
	defer s.wg.Done()
	for {
		got, size, err := s.readStep()
		if err != nil {
			s.readFailed(err)
			s.turn.mu.Lock()
			s.releaseTurnLocked(false, 0)
			s.turn.mu.Unlock()
			return
		}
		if got != nil && size < turnBulkFrame && s.mayLeave(got) {
			return
		}
	}
}

// readFailed closes the session after reading failed with err; the caller holds the read
// turn.
func (s *Session) readFailed(err error) {
	s.dropInput()
	var (
		perr *protocolError
		merr *misbehavingError
	)
	switch {
	case errors.As(err, &perr), errors.As(err, &merr):
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

// readStep reads the next piece of the session's input: the rest of a frame body that a
// woken holder of the read turn left (turn.go), or the next frame. It returns the stream
// that received data when a data frame is complete, and the frame's length.
func (s *Session) readStep() (got *Stream, size uint32, err error) {
	if s.body.pending {
		return s.readBody()
	}
	if err := s.readHeader(); err != nil {
		return nil, 0, err
	}
	return s.dispatch()
}

// readHeader reads the next frame header into s.hdr. A read cut short (a holder woken by
// the read deadline, see turn.go) keeps what it read for the next call.
func (s *Session) readHeader() error {
	for s.hn < len(s.hdr) {
		n, err := s.readInput(s.hdr[s.hn:])
		s.hn += n
		if err != nil {
			if s.hn == len(s.hdr) {
				break
			}
			if err == io.EOF && s.hn > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	s.hn = 0
	return nil
}

// dispatch handles the frame whose header is in s.hdr, reading its body. It returns the
// stream that received data, if any, and the frame's length.
func (s *Session) dispatch() (got *Stream, size uint32, err error) {
	h := &s.hdr
	if h.version() != protoVersion {
		return nil, 0, &protocolError{"invalid version"}
	}
	switch h.typ() {
	case typeData, typeWindowUpdate:
		return s.onStreamFrame(h)
	case typePing:
		s.onPing(h)
	case typeGoAway:
		err = s.onGoAway(h)
	default:
		err = &protocolError{"invalid frame type"}
	}
	return nil, 0, err
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

// onStreamFrame handles a data or window update frame; it returns the stream that received
// data, if any, and the data's length.
func (s *Session) onStreamFrame(h *header) (*Stream, uint32, error) {
	id, flags, length := h.streamID(), h.flags(), h.length()
	isData := h.typ() == typeData
	var st *Stream
	switch {
	case flags&(flagSYN|flagRST) == flagSYN|flagRST:
		// Opened and reset at once: nothing to serve, only work to do.
		if err := s.useless.add(time.Now(), "streams opened and reset at once"); err != nil {
			return nil, 0, err
		}
		return s.dropFrame(isData, length)
	case flags&flagSYN != 0:
		var err error
		if st, err = s.incoming(id); err != nil {
			return nil, 0, err
		}
	default:
		s.mu.Lock()
		st = s.streams[id]
		s.mu.Unlock()
	}
	if st == nil {
		return s.noStream(id, flags, isData, length)
	}
	if flags&(flagSYN|flagACK|flagFIN|flagRST) == 0 && length == 0 {
		if err := s.useless.add(time.Now(), "empty frames"); err != nil {
			return nil, 0, err
		}
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
		// A stream the peer opened and reset before this side acknowledged it cost this
		// side its work for nothing (the rapid reset attack); a later reset is a peer
		// giving up on a request, which is normal.
		early := st.inbound && st.ackPending
		st.remoteResetLocked()
		st.mu.Unlock()
		st.wake()
		if early {
			if err := s.useless.add(time.Now(), "streams reset before they were answered"); err != nil {
				return nil, 0, err
			}
		}
		return s.dropFrame(isData, length)
	}
	if st.finRecv && (flags&flagFIN != 0 || (isData && length > 0)) {
		st.mu.Unlock()
		return nil, 0, &protocolError{"data or FIN after FIN"}
	}
	if !isData {
		if uint64(st.sendWindow)+uint64(length) > math.MaxUint32 {
			st.mu.Unlock()
			return nil, 0, &protocolError{"send window overflow"}
		}
		st.sendWindow += length
		fin := s.finLocked(st, flags)
		st.mu.Unlock()
		if fin || length > 0 {
			st.wake()
		}
		return nil, 0, nil
	}
	if length > st.recvCredit {
		st.mu.Unlock()
		return nil, 0, &protocolError{"stream window exceeded"}
	}
	st.recvCredit -= length
	st.mu.Unlock()
	return s.startBody(st, length, flags)
}

// noStream handles a frame for a stream that is not in the table: one this side refused
// or that has ended here (the peer may not know yet: its frames are dropped), or one that
// was never opened, which gets a reset. Frames for streams never opened, and empty frames
// without flags, are useless frames; the rest can come from a peer following the protocol
// (its acknowledgement, window update, end or reset of a stream this side closed).
func (s *Session) noStream(id uint32, flags uint16, isData bool, length uint32) (*Stream, uint32, error) {
	s.mu.Lock()
	var opened bool
	if (id%2 == 1) == s.client {
		opened = id < s.nextID // ours
	} else {
		opened = id <= s.maxRemoteID
	}
	s.mu.Unlock()
	// Data for a stream that has ended here (closed with Close, reset, refused) is read by
	// nobody: the reset tells the peer to stop writing, instead of leaving its writer
	// waiting for window that never comes. One reset per frame of data, at most
	// maxQueuedResets queued: no more than the peer's own frames cost it.
	if flags&flagRST == 0 && (!opened || (isData && length > 0)) {
		s.queueReset(id)
	}
	if !opened || (length == 0 && flags == 0) {
		if err := s.useless.add(time.Now(), "frames for streams that do not exist"); err != nil {
			return nil, 0, err
		}
	}
	return s.dropFrame(isData, length)
}

// dropFrame reads and drops the body of a data frame.
func (s *Session) dropFrame(isData bool, length uint32) (*Stream, uint32, error) {
	if isData {
		return s.startBody(nil, length, 0)
	}
	return nil, 0, nil
}

// body is the part of a data frame's body not read yet. A holder of the read turn woken in
// the middle of a body (turn.go) leaves the rest to the next reader, so that no frame is
// cut and no Read waits past its deadline for a peer that sends a body slowly.
type body struct {
	pending bool
	st      *Stream // the stream it is for; nil: read and dropped
	left    uint32  // bytes still to read
	size    uint32  // the frame's length
	flags   uint16  // the frame's flags, applied once the body is read
}

// startBody starts reading the body of a data frame of length bytes for st (nil: dropped).
func (s *Session) startBody(st *Stream, length uint32, flags uint16) (*Stream, uint32, error) {
	s.body = body{pending: true, st: st, left: length, size: length, flags: flags}
	return s.readBody()
}

// readBody reads what is left of the current body. Once it is complete, the stream gets the
// frame's FIN and is signalled; readBody returns it with the frame's length.
func (s *Session) readBody() (*Stream, uint32, error) {
	b := &s.body
	st := b.st
	if st == nil {
		err := s.discard()
		if err == nil {
			b.pending = false
		}
		return nil, 0, err
	}
	st.mu.Lock()
	if err := s.readData(st); err != nil {
		st.mu.Unlock()
		return nil, 0, err
	}
	b.pending = false
	fin := s.finLocked(st, b.flags)
	st.mu.Unlock()
	if b.size > 0 || fin {
		// notify, not signal: if st holds the read turn, this is its own goroutine.
		notify(st.readCh)
	}
	if b.size == 0 {
		return nil, 0, nil
	}
	return st, b.size, nil
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

// readData reads the rest of the current body into st's buffer, without holding st.mu while
// it waits for the network. st.mu is held on entry and on return.
func (s *Session) readData(st *Stream) error {
	b := &s.body
	direct := false // the next record is read from the connection directly (input)
	for b.left > 0 {
		// Closed, reset, or removed (the session shut down since the header was read, or
		// while this body waited): nobody reads what comes, and the stream has given its
		// reservation back: one taken now would never return.
		if st.readClosed || st.resetErr != nil || st.removed {
			st.mu.Unlock()
			err := s.discard()
			st.mu.Lock()
			return err
		}
		if s.rr != nil && s.in == nil && !direct {
			// The body goes on in the next record.
			st.mu.Unlock()
			rec, err := s.input()
			st.mu.Lock()
			if err != nil {
				return bodyErr(err)
			}
			direct = !rec
			continue // st may have changed meanwhile
		}
		if s.in != nil {
			if k := min(len(s.unparsed()), int(b.left)); s.shareLocked(st, k) {
				b.left -= uint32(k)
				if b.left > 0 {
					notify(st.readCh)
				}
				continue
			}
		}
		if g := st.buf.growth(int(b.left)); g > 0 && !st.coverLocked(int64(st.buf.held+g)) {
			st.overBudgetLocked()
			st.mu.Unlock()
			st.wake()
			err := s.discard()
			st.mu.Lock()
			return err
		}
		sp := st.buf.space(int(b.left))
		if s.in != nil {
			// Copied from the record, under st.mu: nothing here waits for the network.
			k := copy(sp, s.unparsed())
			s.parsed(k)
			st.buf.commit(k)
			b.left -= uint32(k)
			if b.left > 0 {
				notify(st.readCh)
			}
			continue
		}
		st.mu.Unlock()
		k, err := s.readInputFull(sp)
		st.mu.Lock()
		direct = false
		st.buf.commit(k)
		b.left -= uint32(k)
		if k > 0 && b.left > 0 {
			notify(st.readCh) // a large frame: the reader can start on what is here
		}
		if err != nil {
			return bodyErr(err)
		}
	}
	return nil
}

// bodyErr is err from reading a frame's body: the connection may not end there.
func bodyErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// discard reads and drops the rest of the current body.
func (s *Session) discard() error {
	b := &s.body
	for b.left > 0 {
		rec, err := s.input()
		if err != nil {
			return bodyErr(err)
		}
		if !rec {
			k, err := io.CopyN(io.Discard, s.conn, int64(b.left))
			b.left -= uint32(k)
			return bodyErr(err)
		}
		k := min(len(s.unparsed()), int(b.left))
		s.parsed(k)
		b.left -= uint32(k)
	}
	return nil
}

// readInput reads up to len(p) bytes of the session's input into p: from the record being
// parsed, or the connection (readStep).
func (s *Session) readInput(p []byte) (int, error) {
	rec, err := s.input()
	if err != nil {
		return 0, err
	}
	if !rec {
		return s.conn.Read(p)
	}
	k := copy(p, s.unparsed())
	s.parsed(k)
	return k, nil
}

// readInputFull reads exactly len(p) bytes of input into p, as io.ReadFull.
func (s *Session) readInputFull(p []byte) (int, error) {
	if s.rr == nil {
		return io.ReadFull(s.conn, p)
	}
	n := 0
	for n < len(p) {
		k, err := s.readInput(p[n:])
		n += k
		if err != nil {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// incoming admits a stream the peer opens, or refuses it with a reset (nil stream). A
// broken protocol is an error (a duplicate ID, or an ID of the wrong parity), and so is a
// peer that keeps opening streams it is refused (ErrPeerMisbehaving).
func (s *Session) incoming(id uint32) (*Stream, error) {
	if id == 0 || (id%2 == 1) == s.client {
		return nil, &protocolError{"stream ID of the wrong side"}
	}
	s.mu.Lock()
	if _, dup := s.streams[id]; dup {
		s.mu.Unlock()
		return nil, &protocolError{"duplicate stream ID"}
	}
	s.maxRemoteID = max(s.maxRemoteID, id)
	if s.closed || s.localGoAway || s.live >= s.cfg.MaxStreams ||
		(len(s.acceptQ) >= s.cfg.AcceptBacklog && (s.handle == nil || s.serving >= s.cfg.ServeConcurrency)) {
		s.mu.Unlock()
		s.queueReset(id)
		return nil, s.useless.add(time.Now(), "streams refused")
	}
	st := newStream(s, id, true)
	s.streams[id] = st
	s.live++
	handle := s.handle
	start := false
	if handle != nil {
		st.serving = true
		if start = s.serving < s.cfg.ServeConcurrency; start {
			s.serving++
		}
	}
	if !start {
		s.acceptQ = append(s.acceptQ, st)
	}
	s.mu.Unlock()
	switch {
	case start:
		s.accepted(st)
		go s.serve(handle, st)
	case handle == nil:
		notify(s.acceptWake)
	}
	return st, nil
}
