package mux

import (
	"context"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Session is a multiplexed connection: one side is the Client, the other the Server (they
// differ only in the stream IDs they use). All methods are safe for concurrent use.
//
// A session runs at most one goroutine of its own, the frame reader, and not even that
// while a Read waiting for its stream's data reads the frames itself (turn.go). Writers write to the
// connection themselves, one at a time; control frames (window updates, acknowledgements,
// pings) ride in front of the next data or, when no data is being written, go out from a
// goroutine that lives only while it writes them.
type Session struct {
	conn   net.Conn
	cfg    *Config
	client bool
	budget *Budget
	log    *slog.Logger
	done   chan struct{} // closed when the session closes
	ended  chan struct{} // closed when shutdown has released everything

	w    writer
	turn turn   // who reads the connection (turn.go)
	hdr  header // the frame header being read, by the holder of the turn
	hn   int    // bytes of hdr read so far
	body body   // the body being read, by the holder of the turn (recv.go)
	// Record input (records.go): rr is conn if it delivers records, else nil; in is the
	// record being parsed and in.buf[inR:inW] what is left of it, by the holder of the turn.
	rr       recordReader
	in       *slab
	inR, inW int
	slabs    slabs
	// useless meters the peer's useless frames (useless.go), by the holder of the turn.
	useless uselessMeter
	// rtt is the smoothed round-trip time in ns; 0 until measured; negative while it is
	// SeedRTT's estimate (its magnitude), which the first ping's measurement replaces.
	rtt atomic.Int64

	pmu     sync.Mutex
	ping    *pingState // the ping in flight, if any
	pingSeq uint32     // the ID of the last ping started

	mu           sync.Mutex
	streams      map[uint32]*Stream
	holding      map[*Stream]struct{} // streams out of the table that hold a reservation
	live         int                  // streams counted against MaxStreams (Stream.retired)
	serving      int                  // Serve handlers running (at most ServeConcurrency)
	maxRemoteID  uint32               // the highest stream ID the peer has opened
	nextID       uint32
	unacked      int           // outbound streams the peer has not acknowledged
	ackWake      chan struct{} // closed when unacked drops
	acceptQ      []*Stream     // inbound streams waiting for AcceptStream
	acceptWake   chan struct{} // signalled when acceptQ grows
	handle       func(*Stream)
	onClosed     func(error)
	localGoAway  bool
	remoteGoAway bool
	closed       bool
	closeErr     error // what AcceptStream returns once closed
	kaTimer      *time.Timer

	wg sync.WaitGroup // the frame reader and the flushers
}

// Client starts the client side of a session over conn. A nil cfg means DefaultConfig().
// On success the session owns conn and closes it on Close; on error (an invalid cfg) conn
// is left untouched.
func Client(conn net.Conn, cfg *Config) (*Session, error) {
	return newSession(conn, cfg, true)
}

// Server starts the server side of a session over conn. A nil cfg means DefaultConfig().
// On success the session owns conn and closes it on Close; on error (an invalid cfg) conn
// is left untouched.
func Server(conn net.Conn, cfg *Config) (*Session, error) {
	return newSession(conn, cfg, false)
}

func newSession(conn net.Conn, cfg *Config, client bool) (*Session, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Session{
		conn:       conn,
		cfg:        c,
		client:     client,
		budget:     NewBudget(c.MaxSessionMemory, c.Memory),
		log:        log,
		done:       make(chan struct{}),
		ended:      make(chan struct{}),
		streams:    make(map[uint32]*Stream),
		holding:    make(map[*Stream]struct{}),
		ackWake:    make(chan struct{}),
		acceptWake: make(chan struct{}, 1),
		useless:    newUselessMeter(c.UselessFrames),
	}
	s.w.init()
	s.rr, _ = conn.(recordReader)
	if client {
		s.nextID = 1
	} else {
		s.nextID = 2
	}
	if c.KeepAliveInterval > 0 {
		s.mu.Lock()
		s.kaTimer = time.AfterFunc(c.KeepAliveInterval, s.keepAlive)
		s.mu.Unlock()
	}
	s.startTurn()
	return s, nil
}

// OpenStream opens a new stream. It returns ErrTooManyStreams if the session already has
// Config.MaxStreams streams, ErrSessionClosed once the session is closed, ErrRemoteGoAway
// after the peer's GoAway, and ctx.Err() if ctx is done before the stream is opened. A
// stream reserves memory only for what it buffers (see Budget): opening one costs none.
//
// OpenStream does not wait for the peer: the stream is announced with its first frame (its
// first data, usually, so that opening a stream and sending a request is one frame), or
// at its first Read. It waits (under ctx) only while Config.AcceptBacklog streams it
// opened are still unacknowledged by the peer. If the peer refuses the stream, reads and
// writes on it fail with ErrStreamReset. A peer that does not acknowledge an announced
// stream within Config.StreamOpenTimeout is considered dead and the session is closed.
func (s *Session) OpenStream(ctx context.Context) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	for {
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, ErrSessionClosed
		case s.remoteGoAway:
			s.mu.Unlock()
			return nil, ErrRemoteGoAway
		case s.live >= s.cfg.MaxStreams:
			s.mu.Unlock()
			return nil, ErrTooManyStreams
		case s.nextID >= math.MaxUint32-1:
			s.mu.Unlock()
			return nil, ErrStreamsExhausted
		}
		if s.unacked < s.cfg.AcceptBacklog {
			break
		}
		wake := s.ackWake
		s.mu.Unlock()
		s.expect()
		select {
		case <-wake:
		case <-ctx.Done():
			s.expected()
			return nil, ctx.Err()
		case <-s.done:
		}
		s.expected()
		s.mu.Lock()
	}
	st := newStream(s, s.nextID, false)
	s.nextID += 2
	s.streams[st.id] = st
	s.live++
	s.unacked++
	s.mu.Unlock()
	return st, nil
}

