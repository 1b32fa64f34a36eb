package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
)

// Relay serves the hop protocol on a Service: it holds reservations for peers that want
// to be reachable through this node, and splices circuits from dialers to them, within
// the bounds of its RelayConfig. Its methods are safe for concurrent use.
type Relay struct {
	svc *tendril.Service
	cfg RelayConfig
	log *slog.Logger

	mu       sync.Mutex // guards led, circuits, closed
	led      *ledger
	circuits map[*circuit]struct{}
	closed   bool

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // circuits and their second pumps
	once   sync.Once
	stats  relayCounters
}

type relayCounters struct {
	requests, rateLimited, malformed                atomic.Uint64
	reserved, reserveRefused                        atomic.Uint64
	circuitsOpened, circuitsRefused, connectFailed  atomic.Uint64
	closedBytes, closedDuration, closedReset, ended atomic.Uint64
	bytes                                           atomic.Uint64
}

// RelayStats are a Relay's counters since NewRelay, and its state now.
type RelayStats struct {
	// Requests counts hop requests read; RateLimited those refused by a rate; Malformed
	// those that did not parse.
	Requests, RateLimited, Malformed uint64
	// Reserved counts reservations granted or refreshed; ReserveRefused those refused
	// for room (StatusReservationRefused).
	Reserved, ReserveRefused uint64
	// CircuitsOpened counts circuits spliced; CircuitsRefused connect requests refused
	// (no reservation, no room, rate); ConnectFailed those the target did not take.
	CircuitsOpened, CircuitsRefused, ConnectFailed uint64
	// ClosedBytes, ClosedDuration and ClosedReset count circuits the relay stopped at
	// their byte limit, at their duration limit, and because an end failed; Ended those
	// both ends closed.
	ClosedBytes, ClosedDuration, ClosedReset, Ended uint64
	// Bytes counts the bytes carried by ended circuits, both directions.
	Bytes uint64

	// Reservations and Circuits are held now (Reservations may include stale ones not
	// yet pruned).
	Reservations, Circuits int
}

// NewRelay makes svc a relay: it registers the hop protocol (and opens the stop protocol
// to targets). Zero fields of cfg take their defaults. Close stops it.
func NewRelay(svc *tendril.Service, cfg RelayConfig) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if svc == nil {
		return nil, fmt.Errorf("%w: nil Service", ErrInvalidConfig)
	}
	c := cfg.withDefaults()
	r := &Relay{svc: svc, cfg: c, log: c.Logger, circuits: make(map[*circuit]struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.led = newLedger(time.Now(), &r.cfg)
	if err := ensureOpener(svc, StopProtocol); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	err := addServer(svc, tendril.Protocol{
		Name: HopProtocol, Versions: []string{Version},
		StreamHandler: tendril.StreamHandlerFunc(r.serveHop),
	})
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("relay: %w", err)
	}
	return r, nil
}

