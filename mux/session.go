package mux

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// Session is a multiplexed connection: one side is the Client, the other the
// Server (they differ only in the stream IDs they use). All methods are safe
// for concurrent use.
type Session struct {
	ys   *yamux.Session
	fc   *frameConn
	tr   *tracker
	conn net.Conn

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // Ping and blocked OpenStream goroutines

	// readers are the streams inside a Read. hashicorp/yamux v0.1.2's Stream.Read loops
	// without blocking from the moment the session starts shutting down until it marks the
	// stream closed, which can take long when those very loops hold both CPUs; so shutdown
	// first expires their read deadlines, which ends the loops at once.
	rmu      sync.Mutex
	readers  map[*Stream]struct{}
	shutdown bool

	// Serve's state: streams the frame reader admitted that no goroutine has taken from
	// yamux's queue yet, and whether a goroutine is taking them.
	amu       sync.Mutex
	handle    func(*Stream)
	onClosed  func(error)
	arrived   int
	accepting bool
	ended     bool               // the connection was closed
	wake      context.CancelFunc // ends acceptLoop's wait when nothing more is coming
}

// enterRead registers a Read; it reports false if the session is shutting down.
func (s *Session) enterRead(st *Stream) bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.shutdown {
		return false
	}
	s.readers[st] = struct{}{}
	return true
}

func (s *Session) exitRead(st *Stream) {
	s.rmu.Lock()
	delete(s.readers, st)
	s.rmu.Unlock()
}

// wakeReaders runs when the session starts shutting down.
func (s *Session) wakeReaders() {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	s.shutdown = true
	for st := range s.readers {
		_ = st.ys.SetReadDeadline(aLongTimeAgo)
	}
}

// connClosed runs when yamux closes the connection, which it does right after it starts
// shutting the session down, whatever the reason.
func (s *Session) connClosed() {
	s.wakeReaders()
	s.amu.Lock()
	report := !s.ended && s.onClosed != nil
	s.ended = true
	s.amu.Unlock()
	if report {
		go s.reportClosed()
	}
}

func (s *Session) reportClosed() {
	s.onClosed(s.closeCause(yamux.ErrSessionShutdown))
}

// arrive runs on yamux's receive goroutine when an inbound stream has been admitted, just
// before yamux queues it for AcceptStream.
func (s *Session) arrive() {
	s.amu.Lock()
	s.arrived++
	start := s.handle != nil && !s.accepting
	if start {
		s.accepting = true
	}
	s.amu.Unlock()
	if start {
		s.startAccepting()
	}
}

// refused runs when yamux resets an admitted stream instead of queueing it (it refuses the
// peer's new streams after a local GoAway): that stream will never reach acceptLoop.
func (s *Session) refused() {
	s.amu.Lock()
	s.arrived = max(s.arrived-1, 0)
	var wake context.CancelFunc
	if s.arrived == 0 && s.accepting {
		wake = s.wake
	}
	s.amu.Unlock()
	if wake != nil {
		wake()
	}
}

func (s *Session) startAccepting() {
	if !s.addGoroutine() {
		s.amu.Lock()
		s.accepting = false
		s.amu.Unlock()
		return
	}
	go s.acceptLoop()
}

// acceptLoop takes the admitted streams from yamux's queue. The last one it takes is handled
// on this very goroutine, the others on new ones: one goroutine per stream being handled, and
// none while no stream arrives.
func (s *Session) acceptLoop() {
	var ctx context.Context
	for {
		s.amu.Lock()
		if ctx == nil || ctx.Err() != nil {
			ctx, s.wake = context.WithCancel(context.Background())
		}
		if s.arrived == 0 { // every admitted stream was refused meanwhile
			s.accepting = false
			s.amu.Unlock()
			s.wg.Done()
			return
		}
		s.amu.Unlock()
		st, err := s.AcceptStream(ctx)
		if err != nil && !s.ys.IsClosed() && ctx.Err() != nil {
			continue // refused woke us: look at arrived again
		}
		s.amu.Lock()
		if err != nil {
			s.accepting = false
			s.amu.Unlock()
			s.wg.Done()
			return
		}
		s.arrived = max(s.arrived-1, 0)
		last := s.arrived == 0
		if last {
			s.accepting = false
		}
		s.amu.Unlock()
		if last {
			s.wg.Done()
			s.handle(st)
			return
		}
		go s.handle(st)
	}
}