// AcceptStream waits for the next stream opened by the peer. It returns ctx.Err() when ctx
// is done and ErrSessionClosed (possibly wrapping the cause, such as io.EOF when the peer
// closed the connection, or ErrKeepAliveTimeout, or ErrProtocol) once the session is
// closed; streams still queued then are dropped.
func (s *Session) AcceptStream(ctx context.Context) (*Stream, error) {
	for {
		s.mu.Lock()
		if s.closed {
			err := s.closeErr
			s.mu.Unlock()
			return nil, err
		}
		if len(s.acceptQ) > 0 {
			st := s.acceptQ[0]
			s.acceptQ[0] = nil
			s.acceptQ = s.acceptQ[1:]
			more := len(s.acceptQ) > 0
			if !more {
				s.acceptQ = nil
			}
			s.mu.Unlock()
			if more {
				notify(s.acceptWake) // for the next waiting AcceptStream
			}
			s.accepted(st)
			return st, nil
		}
		s.mu.Unlock()
		s.expect()
		select {
		case <-s.acceptWake:
		case <-ctx.Done():
			s.expected()
			return nil, ctx.Err()
		case <-s.done:
		}
		s.expected()
	}
}

// accepted acknowledges an inbound stream: the ACK waits briefly for the stream's first
// frame (its answer, usually) and goes out with it.
func (s *Session) accepted(st *Stream) {
	s.queueStream(st, false)
}

// removeLocked takes a stream out of the table: it has ended. st.mu is held.
func (s *Session) removeLocked(st *Stream) {
	if st.removed {
		return
	}
	st.removed = true
	if st.openTimer != nil {
		st.openTimer.Stop()
	}
	st.releaseIfDoneLocked()
	s.mu.Lock()
	if s.streams[st.id] == st {
		delete(s.streams, st.id)
	}
	if !st.inbound && !st.acked {
		st.acked = true
		s.ackedLocked()
	}
	if st.reserved > 0 {
		s.holding[st] = struct{}{} // unread data: shutdown must find it
	}
	s.mu.Unlock()
	st.retireLocked()
	st.endedLocked()
}

// ackedLocked counts one outbound stream acknowledged (or gone); s.mu is held.
func (s *Session) ackedLocked() {
	s.unacked--
	close(s.ackWake)
	s.ackWake = make(chan struct{})
}

// openTimedOut runs when an announced stream went unacknowledged for StreamOpenTimeout.
func (s *Session) openTimedOut() {
	s.log.Debug("mux: stream not acknowledged in time; closing the session")
	s.shutdown(&closedError{cause: ErrTimeout})
}

