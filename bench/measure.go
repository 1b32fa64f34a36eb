package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The first byte a client writes on a stream says what the server does with it.
const (
	opSink = 's' // read to end-of-stream, then answer the byte count (8 bytes, big endian)
	opEcho = 'e' // echo 64-byte messages until end-of-stream
	opIdle = 'i' // hold the stream open, reading, until end-of-stream
)

const (
	bulkWrite = 64 << 10 // bulk writes are 64 KiB
	rttSize   = 64       // round-trip messages are 64 bytes
)

// idleStreams counts the server ends of idle streams, so that a memory
// measurement starts only once every stream exists on both sides.
var idleStreams atomic.Int64

// serveStream is the server side of every stream, on every transport.
func serveStream(st stream) {
	var op [1]byte
	if _, err := io.ReadFull(st, op[:]); err != nil {
		return
	}
	switch op[0] {
	case opSink:
		buf := make([]byte, bulkWrite)
		var n int64
		for {
			k, err := st.Read(buf)
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				return
			}
		}
		var ack [8]byte
		binary.BigEndian.PutUint64(ack[:], uint64(n))
		if _, err := st.Write(ack[:]); err != nil {
			return
		}
		_ = st.CloseWrite()
	case opEcho:
		var msg [rttSize]byte
		for {
			if _, err := io.ReadFull(st, msg[:]); err != nil {
				return
			}
			if _, err := st.Write(msg[:]); err != nil {
				return
			}
		}
	case opIdle:
		idleStreams.Add(1)
		defer idleStreams.Add(-1)
		var b [1]byte
		for {
			if _, err := st.Read(b[:]); err != nil {
				return
			}
		}
	}
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sink writes 64 KiB writes on st for d, half-closes it and waits for the
// server's count, which must match. It returns the bytes moved.
func sink(st stream, d time.Duration) (int64, error) {
	buf := make([]byte, bulkWrite)
	buf[0] = opSink
	if _, err := st.Write(buf[:1]); err != nil {
		return 0, err
	}
	var n int64
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		k, err := st.Write(buf)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	if err := st.CloseWrite(); err != nil {
		return n, err
	}
	var ack [8]byte
	if _, err := io.ReadFull(st, ack[:]); err != nil {
		return n, fmt.Errorf("bench: reading the sink's count: %w", err)
	}
	if got := int64(binary.BigEndian.Uint64(ack[:])); got != n {
		return n, fmt.Errorf("bench: sink received %d bytes of %d", got, n)
	}
	return n, nil
}

