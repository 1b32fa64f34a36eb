// Package faultnet is a loopback TCP proxy for tests that injects faults into the traffic
// between two peers: a flipped bit, a truncated stream, a delay, writes split into 1-byte
// pieces, a duplicated or dropped record, or a reset connection.
//
// The proxy understands the one framing every tendril connection uses: records of a 4-byte
// big-endian length followed by that many bytes (secio handshake messages, then AEAD
// frames). Faults are placed by record: "the 4th record from the dialer that is at least 100
// bytes long, at byte 9". That lets a test aim at a phase (the handshake is records 0 to 2 in
// each direction, protocol negotiation and data come after) without caring how TCP
// segments the stream. Bytes that do not parse as records (a length above MaxRecord) are
// forwarded unchanged.
package faultnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/internal/loopback"
)

// MaxRecord is the largest record length the proxy parses; above it, the rest of the
// direction is forwarded as raw bytes.
const MaxRecord = 64 << 20

// Direction is one direction of a proxied connection.
type Direction int

// The two directions.
const (
	Up   Direction = iota // from the dialer (the proxy's client) to the target
	Down                  // from the target back to the dialer
)

// String returns "up" or "down".
func (d Direction) String() string {
	if d == Up {
		return "up"
	}
	return "down"
}

// Kind is what a Fault does to its record.
type Kind int

// The faults.
const (
	// FlipBit flips bit Bit of byte Offset of the record (offsets 0 to 3 are the length).
	FlipBit Kind = iota + 1
	// Truncate forwards the first Offset bytes of the record, then ends this direction with
	// an orderly FIN (not a reset) and discards whatever the sender still sends.
	Truncate
	// Delay waits Delay before forwarding the record (later records queue behind it).
	Delay
	// Split forwards the record and every later one in this direction one byte per write.
	Split
	// Duplicate forwards the record twice (a replay).
	Duplicate
	// Drop does not forward the record.
	Drop
	// Reset aborts both connections with a TCP reset instead of forwarding the record.
	Reset
)

var kindNames = map[Kind]string{
	FlipBit: "flip-bit", Truncate: "truncate", Delay: "delay", Split: "split",
	Duplicate: "duplicate", Drop: "drop", Reset: "reset",
}

// String returns the fault's name, e.g. "flip-bit".
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Fault is one fault, applied once per proxied connection, to the first record of direction
// Dir whose index is at least Record and whose body (after the 4-byte length) is at least
// MinLen bytes, after Skip such records have gone through untouched.
type Fault struct {
	Kind   Kind
	Dir    Direction
	Record int // index of the first candidate record in Dir, from 0
	MinLen int // candidate records have a body of at least this many bytes
	Skip   int // candidates forwarded untouched before the fault fires

	Offset int           // FlipBit: byte to flip; Truncate: bytes kept (both from the record's start)
	Bit    uint          // FlipBit: bit 0..7
	Delay  time.Duration // Delay: how long
}

// String describes the fault.
func (f Fault) String() string {
	return fmt.Sprintf("%s %s record>=%d len>=%d skip=%d off=%d", f.Kind, f.Dir, f.Record, f.MinLen, f.Skip, f.Offset)
}

// Proxy accepts connections on a loopback port and forwards each to a target address,
// applying its faults.
type Proxy struct {
	srv       *loopback.Server
	target    string
	done      chan struct{}
	closeOnce sync.Once

	mu     sync.Mutex
	faults []Fault

	records [2]atomic.Int64
	fired   atomic.Int64
}

// New starts a proxy on 127.0.0.1 (a free port) to target ("host:port"), applying faults to
// every connection it accepts.
func New(target string, faults ...Fault) (*Proxy, error) {
	p := &Proxy{
		target: target,
		done:   make(chan struct{}),
		faults: append([]Fault(nil), faults...),
	}
	srv, err := loopback.Listen()
	if err != nil {
		return nil, fmt.Errorf("faultnet: listen: %w", err)
	}
	p.srv = srv
	srv.Serve(p.serve)
	return p, nil
}

// Addr returns the proxy's "host:port".
func (p *Proxy) Addr() string { return p.srv.Addr().String() }

// Port returns the proxy's TCP port.
func (p *Proxy) Port() int { return p.srv.Addr().Port }

// SetFaults replaces the faults for connections accepted from now on.
func (p *Proxy) SetFaults(faults ...Fault) {
	p.mu.Lock()
	p.faults = append([]Fault(nil), faults...)
	p.mu.Unlock()
}

// Records returns how many records have been forwarded (or dropped) in direction d, all
// connections together.
func (p *Proxy) Records(d Direction) int64 { return p.records[d].Load() }

