package main

// The delay proxy puts a wide-area path between two ends that both run on loopback: every
// byte is held for a one-way delay in each direction (so RTT = 2 x delay), and, optionally,
// passes a bottleneck link first: a queue of bounded size drained at a fixed bit rate. When
// that queue is full the proxy stops reading, so that the sender's TCP stack holds the
// backlog (backpressure), as a host does whose link is saturated; no packet is ever lost.
// The link is shared: every connection through the proxy queues on the same one in each
// direction, first come first served, as on one access link.
//
// Timing is by deadline: every chunk read gets the time it must leave the proxy (arrival,
// plus its turn on the bottleneck, plus the delay), and the writer sleeps until the first
// chunk's deadline, then writes every chunk already due in one writev. Nothing accumulates
// drift from sleeping per chunk, and a writer that wakes late catches up in one system call.
//
// What it does not model: loss, reordering, jitter, and the TCP window of a real path. Both
// hops are loopback sockets, whose congestion and receive windows open within microseconds,
// so a sender's TCP is never limited by the path's RTT here: only the transports' own flow
// control (stream windows) is. docs/PERFORMANCE.md says what the kernel's buffers allow on a
// real path.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/tendril-p2p/tendril/internal/loopback"
)

// proxyConfig is the path a delay proxy models. Both directions get the same settings.
type proxyConfig struct {
	// Target is the host:port every accepted connection is forwarded to.
	Target string
	// Delay is the one-way delay applied in each direction.
	Delay time.Duration
	// Rate is the bottleneck's rate in bits per second; 0 means no bottleneck.
	Rate int64
	// Queue is the bottleneck queue in bytes (only with Rate): the proxy reads no more while
	// this much waits to cross the link. Zero means one bandwidth-delay product (Rate x 2 x
	// Delay), at least 64 KiB.
	Queue int
	// MaxInFlight bounds the bytes one direction of one connection holds (read, not yet
	// written): memory stays bounded when a receiver stops reading. Zero means 64 MiB, which
	// lets one connection carry 1.3 GB/s through a 50 ms one-way delay.
	MaxInFlight int
	// SocketBuffer, if positive, sets SO_RCVBUF on the proxy's own sockets, so that the
	// backlog of a saturated bottleneck waits in its queue and the sender's socket rather
	// than in a large autotuned receive buffer of the proxy (which no real link has).
	SocketBuffer int
}

const (
	proxyReadSize    = 128 << 10 // largest read without a bottleneck
	proxyMaxInFlight = 64 << 20
	proxyMinQueue    = 64 << 10
)

// delayProxy is a running proxy. Close ends every connection and goroutine it started.
type delayProxy struct {
	cfg      proxyConfig
	readSize int
	// srv accepts the clients, and holds both sides of every connection for Close.
	srv    *loopback.Server
	ctx    context.Context
	cancel context.CancelFunc
	pool   sync.Pool
	// links are the bottleneck's two directions, shared by all connections: up carries
	// what clients send, down what the target sends.
	up, down link

	// Peaks observed over the proxy's life, for tests and for checking a run.
	peakBacklog  atomic.Int64 // bytes waiting for the bottleneck link, one direction
	peakInFlight atomic.Int64 // bytes held by one direction of one connection

	late lateness
}

// lateness sums how late the writers' timers woke them for their deadlines: the proxy's
// own timing error (scheduling and timer delay on a busy machine).
type lateness struct {
	n, sum, max, over1ms atomic.Int64 // wake-ups; nanoseconds; wake-ups more than 1 ms late
}

func (l *lateness) add(d time.Duration) {
	l.n.Add(1)
	l.sum.Add(int64(d))
	peak(&l.max, int64(d))
	if d > time.Millisecond {
		l.over1ms.Add(1)
	}
}

// lateStats is a summary of a proxy's lateness.
type lateStats struct {
	N       int64         `json:"wakeups"`
	Sum     time.Duration `json:"sum_ns"`
	Max     time.Duration `json:"max_ns"`
	Over1ms int64         `json:"over_1ms"`
}

// Lateness reports how late the proxy delivered batches after their deadlines so far.
func (p *delayProxy) Lateness() lateStats {
	return lateStats{N: p.late.n.Load(), Sum: time.Duration(p.late.sum.Load()), Max: time.Duration(p.late.max.Load()), Over1ms: p.late.over1ms.Load()}
}

// merge adds o to s.
func (s *lateStats) merge(o lateStats) {
	s.N += o.N
	s.Sum += o.Sum
	s.Max = max(s.Max, o.Max)
	s.Over1ms += o.Over1ms
}