// Close stops serving: it unregisters the hop protocol, ends every circuit (both ends see
// ErrRelayClosing) and waits for them. Reservations are forgotten. It is idempotent.
func (r *Relay) Close() error {
	r.once.Do(func() {
		r.svc.RemoveProtocol(HopProtocol) // the Service may have closed first
		r.cancel()
		r.mu.Lock()
		r.closed = true
		for c := range r.circuits {
			c.stop(CloseRelay)
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return nil
}

// Stats returns the Relay's counters.
func (r *Relay) Stats() RelayStats {
	s := &r.stats
	r.mu.Lock()
	res, circ := len(r.led.res), r.led.circuits
	r.mu.Unlock()
	return RelayStats{
		Requests: s.requests.Load(), RateLimited: s.rateLimited.Load(), Malformed: s.malformed.Load(),
		Reserved: s.reserved.Load(), ReserveRefused: s.reserveRefused.Load(),
		CircuitsOpened: s.circuitsOpened.Load(), CircuitsRefused: s.circuitsRefused.Load(), ConnectFailed: s.connectFailed.Load(),
		ClosedBytes: s.closedBytes.Load(), ClosedDuration: s.closedDuration.Load(), ClosedReset: s.closedReset.Load(), Ended: s.ended.Load(),
		Bytes:        s.bytes.Load(),
		Reservations: res, Circuits: circ,
	}
}

// live reports whether session is peer's session with this node now.
func (r *Relay) live(peer secio.PeerID, session uint64) bool {
	s := r.svc.Session(peer)
	return s != nil && s.ID() == session
}

// serveHop reads one hop request and serves it. A connect request keeps the stream as
// the dialer's end of the circuit.
func (r *Relay) serveHop(c *tendril.Context, _ string, st net.Conn) {
	peer := c.Peer()
	if peer.IsZero() {
		return // legacy TEA: no identity to reserve for or to name to a target
	}
	st.SetDeadline(time.Now().Add(r.cfg.RequestTimeout))
	br := bufio.NewReaderSize(st, readBuffer)
	body, err := readMsg(br)
	if err != nil {
		if errors.Is(err, ErrMalformed) {
			r.stats.malformed.Add(1)
			writeMsg(st, []byte{byte(StatusMalformed)})
		}
		return
	}
	r.stats.requests.Add(1)
	req, err := parseHopRequest(body)
	if err != nil {
		r.stats.malformed.Add(1)
		r.log.Debug("relay: malformed hop request", "peer", peer, "err", err)
		writeMsg(st, []byte{byte(StatusMalformed)})
		return
	}
	r.mu.Lock()
	ok := !r.closed && r.led.request(time.Now(), peer)
	r.mu.Unlock()
	if !ok {
		r.stats.rateLimited.Add(1)
		writeMsg(st, []byte{byte(StatusRateLimited)})
		return
	}
	switch req.typ {
	case msgReserve:
		r.reserve(c.Session(), st)
	case msgConnect:
		r.connect(c, st, br, req.target)
	}
}

// reserve grants or refreshes the reservation of sess's peer.
func (r *Relay) reserve(sess *tendril.Session, st net.Conn) {
	peer := sess.Peer()
	r.mu.Lock()
	_, err := r.led.reserve(time.Now(), peer, sess.ID(), ipOf(sess.RemoteAddr().Transport), r.live)
	r.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrRateLimited) {
			r.stats.rateLimited.Add(1)
		} else {
			r.stats.reserveRefused.Add(1)
		}
		r.log.Debug("relay: reservation refused", "peer", peer, "err", err)
		writeMsg(st, appendReserveAnswer(nil, statusOf(err), grant{}))
		return
	}
	r.stats.reserved.Add(1)
	writeMsg(st, appendReserveAnswer(nil, StatusOK, grant{
		ttl:    r.cfg.ReservationTTL,
		limits: Limits{Bytes: r.cfg.MaxCircuitBytes, Duration: r.cfg.MaxCircuitDuration},
	}))
}

// connect asks target, over its session, to take a circuit from the dialer of c, and
// splices the two streams if it does.
func (r *Relay) connect(c *tendril.Context, st net.Conn, br *bufio.Reader, target secio.PeerID) {
	dialer := c.Peer()
	refuse := func(err error) {
		r.log.Debug("relay: circuit refused", "dialer", dialer, "target", target, "err", err)
		writeMsg(st, appendConnectAnswer(nil, statusOf(err), Limits{}))
	}
	if target == dialer {
		r.stats.malformed.Add(1)
		refuse(fmt.Errorf("%w: a circuit to oneself", ErrMalformed))
		return
	}
	now := time.Now()
	circ := &circuit{limits: Limits{Bytes: r.cfg.MaxCircuitBytes, Duration: r.cfg.MaxCircuitDuration}}
	r.mu.Lock()
	err := ErrRelayClosing
	if !r.closed {
		err = ErrNoReservation
		if r.led.reserved(now, target, r.live) {
			err = r.led.openCircuit(now, dialer, target)
		}
	}
	if err == nil {
		r.circuits[circ] = struct{}{}
		r.wg.Add(1)
	}
	r.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrRateLimited) {
			r.stats.rateLimited.Add(1)
		}
		r.stats.circuitsRefused.Add(1)
		if errors.Is(err, ErrRelayClosing) {
			err = ErrConnectFailed
		}
		refuse(err)
		return
	}
	defer func() {
		r.mu.Lock()
		delete(r.circuits, circ)
		r.led.closeCircuit(dialer, target)
		r.mu.Unlock()
		r.wg.Done()
	}()

	ts, tr, err := r.openStop(c.Session(), target, circ.limits)
	if err != nil {
		r.stats.connectFailed.Add(1)
		refuse(err)
		return
	}
	st.SetWriteDeadline(time.Now().Add(r.cfg.RequestTimeout))
	if err := writeMsg(st, appendConnectAnswer(nil, StatusOK, circ.limits)); err != nil {
		ts.Reset()
		return
	}
	st.SetDeadline(time.Time{})
	ts.SetDeadline(time.Time{})
	// Under the lock that Close stops circuits under: a Close that came while the target
	// was being asked found no ends to interrupt.
	r.mu.Lock()
	circ.ends = [2]end{{st: st, r: br, peer: dialer}, {st: ts, r: tr, peer: target}}
	if r.closed {
		circ.reason.CompareAndSwap(0, uint32(CloseRelay))
	}
	if circ.reason.Load() != 0 {
		circ.interrupt()
	}
	r.mu.Unlock()
	r.stats.circuitsOpened.Add(1)
	code := circ.run(func(f func()) {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			f()
		}()
	})
	r.stats.bytes.Add(uint64(circ.sent[0].Load() + circ.sent[1].Load()))
	switch code {
	case 0:
		r.stats.ended.Add(1)
	case CloseBytes:
		r.stats.closedBytes.Add(1)
	case CloseDuration:
		r.stats.closedDuration.Add(1)
	case CloseReset, CloseMalformed:
		r.stats.closedReset.Add(1)
	}
	r.log.Debug("relay: circuit ended", "dialer", dialer, "target", target, "code", code,
		"bytes", circ.sent[0].Load()+circ.sent[1].Load())
}