// Close closes the session and its connection. Streams fail with ErrSessionClosed (reads
// once buffered data is consumed). Close waits for the session's goroutines and is
// idempotent.
func (s *Session) Close() error {
	s.shutdown(ErrSessionClosed)
	<-s.ended // shutdown may be running on another goroutine (a failed write, a timer)
	s.wg.Wait()
	return nil
}

// Abort closes the session's connection and the session at once, without waiting for
// anything: streams fail, and the Serve callback runs on a goroutine of its own. Frames the
// connection still buffers are dropped (the write deadline is moved to the past first, so a
// secio.Conn does not wait to write them out as its Close does). The session closes here
// rather than when a reader sees the connection fail: with the read turn free, nobody may
// read the connection until the idle timer starts recvLoop.
func (s *Session) Abort() {
	_ = s.conn.SetWriteDeadline(aLongTimeAgo)
	_ = s.conn.Close()
	s.shutdown(ErrSessionClosed)
}

// shutdown closes the session once, with err as what AcceptStream reports from now on.
func (s *Session) shutdown(err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.closeErr = err
	close(s.done)
	// Every stream that holds a reservation: those in the table, and those out of it that
	// still buffer unread data.
	streams := make([]*Stream, 0, len(s.holding))
	for st := range s.holding {
		streams = append(streams, st)
	}
	for _, st := range s.streams {
		if _, ok := s.holding[st]; !ok {
			streams = append(streams, st)
		}
	}
	s.acceptQ = nil
	onClosed := s.onClosed
	if s.kaTimer != nil {
		s.kaTimer.Stop()
	}
	s.mu.Unlock()
	s.stopTurn()
	s.w.stop()
	// Closing the connection may take a while (a secure connection writes out what it has
	// queued and lingers for the peer's close): never on the goroutine that found the
	// session failing, which may be a Read or Write bound by a deadline. Close waits for it.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.conn.Close()
	}()
	for _, st := range streams {
		st.mu.Lock()
		st.removeFromClosedLocked()
		st.mu.Unlock()
		st.wake()
		st.rdl.stop()
		st.wdl.stop()
	}
	s.closeSlabs() // after the streams: none of them takes a slab's reservation over now
	close(s.ended)
	if onClosed != nil {
		go onClosed(err)
	}
}

// removeFromClosedLocked frees a stream of a closed session: its reservation returns to the
// shared budget at once, while data already received stays readable.
func (st *Stream) removeFromClosedLocked() {
	st.removed = true
	if st.openTimer != nil {
		st.openTimer.Stop()
	}
	if st.reserved > 0 {
		st.releaseLocked()
	}
	st.endedLocked()
}

// CloseChan returns a channel closed when the session closes, for whatever reason (Close,
// the peer closing, a connection error, a keepalive timeout).
func (s *Session) CloseChan() <-chan struct{} { return s.done }

// IsClosed reports whether the session is closed.
func (s *Session) IsClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// NumStreams returns the number of streams counted against Config.MaxStreams: those alive
// in the session, inbound (including those not yet accepted) and outbound, and those that
// ended but still have a Serve handler or a frame waiting to be sent.
func (s *Session) NumStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live
}

// MemoryUsed returns the bytes the session has reserved from its memory budget: what its
// streams buffer and the windows they have grown, and the buffers of the records it holds
// (see Budget).
func (s *Session) MemoryUsed() int64 { return s.budget.Used() }

// LocalAddr returns the local address of the underlying connection.
func (s *Session) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// RemoteAddr returns the remote address of the underlying connection.
func (s *Session) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }

// GoAway tells the peer that this side accepts no more streams; the peer's OpenStream then
// fails with ErrRemoteGoAway and streams it opens anyway are reset. Existing streams
// continue. It does not close the session.
func (s *Session) GoAway() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrSessionClosed
	}
	s.localGoAway = true
	s.mu.Unlock()
	s.queueFrame(typeGoAway, 0, 0, goAwayNormal)
	return nil
}

// keepAlive runs from the keepalive timer: a ping unanswered in time closes the session.
func (s *Session) keepAlive() {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ConnectionWriteTimeout)
	_, err := s.Ping(ctx)
	cancel()
	if err != nil && !s.IsClosed() {
		s.log.Debug("mux: keepalive failed", "err", err)
		s.shutdown(&closedError{cause: ErrKeepAliveTimeout})
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.kaTimer.Reset(s.cfg.KeepAliveInterval)
	}
	s.mu.Unlock()
}