// startDelayProxy listens on a free loopback port and forwards to cfg.Target.
func startDelayProxy(cfg proxyConfig) (*delayProxy, error) {
	if cfg.Target == "" || cfg.Delay < 0 || cfg.Rate < 0 || cfg.Queue < 0 || cfg.MaxInFlight < 0 {
		return nil, fmt.Errorf("bench: delay proxy: invalid config %+v", cfg)
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = proxyMaxInFlight
	}
	readSize := proxyReadSize
	if cfg.Rate > 0 {
		if cfg.Queue == 0 {
			cfg.Queue = max(int(float64(cfg.Rate)/8*(2*cfg.Delay).Seconds()), proxyMinQueue)
		}
		// A chunk crosses the link as a whole, so chunks are kept to about a millisecond
		// of link time (a packet or more): the queue drains smoothly and a small message
		// behind a chunk waits no longer than a link of that rate would make it.
		readSize = min(max(int(cfg.Rate/8/1000), 1500), proxyReadSize, cfg.Queue)
	}
	readSize = min(readSize, cfg.MaxInFlight)
	srv, err := loopback.Listen()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &delayProxy{cfg: cfg, readSize: readSize, srv: srv, ctx: ctx, cancel: cancel}
	p.pool.New = func() any { b := make([]byte, readSize); return &b }
	srv.Serve(p.serve)
	return p, nil
}

// Addr is the host:port to dial instead of the target.
func (p *delayProxy) Addr() string { return p.srv.Addr().String() }

// Close stops accepting, closes every connection at once (data still in the delay line is
// dropped) and waits for every goroutine of the proxy to end.
func (p *delayProxy) Close() error {
	p.cancel()
	return p.srv.Close()
}

// serve forwards one connection until both directions have ended.
//
// TCP's handshake is modelled too: the client's connect completed at once on loopback,
// where on a real path it would have taken a round trip, and the server would accept the
// connection half a round trip later still, with the client's ACK. So the target is dialled
// 1.5 RTT after the accept, and nothing the client sent before is delivered earlier than
// that: a client that writes at once is served as if it had waited for its connect.
func (p *delayProxy) serve(client *net.TCPConn) {
	if !p.srv.Track(client) {
		client.Close()
		return
	}
	defer p.srv.Untrack(client)
	if n := p.cfg.SocketBuffer; n > 0 {
		_ = client.SetReadBuffer(n)
	}
	open := time.Now().Add(3 * p.cfg.Delay)
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	up := p.newPipe(client, nil, &p.up)
	up.notBefore = open
	wg.Go(func() { up.read(ctx) })
	abort := func() {
		cancel()
		resetClose(client)
	}
	if !sleepCtx(ctx, time.Until(open)) {
		abort()
		return
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", p.cfg.Target)
	if err != nil {
		abort()
		return
	}
	target := nc.(*net.TCPConn)
	if !p.srv.Track(target) {
		target.Close()
		abort()
		return
	}
	defer p.srv.Untrack(target)
	if n := p.cfg.SocketBuffer; n > 0 {
		_ = target.SetReadBuffer(n)
	}
	up.dst = target
	down := p.newPipe(target, client, &p.down)
	wg.Go(func() { up.write(ctx) })
	wg.Go(func() { down.read(ctx) })
	wg.Go(func() { down.write(ctx) })
	wg.Wait()
	client.Close()
	target.Close()
}

// resetClose closes c with a reset (SO_LINGER 0).
func resetClose(c *net.TCPConn) {
	_ = c.SetLinger(0)
	c.Close()
}

// A chunk is one read, due at a time; a chunk with end set marks the end of the direction.
type chunk struct {
	b   []byte
	buf *[]byte // the pool buffer b is in, if any
	due time.Time
	end error // io.EOF: the source half-closed; other errors: it failed or was reset
}

// A pipe is one direction of one connection: a reader that stamps every chunk with its
// deadline, and a writer that delivers chunks at their deadlines.
type pipe struct {
	p        *delayProxy
	src, dst *net.TCPConn
	q        chan chunk
	inFlight *semaphore.Weighted
	held     atomic.Int64
	link     *link
	// notBefore is the earliest delivery: when the connection would be open at the far end.
	notBefore time.Time
}

// A link is one direction of the bottleneck.
type link struct {
	mu sync.Mutex
	// lastDepart is when the last chunk booked finishes crossing the link.
	lastDepart time.Time
}

func (p *delayProxy) newPipe(src, dst *net.TCPConn, l *link) *pipe {
	return &pipe{
		p: p, src: src, dst: dst, link: l,
		// The byte budget bounds the queue; the channel only needs to hold as many
		// chunks as that budget can, at worst one small read each.
		q:        make(chan chunk, 4096),
		inFlight: semaphore.NewWeighted(int64(p.cfg.MaxInFlight)),
	}
}

// sleepCtx waits d or until ctx ends; it reports whether the full time passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (pp *pipe) read(ctx context.Context) {
	cfg := &pp.p.cfg
	size := pp.p.readSize
	for {
		if cfg.Rate > 0 {
			// Wait until the bottleneck queue has room for a full read: what waits to
			// cross the link is what it sends from now until lastDepart. Connections
			// that find room at once may each add a read beyond the queue.
			backlog := pp.backlog(time.Now())
			if over := backlog + int64(size) - int64(cfg.Queue); over > 0 {
				if !sleepCtx(ctx, linkTime(over, cfg.Rate)) {
					return
				}
			}
		}
		if err := pp.inFlight.Acquire(ctx, int64(size)); err != nil {
			return
		}
		buf := pp.p.pool.Get().(*[]byte)
		n, err := pp.src.Read(*buf)
		now := time.Now()
		c := chunk{b: (*buf)[:n], buf: buf}
		if n < size/4 {
			// Small reads (round trips) are copied out so that a queue of them does not
			// hold a full buffer each.
			c = chunk{b: append([]byte(nil), (*buf)[:n]...)}
			pp.p.pool.Put(buf)
		}
		pp.inFlight.Release(int64(size - n))
		if n > 0 {
			c.due = pp.stamp(now, n)
			pp.hold(int64(n))
			if !pp.send(ctx, c) {
				return
			}
		} else if c.buf != nil {
			pp.p.pool.Put(c.buf)
		}
		if err != nil {
			// The end travels like data: after everything read before it, with the delay.
			pp.send(ctx, chunk{due: pp.stamp(now, 0), end: err})
			return
		}
	}
}

