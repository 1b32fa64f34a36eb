package mux

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
)

// Stream is one bidirectional stream of a Session. It is a net.Conn, with
// deadlines. Read and Write may be called concurrently with each other, but
// not each with itself.
//
// Closing: CloseWrite sends end-of-stream to the peer (its reads return io.EOF
// once they have consumed the data) and keeps the read side open. Close does
// the same and also closes the read side locally. The stream is freed once
// both sides have closed their write sides, or after
// Config.StreamCloseTimeout. Reset aborts the stream in both directions at
// once.
type Stream struct {
	ys    *yamux.Stream
	s     *Session
	state atomic.Uint32
}

const (
	stateClosed = 1 << iota
	stateReset
)

var _ net.Conn = (*Stream)(nil)

func newStream(s *Session, ys *yamux.Stream) *Stream {
	return &Stream{ys: ys, s: s}
}

// aLongTimeAgo is a deadline in the past, used to wake blocked calls.
var aLongTimeAgo = time.Unix(1, 0)

// StreamID returns the yamux stream ID (odd for streams opened by the client
// side, even for the server side).
func (st *Stream) StreamID() uint32 { return st.ys.StreamID() }

// Read reads data. It returns io.EOF after the peer closed its write side and
// all data was read, ErrStreamReset after a reset, ErrStreamClosed after
// Close, ErrSessionClosed when the session ended without the peer closing the
// stream, and ErrTimeout when the read deadline passes.
func (st *Stream) Read(p []byte) (int, error) {
	if err := st.localErr(); err != nil {
		return 0, err
	}
	if !st.s.enterRead(st) {
		return st.readAfterShutdown(p)
	}
	st.s.fc.flushOpening()
	n, err := st.ys.Read(p)
	st.s.exitRead(st)
	if err != nil && !errors.Is(err, io.EOF) && st.s.isShutdown() {
		// Our shutdown deadline (see Session.readers), or an error of the dying session.
		if n > 0 {
			return n, nil
		}
		return st.readAfterShutdown(p)
	}
	switch {
	case err == io.EOF:
		// yamux also reports io.EOF when the session dies under the stream;
		// only the peer's end of stream is a clean EOF.
		if st.s.ys.IsClosed() && !st.s.tr.finReceived(st.ys.StreamID()) {
			err = ErrSessionClosed
		}
	case err != nil:
		err = st.mapErr(err)
	}
	return n, err
}

// Write writes data, blocking while the peer's window is full. It returns
// ErrStreamClosed after CloseWrite or Close, ErrStreamReset after a reset,
// ErrSessionClosed when the session is gone, and ErrTimeout when the write
// deadline passes (some of p may have been written).
func (st *Stream) Write(p []byte) (int, error) {
	if err := st.localErr(); err != nil {
		return 0, err
	}
	n, err := st.ys.Write(p)
	if err != nil {
		err = st.mapErr(err)
	}
	return n, err
}

func (st *Stream) localErr() error {
	switch s := st.state.Load(); {
	case s&stateReset != 0:
		return ErrStreamReset
	case s&stateClosed != 0:
		return ErrStreamClosed
	}
	return nil
}

func (st *Stream) mapErr(err error) error {
	if lerr := st.localErr(); lerr != nil {
		return lerr
	}
	if err == yamux.ErrStreamClosed && st.s.ys.IsClosed() {
		return ErrSessionClosed
	}
	return mapErr(err)
}

// readAfterShutdown reads once the session is shutting down: data that yamux still buffers
// for the stream is delivered (a read deadline in the past still reads buffered data), then
// the session's end is reported.
func (st *Stream) readAfterShutdown(p []byte) (int, error) {
	_ = st.ys.SetReadDeadline(aLongTimeAgo)
	n, err := st.ys.Read(p)
	if n > 0 {
		return n, nil
	}
	if err == io.EOF && st.s.tr.finReceived(st.ys.StreamID()) {
		return 0, io.EOF // the peer had ended the stream cleanly before the session went
	}
	if lerr := st.localErr(); lerr != nil {
		return 0, lerr
	}
	return 0, ErrSessionClosed
}

// CloseWrite half-closes the stream: the peer reads io.EOF after the data
// already written; this side can still read.
func (st *Stream) CloseWrite() error {
	return mapErr(st.ys.Close())
}

// Close closes both directions locally: it sends end-of-stream like
// CloseWrite, and blocked and later Reads and Writes fail with
// ErrStreamClosed. Data the peer still sends is discarded.
func (st *Stream) Close() error {
	if st.state.Or(stateClosed)&(stateClosed|stateReset) != 0 {
		return nil
	}
	err := st.ys.Close()
	_ = st.ys.SetDeadline(aLongTimeAgo) // wake blocked calls
	return mapErr(err)
}

// Reset aborts the stream: the peer's reads and writes fail with
// ErrStreamReset, and so do this side's. The stream stops counting against
// MaxStreams at once.
func (st *Stream) Reset() error {
	if st.state.Or(stateReset)&stateReset != 0 {
		return nil
	}
	id := st.ys.StreamID()
	st.s.tr.reset(id)
	st.s.fc.queueRST(id)
	_ = st.ys.SetDeadline(aLongTimeAgo) // wake blocked calls
	// Close the yamux stream so that yamux frees it (when the peer's close
	// crosses ours, or after StreamCloseTimeout); its end-of-stream frame
	// follows the reset on the wire and the peer ignores it.
	_ = st.ys.Close()
	return nil
}

// SetDeadline sets the read and write deadlines.
func (st *Stream) SetDeadline(t time.Time) error { return st.ys.SetDeadline(t) }

// SetReadDeadline sets the deadline for blocked and future Reads.
func (st *Stream) SetReadDeadline(t time.Time) error { return st.ys.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline for blocked and future Writes.
func (st *Stream) SetWriteDeadline(t time.Time) error { return st.ys.SetWriteDeadline(t) }

// LocalAddr returns the local address of the session's connection.
func (st *Stream) LocalAddr() net.Addr { return st.s.LocalAddr() }

// RemoteAddr returns the remote address of the session's connection.
func (st *Stream) RemoteAddr() net.Addr { return st.s.RemoteAddr() }

// Shrink releases the stream's receive buffer if it holds no unread data. Call it at points
// where a stream is likely to stay idle (after a negotiation, say): the buffer grows to the
// largest burst received and is otherwise kept for the stream's life.
func (st *Stream) Shrink() { st.ys.Shrink() }

// Session returns the session the stream belongs to.
func (st *Stream) Session() *Session { return st.s }