// openStop opens the stop protocol on target's session, names the dialer of dsess, and
// waits for the target's answer, all within ConnectTimeout.
func (r *Relay) openStop(dsess *tendril.Session, target secio.PeerID, limits Limits) (tendril.Stream, *bufio.Reader, error) {
	tsess := r.svc.Session(target)
	if tsess == nil {
		return nil, nil, ErrNoReservation
	}
	if err := ensureOpener(r.svc, StopProtocol); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConnectFailed, err)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.ConnectTimeout)
	defer cancel()
	ts, _, err := tsess.OpenStream(ctx, StopProtocol)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConnectFailed, err)
	}
	ts.SetDeadline(time.Now().Add(r.cfg.ConnectTimeout))
	// Close wakes the exchange rather than wait for ConnectTimeout.
	defer context.AfterFunc(ctx, func() { ts.SetDeadline(time.Now()) })()
	req := stopRequest{dialer: dsess.Peer(), observed: dsess.RemoteAddr().Transport, limits: limits}
	tr := bufio.NewReaderSize(ts, readBuffer)
	if err := writeMsg(ts, appendStopRequest(nil, req)); err != nil {
		ts.Reset()
		return nil, nil, fmt.Errorf("%w: %w", ErrConnectFailed, err)
	}
	body, err := readMsg(tr)
	if err == nil {
		err = parseStatus(body)
	}
	if err != nil {
		ts.Reset()
		if errors.Is(err, ErrRefused) || errors.Is(err, ErrResourceLimit) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%w: %w", ErrConnectFailed, err)
	}
	return ts, tr, nil
}

// ipOf returns the IP address a transport multiaddr starts with, or the zero Addr.
func ipOf(m ma.Multiaddr) netip.Addr {
	if len(m) == 0 {
		return netip.Addr{}
	}
	switch m[0].Code() {
	case ma.P_IP4, ma.P_IP6:
		ip, err := netip.ParseAddr(m[0].Value())
		if err == nil {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}