// stamp returns when n bytes read at now leave the proxy, and books their time on the link.
func (pp *pipe) stamp(now time.Time, n int) time.Time {
	due := pp.stampLink(now, n)
	if due.Before(pp.notBefore) {
		return pp.notBefore
	}
	return due
}

func (pp *pipe) stampLink(now time.Time, n int) time.Time {
	cfg := &pp.p.cfg
	if cfg.Rate == 0 {
		return now.Add(cfg.Delay)
	}
	l := pp.link
	l.mu.Lock()
	depart := now
	if l.lastDepart.After(now) {
		depart = l.lastDepart
	}
	l.lastDepart = depart.Add(linkTime(int64(n), cfg.Rate))
	last := l.lastDepart
	l.mu.Unlock()
	peak(&pp.p.peakBacklog, pp.p.backlog(last, now))
	return last.Add(cfg.Delay)
}

// backlog is the bytes that still wait to cross the pipe's link at now.
func (pp *pipe) backlog(now time.Time) int64 {
	pp.link.mu.Lock()
	last := pp.link.lastDepart
	pp.link.mu.Unlock()
	return pp.p.backlog(last, now)
}

// backlog is the bytes a link whose last booked chunk departs at last still holds at now.
func (p *delayProxy) backlog(last, now time.Time) int64 {
	if !last.After(now) {
		return 0
	}
	return int64(last.Sub(now).Seconds() * float64(p.cfg.Rate) / 8)
}

// linkTime is how long n bytes take to cross a link of rate bits per second.
func linkTime(n, rate int64) time.Duration {
	return time.Duration(float64(n) * 8 / float64(rate) * float64(time.Second))
}

func (pp *pipe) hold(n int64) { peak(&pp.p.peakInFlight, pp.held.Add(n)) }

func peak(p *atomic.Int64, v int64) {
	for {
		old := p.Load()
		if v <= old || p.CompareAndSwap(old, v) {
			return
		}
	}
}

func (pp *pipe) send(ctx context.Context, c chunk) bool {
	select {
	case pp.q <- c:
		return true
	case <-ctx.Done():
		pp.release(c)
		return false
	}
}

func (pp *pipe) release(c chunk) {
	if n := int64(len(c.b)); n > 0 {
		pp.held.Add(-n)
		pp.inFlight.Release(n)
	}
	if c.buf != nil {
		pp.p.pool.Put(c.buf)
	}
}

func (pp *pipe) write(ctx context.Context) {
	var (
		batch   []chunk
		bufs    net.Buffers
		next    chunk
		hasNext bool
		failed  bool // dst failed: drain what comes, deliver nothing more
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		first := next
		if !hasNext {
			select {
			case first = <-pp.q:
			case <-ctx.Done():
				return
			}
		}
		hasNext = false
		if d := time.Until(first.due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
				// Only a wake-up from the timer measures the proxy's timing: a chunk
				// already overdue waited for a destination that did not read.
				pp.p.late.add(time.Since(first.due))
			case <-ctx.Done():
				pp.release(first)
				return
			}
		}
		// Gather every chunk already due behind the first, up to an end marker.
		batch = append(batch[:0], first)
		now := time.Now()
	gather:
		for first.end == nil {
			select {
			case c := <-pp.q:
				if c.due.After(now) {
					next, hasNext = c, true
					break gather
				}
				batch = append(batch, c)
				if c.end != nil {
					break gather
				}
			default:
				break gather
			}
		}
		bufs = bufs[:0]
		for _, c := range batch {
			if len(c.b) > 0 {
				bufs = append(bufs, c.b)
			}
		}
		if len(bufs) > 0 && !failed {
			if _, err := bufs.WriteTo(pp.dst); err != nil {
				failed = true
			}
		}
		end := batch[len(batch)-1].end
		for _, c := range batch {
			pp.release(c)
		}
		batch = batch[:0]
		if end != nil {
			if failed {
				return
			}
			if errors.Is(end, io.EOF) {
				_ = pp.dst.CloseWrite()
			} else {
				// The source failed or was reset: so is the destination, after the delay.
				resetClose(pp.dst)
			}
			return
		}
	}
}