// bulk measures the throughput of n concurrent streams on one connection, in
// bytes per second, and the process CPU time per byte (both ends counted).
func bulk(ctx context.Context, srv server, n int, d time.Duration) (bps, cpuPerByte float64, err error) {
	c, err := srv.Dial(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	streams := make([]stream, n)
	for i := range streams {
		if streams[i], err = c.OpenStream(ctx); err != nil {
			return 0, 0, err
		}
		defer streams[i].Close()
	}
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		errs  = make([]error, n)
	)
	cpu0, t0 := cpuTime(), time.Now()
	for i, st := range streams {
		wg.Go(func() {
			k, err := sink(st, d)
			total.Add(k)
			errs[i] = err
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	b := float64(total.Load())
	return b / elapsed.Seconds(), cpu.Seconds() / b, nil
}

// dialStream dials srv and opens a stream on the new connection. The caller closes both;
// on an error nothing is left open.
func dialStream(ctx context.Context, srv server) (conn, stream, error) {
	c, err := srv.Dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := c.OpenStream(ctx)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, st, nil
}

// roundTrips measures 64-byte request/response round trips per second on one
// stream.
func roundTrips(ctx context.Context, srv server, d time.Duration) (float64, error) {
	c, st, err := dialStream(ctx, srv)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	defer st.Close()
	if _, err := st.Write([]byte{opEcho}); err != nil {
		return 0, err
	}
	var msg [rttSize]byte
	n := 0
	t0 := time.Now()
	deadline := t0.Add(d)
	for ; n%64 != 0 || time.Now().Before(deadline); n++ {
		if _, err := st.Write(msg[:]); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(st, msg[:]); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

// connect is one complete connection: dial, handshake, multiplexer, one
// stream with one 64-byte round trip, close.
func connect(ctx context.Context, srv server) error {
	_, err := firstReply(ctx, srv)
	return err
}

// connRate measures complete connections per second with the given number
// of concurrent dialers, and the process CPU time (user + system, both ends)
// per connection, which a busy machine disturbs far less than the rate.
func connRate(ctx context.Context, srv server, dialers int, d time.Duration) (rate float64, cpuPerConn time.Duration, err error) {
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		errs  = make([]error, dialers)
	)
	cpu0, t0 := cpuTime(), time.Now()
	deadline := t0.Add(d)
	for i := range dialers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := connect(ctx, srv); err != nil {
					errs[i] = err
					return
				}
				total.Add(1)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	n := total.Load()
	return float64(n) / time.Since(t0).Seconds(), (cpuTime() - cpu0) / time.Duration(max(n, 1)), nil
}

// memory is a settled snapshot of the heap and the goroutine stacks.
type memory struct {
	heap, stack uint64
	goroutines  int
}

// snapshot waits until the number of goroutines has stopped changing (the
// ends of earlier connections have finished closing), then collects garbage
// and reads the heap and stack sizes.
func snapshot() memory {
	last, stable := -1, 0
	for start := time.Now(); stable < 5 && time.Since(start) < 5*time.Second; {
		time.Sleep(10 * time.Millisecond)
		if g := runtime.NumGoroutine(); g == last {
			stable++
		} else {
			last, stable = g, 0
		}
	}
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return memory{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// idleCost is what one idle connection or stream costs, both ends counted.
type idleCost struct {
	connHeap, connStack     float64 // bytes per connection
	streamHeap, streamStack float64 // bytes per stream
	connGoroutines          float64
	streamGoroutines        float64
}

// preparer is implemented by servers that can set up per-connection
// resources (tendril's client Services) before a measurement starts.
type preparer interface{ Prepare(n int) error }

// idle establishes n connections, then one idle stream on each, and measures
// the heap and stack growth of each step.
func idle(ctx context.Context, srv server, n int) (idleCost, error) {
	if p, ok := srv.(preparer); ok {
		if err := p.Prepare(n); err != nil {
			return idleCost{}, err
		}
	}
	conns := make([]conn, 0, n)
	defer func() {
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() { c.Close() })
		}
		wg.Wait()
	}()
	// Earlier cases' connections must be gone on the server side first.
	if err := waitFor(ctx, func() bool { return srv.Conns() == 0 }); err != nil {
		return idleCost{}, fmt.Errorf("bench: waiting for earlier connections to close: %w", err)
	}
	m0 := snapshot()
	for range n {
		c, err := srv.Dial(ctx)
		if err != nil {
			return idleCost{}, err
		}
		conns = append(conns, c)
	}
	if err := waitFor(ctx, func() bool { return srv.Conns() >= n }); err != nil {
		return idleCost{}, fmt.Errorf("bench: waiting for the server's connections: %w", err)
	}
	m1 := snapshot()
	streams0 := idleStreams.Load()
	streams := make([]stream, 0, n)
	defer func() {
		for _, st := range streams {
			st.Close()
		}
	}()
	for _, c := range conns {
		st, err := c.OpenStream(ctx)
		if err != nil {
			return idleCost{}, err
		}
		streams = append(streams, st)
		if _, err := st.Write([]byte{opIdle}); err != nil {
			return idleCost{}, err
		}
	}
	if err := waitFor(ctx, func() bool { return idleStreams.Load() >= streams0+int64(n) }); err != nil {
		return idleCost{}, fmt.Errorf("bench: waiting for the server's streams: %w", err)
	}
	m2 := snapshot()
	f := float64(n)
	return idleCost{
		connHeap:         (float64(m1.heap) - float64(m0.heap)) / f,
		connStack:        (float64(m1.stack) - float64(m0.stack)) / f,
		streamHeap:       (float64(m2.heap) - float64(m1.heap)) / f,
		streamStack:      (float64(m2.stack) - float64(m1.stack)) / f,
		connGoroutines:   float64(m1.goroutines-m0.goroutines) / f,
		streamGoroutines: float64(m2.goroutines-m1.goroutines) / f,
	}, nil
}

func waitFor(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