// Fired returns how many faults have fired, all connections together.
func (p *Proxy) Fired() int64 { return p.fired.Load() }

// Close stops the proxy, closes every connection it holds and waits for its goroutines.
// Calling it again returns nil.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.done)
		err = p.srv.Close()
	})
	return err
}

// pair is one proxied connection: the client side and the target side.
type pair struct {
	client, target *net.TCPConn
	once           sync.Once
}

// abort closes both connections, with a reset if rst.
func (pr *pair) abort(rst bool) {
	pr.once.Do(func() {
		if rst {
			_ = pr.client.SetLinger(0)
			_ = pr.target.SetLinger(0)
		}
		pr.client.Close()
		pr.target.Close()
	})
}

func (p *Proxy) serve(client *net.TCPConn) {
	p.mu.Lock()
	faults := append([]Fault(nil), p.faults...)
	p.mu.Unlock()
	d := net.Dialer{Timeout: 10 * time.Second}
	tc, err := d.Dial("tcp", p.target)
	if err != nil {
		_ = client.SetLinger(0)
		client.Close()
		return
	}
	pr := &pair{client: client, target: tc.(*net.TCPConn)}
	if !p.srv.Track(pr.client) || !p.srv.Track(pr.target) {
		pr.abort(true)
		p.srv.Untrack(pr.client)
		return
	}
	var per [2][]Fault
	for _, f := range faults {
		per[f.Dir] = append(per[f.Dir], f)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(pr, pr.client, pr.target, Up, per[Up]) }()
	go func() { defer wg.Done(); p.pump(pr, pr.target, pr.client, Down, per[Down]) }()
	wg.Wait()
	pr.abort(false)
	p.srv.Untrack(pr.client)
	p.srv.Untrack(pr.target)
}

// pump forwards src to dst record by record, applying faults.
func (p *Proxy) pump(pr *pair, src, dst *net.TCPConn, dir Direction, faults []Fault) {
	r := bufio.NewReaderSize(src, 64<<10)
	fired := make([]bool, len(faults))
	skipped := make([]int, len(faults))
	split := false
	write := func(b []byte) error {
		if !split {
			_, err := dst.Write(b)
			return err
		}
		for i := range b {
			if _, err := dst.Write(b[i : i+1]); err != nil {
				return err
			}
		}
		return nil
	}
	// finish ends this direction: an orderly end of src is passed on as a half-close; any
	// other failure takes the whole connection down.
	finish := func(err error) {
		if errors.Is(err, io.EOF) {
			_ = dst.CloseWrite()
			return
		}
		pr.abort(false)
	}
	var hdr [4]byte
	for idx := 0; ; idx++ {
		if m, err := io.ReadFull(r, hdr[:]); err != nil {
			_ = write(hdr[:m]) // a header cut by the sender is passed on as it came
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			finish(err)
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > MaxRecord {
			if write(hdr[:]) != nil {
				pr.abort(false)
				return
			}
			_, err := io.Copy(dst, r)
			if err == nil {
				err = io.EOF
			}
			finish(err)
			return
		}
		rec := make([]byte, 4+int(n))
		copy(rec, hdr[:])
		if m, err := io.ReadFull(r, rec[4:]); err != nil {
			_ = write(rec[:4+m])
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			finish(err)
			return
		}
		var f *Fault
		for i := range faults {
			c := &faults[i]
			if fired[i] || idx < c.Record || int(n) < c.MinLen {
				continue
			}
			if skipped[i] < c.Skip {
				skipped[i]++
				continue
			}
			fired[i] = true
			f = c
			break
		}
		p.records[dir].Add(1)
		times := 1
		if f != nil {
			p.fired.Add(1)
			switch f.Kind {
			case FlipBit:
				rec[min(f.Offset, len(rec)-1)] ^= 1 << (f.Bit & 7)
			case Truncate:
				// End the stream after the cut with a FIN, and keep reading (and
				// discarding) what the sender still sends: closing a socket with unread
				// data would send a reset, and the receiver might see that instead of
				// the cut.
				_ = write(rec[:min(f.Offset, len(rec))])
				_ = dst.CloseWrite()
				_, _ = io.Copy(io.Discard, r)
				pr.abort(false)
				return
			case Delay:
				select {
				case <-time.After(f.Delay):
				case <-p.done:
					pr.abort(true)
					return
				}
			case Split:
				split = true
			case Duplicate:
				times = 2
			case Drop:
				times = 0
			case Reset:
				pr.abort(true)
				return
			}
		}
		for range times {
			if err := write(rec); err != nil {
				pr.abort(false)
				return
			}
		}
	}
}