// Serve hands every stream the peer opens to handle, each on a goroutine of its own that
// exists only while handle runs: no goroutine waits for streams in between, so an idle
// session costs only yamux's two goroutines. Once the session is closed, for whatever
// reason, closed is called once, on a goroutine of its own, with the cause as AcceptStream
// would return it; Close does not wait for it, nor for handle.
//
// Serve must be called at most once, and AcceptStream must not be used with it. Streams
// that arrived before Serve are handed over at once.
func (s *Session) Serve(handle func(*Stream), closed func(error)) {
	s.amu.Lock()
	s.handle, s.onClosed = handle, closed
	start := s.arrived > 0 && !s.accepting && !s.ended
	if start {
		s.accepting = true
	}
	report := s.ended
	s.amu.Unlock()
	if start {
		s.startAccepting()
	}
	if report {
		go s.reportClosed()
	}
}

func (s *Session) isShutdown() bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.shutdown
}

// Client starts the client side of a session over conn. A nil cfg means
// DefaultConfig(). On success the session owns conn and closes it on Close;
// on error (an invalid cfg) conn is left untouched.
func Client(conn net.Conn, cfg *Config) (*Session, error) {
	return newSession(conn, cfg, true)
}

// Server starts the server side of a session over conn. A nil cfg means
// DefaultConfig(). On success the session owns conn and closes it on Close;
// on error (an invalid cfg) conn is left untouched.
func Server(conn net.Conn, cfg *Config) (*Session, error) {
	return newSession(conn, cfg, false)
}

func newSession(conn net.Conn, cfg *Config, client bool) (*Session, error) {
	c, err := cfg.populate()
	if err != nil {
		return nil, err
	}
	tr := newTracker(c.MaxStreams, c.AcceptBacklog)
	fc := newFrameConn(conn, tr, int(c.MaxStreamWindow)+FrameHeaderSize)
	s := &Session{fc: fc, tr: tr, conn: conn, readers: make(map[*Stream]struct{})}
	// Both hooks are set before yamux starts the goroutines that call them.
	fc.onClose = s.connClosed
	fc.onArrive = s.arrive
	tr.onRefused = s.refused
	var ys *yamux.Session
	if client {
		ys, err = yamux.Client(fc, c.yamuxConfig())
	} else {
		ys, err = yamux.Server(fc, c.yamuxConfig())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s.ys = ys
	return s, nil
}

// OpenStream opens a new stream. It returns ErrTooManyStreams if the session
// already has Config.MaxStreams streams, ErrSessionClosed once the session is
// closed, ErrRemoteGoAway after the peer's GoAway, and ctx.Err() if ctx is
// done before the stream is opened.
//
// OpenStream waits (under ctx) only while Config.AcceptBacklog streams it
// opened are still unacknowledged by the peer. Otherwise it does not wait for
// the peer: the stream can be written at once, and data written before the
// peer accepts it follows its opening on the wire. If the peer refuses the
// stream (its limits), reads and writes on it fail with ErrStreamReset. A peer
// that does not acknowledge (accept) a stream within Config.StreamOpenTimeout
// is considered dead and the session is closed, as yamux does.
func (s *Session) OpenStream(ctx context.Context) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.ys.IsClosed() {
		return nil, ErrSessionClosed
	}
	ok, mayBlock := s.tr.reserve()
	if !ok {
		return nil, ErrTooManyStreams
	}
	open := func() (*yamux.Stream, error) {
		defer s.tr.unreserve()
		return s.ys.OpenStream()
	}
	if !mayBlock {
		ys, err := open()
		if err != nil {
			return nil, mapErr(err)
		}
		return newStream(s, ys), nil
	}
	// yamux's OpenStream blocks while AcceptBacklog opens await the peer's
	// acknowledgement; wait for it in a goroutine so that ctx can end the wait.
	if !s.addGoroutine() {
		s.tr.unreserve()
		return nil, ErrSessionClosed
	}
	type result struct {
		ys  *yamux.Stream
		err error
	}
	ch := make(chan result)
	abandoned := make(chan struct{})
	go func() {
		defer s.wg.Done()
		ys, err := open()
		select {
		case ch <- result{ys, err}:
		case <-abandoned:
			if err == nil {
				// Close rather than reset: the peer's accept acknowledges
				// it and then frees it, returning its place in yamux's
				// semaphore (a reset before acknowledgement would hold the
				// place until StreamCloseTimeout).
				_ = newStream(s, ys).Close()
			}
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, mapErr(r.err)
		}
		return newStream(s, r.ys), nil
	case <-ctx.Done():
		close(abandoned)
		return nil, ctx.Err()
	}
}

