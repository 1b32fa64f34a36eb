package memory

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// pipe is one direction of a connection: what one end wrote that the other has not read.
// Bytes are held once, in buf, from Write to Read; the link only decides when each piece
// becomes readable (segs). No goroutine runs for a pipe: a reader waiting for bytes in
// flight sleeps until the first of them arrives (one timer, re-armed), and a writer
// waiting for space sleeps until a read frees some.
type pipe struct {
	path  *path
	limit int // Link.Buffer: bytes buf may hold

	mu    sync.Mutex
	rcond sync.Cond // readers wait: for bytes to arrive, the end, a deadline, Close
	wcond sync.Cond // writers wait: for space, a deadline, Close

	buf   ring  // bytes written and unread: first the arrived ones (ready), then in flight
	ready int   // bytes at the front of buf that have arrived
	segs  []seg // the bytes in flight, in order (segs[head:])
	head  int
	last  int64 // when the last bytes written arrive: nothing written later arrives sooner

	// eof: the writing end is done (CloseWrite or Close): writes fail with net.ErrClosed,
	// and reads return io.EOF once all bytes have arrived and eofAt has come (the end
	// travels the link too).
	eof   bool
	eofAt int64
	// gone: the reading end is closed: reads fail with net.ErrClosed, and writes with
	// ErrReset (nobody will read them); what was held is dropped.
	gone bool

	rdl, wdl deadline
	arrival  *time.Timer // wakes readers when the first bytes in flight, or the end, arrive
	armed    int64       // when arrival fires; 0 if it is not armed
}

// seg is a piece of the bytes in flight: n bytes that arrive at at.
type seg struct {
	n     int
	at    int64
	first int64 // the at of the first write merged into this piece
}

// mergeWindow is how close in arrival writes must be to share a piece: many tiny writes
// over a delayed link then cost one seg per window, not one each, and a byte arrives at
// most this late, far less than a timer's own slack.
const mergeWindow = int64(100 * time.Microsecond)

func newPipe(p *path) *pipe {
	pp := &pipe{path: p, limit: p.link.Load().buffer()}
	pp.rcond.L = &pp.mu
	pp.wcond.L = &pp.mu
	pp.rdl.cond = &pp.rcond
	pp.wdl.cond = &pp.wcond
	return pp
}

// write copies b into the pipe, waiting for space while it is full. The caller allows
// one write at a time, so that concurrent Writes do not interleave.
func (p *pipe) write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for {
		if err := p.writeErr(); err != nil {
			return n, err
		}
		if n == len(b) {
			return n, nil
		}
		space := p.limit - p.buf.n
		if space == 0 {
			p.wcond.Wait()
			continue
		}
		l := p.path.link.Load()
		k := min(space, len(b)-n)
		if l.Rate > 0 {
			k = min(k, segment(l.Rate))
		}
		p.buf.write(b[n:n+k], p.limit)
		p.sent(k, l)
		n += k
		if n == len(b) {
			return n, nil
		}
	}
}

func (p *pipe) writeErr() error {
	switch {
	case p.eof:
		return net.ErrClosed
	case p.gone:
		return ErrReset
	case p.wdl.passed():
		return os.ErrDeadlineExceeded
	}
	return nil
}

// sent schedules the arrival of k bytes just written over link l.
func (p *pipe) sent(k int, l *Link) {
	inFlight := p.head < len(p.segs)
	if l.Delay == 0 && l.Rate == 0 && !inFlight {
		// Unshaped, and nothing in flight to overtake: readable at once. This is the fast
		// path of plain in-memory tests; it reads no clock.
		p.ready += k
		p.rcond.Broadcast()
		return
	}
	now := clock()
	at := max(p.path.arrival(now, k, l), p.last)
	p.last = at
	switch {
	case at <= now && !inFlight:
		p.ready += k
	case inFlight && at-p.segs[len(p.segs)-1].first <= mergeWindow:
		s := &p.segs[len(p.segs)-1]
		s.n += k
		s.at = at
	default:
		p.segs = append(p.segs, seg{n: k, at: at, first: at})
	}
	p.rcond.Broadcast()
}

// read moves arrived bytes into b, waiting for some to arrive.
func (p *pipe) read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.gone {
			return 0, net.ErrClosed
		}
		if len(b) == 0 {
			return 0, nil
		}
		if p.rdl.passed() {
			return 0, os.ErrDeadlineExceeded
		}
		var now int64
		if p.head < len(p.segs) || p.eof {
			now = clock()
			p.advance(now)
		}
		if p.ready > 0 {
			k := p.buf.read(b[:min(len(b), p.ready)])
			p.ready -= k
			if p.eof && p.buf.n == 0 {
				p.buf.release()
			}
			p.wcond.Broadcast()
			return k, nil
		}
		switch {
		case p.head < len(p.segs):
			p.arm(p.segs[p.head].at, now)
		case p.eof && now >= p.eofAt:
			return 0, io.EOF
		case p.eof:
			p.arm(p.eofAt, now)
		}
		p.rcond.Wait()
	}
}

// advance makes the pieces that have arrived by now readable.
func (p *pipe) advance(now int64) {
	for p.head < len(p.segs) && p.segs[p.head].at <= now {
		p.ready += p.segs[p.head].n
		p.head++
	}
	switch {
	case p.head == len(p.segs):
		p.segs, p.head = p.segs[:0], 0
	case p.head >= 64 && 2*p.head >= len(p.segs):
		// Slide down, or a link never idle would grow segs without bound.
		p.segs, p.head = p.segs[:copy(p.segs, p.segs[p.head:])], 0
	}
}

// arm makes sure a timer wakes the readers at at (or sooner).
func (p *pipe) arm(at, now int64) {
	if p.armed != 0 && p.armed <= at {
		return
	}
	p.armed = at
	d := time.Duration(at - now)
	if p.arrival == nil {
		p.arrival = time.AfterFunc(d, p.arrived)
	} else {
		p.arrival.Reset(d)
	}
}

func (p *pipe) arrived() {
	p.mu.Lock()
	p.armed = 0
	p.rcond.Broadcast()
	p.mu.Unlock()
}

// setReadDeadline sets the reading end's deadline; false if that end is closed.
func (p *pipe) setReadDeadline(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return false
	}
	if p.rdl.set(t) {
		p.rcond.Broadcast()
	}
	return true
}

// setWriteDeadline sets the writing end's deadline.
func (p *pipe) setWriteDeadline(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.eof {
		p.wdl.t = t // nothing will wait on it: no timer
		return
	}
	if p.wdl.set(t) {
		p.wcond.Broadcast()
	}
}

// closeRead closes the reading end: its reads fail, the writer's fail with ErrReset,
// and the bytes held are dropped.
func (p *pipe) closeRead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone = true
	p.buf.release()
	p.ready, p.segs, p.head = 0, nil, 0
	p.rdl.stop()
	if p.arrival != nil {
		p.arrival.Stop()
		p.armed = 0
	}
	p.rcond.Broadcast()
	p.wcond.Broadcast()
}

// closeWrite ends the writing end's stream: the reader gets io.EOF after the bytes
// written, once the end has travelled the link.
func (p *pipe) closeWrite() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wdl.stop()
	if p.eof {
		return
	}
	p.eof = true
	now := clock()
	p.eofAt = now
	if l := p.path.link.Load(); l.Delay != 0 || l.Rate != 0 {
		p.eofAt = max(p.path.arrival(now, 0, l), p.last)
	}
	if p.buf.n == 0 {
		p.buf.release()
	}
	p.rcond.Broadcast()
	p.wcond.Broadcast()
}