// addGoroutine registers a helper goroutine unless the session is closed.
func (s *Session) addGoroutine() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// AcceptStream waits for the next stream opened by the peer. It returns
// ctx.Err() when ctx is done and ErrSessionClosed (possibly wrapping the
// cause, such as io.EOF when the peer closed the connection, or
// ErrKeepAliveTimeout, or ErrProtocol) once the session is closed; streams
// still queued then are dropped.
func (s *Session) AcceptStream(ctx context.Context) (*Stream, error) {
	ys, err := s.ys.AcceptStreamWithContext(ctx)
	if err == nil && s.ys.IsClosed() {
		err = yamux.ErrSessionShutdown // a stream left in the queue of a dead session
	}
	if err != nil {
		if s.ys.IsClosed() {
			return nil, s.closeCause(err)
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, mapErr(err)
	}
	s.tr.accepted(ys.StreamID())
	return newStream(s, ys), nil
}

// closeCause returns ErrSessionClosed wrapping why the session closed. yamux
// reports the cause only from AcceptStream, once its queue is empty, so the
// queue of the dead session is drained (it holds at most AcceptBacklog
// streams, and nothing blocks once the session is closed).
func (s *Session) closeCause(err error) error {
	for range s.tr.backlog + 2 {
		if err != yamux.ErrSessionShutdown {
			break
		}
		_, err = s.ys.AcceptStreamWithContext(context.Background())
		if err == nil {
			err = yamux.ErrSessionShutdown
		}
	}
	if err == yamux.ErrSessionShutdown {
		return ErrSessionClosed
	}
	return &closedError{cause: mapErr(err)}
}

// Close closes the session and its connection. Streams fail with
// ErrSessionClosed (reads once buffered data is consumed). Close waits for the
// session's goroutines and is idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err := s.ys.Close()
	s.wg.Wait()
	s.fc.wait()
	return mapErr(err)
}

// Abort closes the session's connection and returns without waiting: the session then
// closes as it does when the connection fails (streams fail, the Serve callback runs).
// Frames the connection still buffers are dropped (the write deadline is moved to the
// past first, so a secio.Conn does not wait to write them out as its Close does).
func (s *Session) Abort() {
	_ = s.conn.SetWriteDeadline(aLongTimeAgo)
	_ = s.conn.Close()
}

// CloseChan returns a channel closed when the session closes, for whatever
// reason (Close, the peer closing, a connection error, a keepalive timeout).
func (s *Session) CloseChan() <-chan struct{} { return s.ys.CloseChan() }

// IsClosed reports whether the session is closed.
func (s *Session) IsClosed() bool { return s.ys.IsClosed() }

// NumStreams returns the number of streams alive in the session, inbound
// (including those not yet accepted) and outbound: the number counted against
// Config.MaxStreams.
func (s *Session) NumStreams() int { return s.tr.count() }

// LocalAddr returns the local address of the underlying connection.
func (s *Session) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// RemoteAddr returns the remote address of the underlying connection.
func (s *Session) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }

// Ping sends a ping and returns the round-trip time. It fails with ErrTimeout
// if no answer comes within Config.ConnectionWriteTimeout and returns
// ctx.Err() if ctx is done first.
func (s *Session) Ping(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !s.addGoroutine() {
		return 0, ErrSessionClosed
	}
	type result struct {
		rtt time.Duration
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer s.wg.Done()
		rtt, err := s.ys.Ping()
		ch <- result{rtt, err}
	}()
	select {
	case r := <-ch:
		return r.rtt, mapErr(r.err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// GoAway tells the peer that this side accepts no more streams; the peer's
// OpenStream then fails with ErrRemoteGoAway and streams it opens anyway are
// reset. Existing streams continue. It does not close the session.
func (s *Session) GoAway() error { return mapErr(s.ys.GoAway()) }
