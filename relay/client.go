package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
)

// Client is the side of a node that is reachable through relays: it reserves slots on
// them (Reserve), keeps the reservations fresh, and serves the stop protocol, running a
// Service session (ServeConn, Inbound) on each circuit a relay it holds a reservation
// with brings. Such a session registers like any other; its RemoteAddr says
// /p2p-circuit (IsRelayed), and a direct session with the same peer later replaces it by
// the Service's duplicate-session rule. Its methods are safe for concurrent use.
type Client struct {
	svc *tendril.Service
	cfg ClientConfig
	log *slog.Logger

	mu       sync.Mutex // guards res, circuits, closed
	res      map[secio.PeerID]*Reservation
	circuits int
	closed   bool

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // refreshers

	stats clientCounters
	once  sync.Once
}

type clientCounters struct {
	accepted, refused, mismatched, refreshFailed atomic.Uint64
}

// ClientStats are a Client's counters since NewClient.
type ClientStats struct {
	// Accepted counts circuits whose handshake was started; Refused those refused (no
	// reservation with their relay, the Accept policy, MaxCircuits, a malformed request);
	// Mismatched the sessions closed because the peer was not the dialer the relay named.
	Accepted, Refused, Mismatched uint64
	// RefreshFailed counts failed refreshes of reservations.
	RefreshFailed uint64
	// Circuits is the number of relayed sessions served now.
	Circuits int
}

// NewClient registers the stop protocol on svc (and opens the hop protocol to relays).
// Zero fields of cfg take their defaults. Close stops it.
func NewClient(svc *tendril.Service, cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if svc == nil {
		return nil, fmt.Errorf("%w: nil Service", ErrInvalidConfig)
	}
	c := cfg.withDefaults()
	cl := &Client{svc: svc, cfg: c, log: c.Logger, res: make(map[secio.PeerID]*Reservation)}
	cl.ctx, cl.cancel = context.WithCancel(context.Background())
	if err := ensureOpener(svc, HopProtocol); err != nil {
		cl.cancel()
		return nil, fmt.Errorf("relay: %w", err)
	}
	err := addServer(svc, tendril.Protocol{
		Name: StopProtocol, Versions: []string{Version},
		StreamHandler: tendril.StreamHandlerFunc(cl.serveStop),
	})
	if err != nil {
		cl.cancel()
		return nil, fmt.Errorf("relay: %w", err)
	}
	return cl, nil
}

// Close stops refreshing reservations, unregisters the stop protocol and ends the
// relayed sessions it serves. It is idempotent.
func (cl *Client) Close() error {
	cl.once.Do(func() {
		cl.mu.Lock()
		cl.closed = true
		cl.mu.Unlock()
		cl.cancel() // ends the refreshers and the relayed sessions (serveStop)
		cl.svc.RemoveProtocol(StopProtocol)
		cl.wg.Wait()
	})
	return nil
}

// Stats returns the Client's counters.
func (cl *Client) Stats() ClientStats {
	cl.mu.Lock()
	n := cl.circuits
	cl.mu.Unlock()
	s := &cl.stats
	return ClientStats{
		Accepted: s.accepted.Load(), Refused: s.refused.Load(), Mismatched: s.mismatched.Load(),
		RefreshFailed: s.refreshFailed.Load(), Circuits: n,
	}
}

// Reservation is a slot held on a relay, refreshed by its Client before it expires and
// made again on a new session if the one it was made on closes, until Close.
type Reservation struct {
	cl    *Client
	relay tendril.Addr

	mu      sync.Mutex // guards expires, limits, err
	expires time.Time
	limits  Limits
	err     error // the last refresh's failure, nil once one succeeds

	stop context.CancelFunc
}

// Relay returns the relay's address.
func (r *Reservation) Relay() tendril.Addr { return r.relay }

// Addr returns the circuit address at which this node is reachable through the relay.
func (r *Reservation) Addr() Circuit { return Circuit{Relay: r.relay, Target: r.cl.svc.ID()} }

// Expires returns when the reservation expires unless refreshed.
func (r *Reservation) Expires() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expires
}

// Limits returns what the relay allows each circuit.
func (r *Reservation) Limits() Limits {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limits
}

// Err returns why the last refresh failed, or nil if it succeeded.
func (r *Reservation) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Close stops refreshing the reservation and stops accepting circuits from its relay
// (unless ClientConfig.AnyRelay). The relay keeps it until it expires or the session
// closes.
func (r *Reservation) Close() error {
	r.stop()
	r.cl.mu.Lock()
	if r.cl.res[r.relay.Peer] == r {
		delete(r.cl.res, r.relay.Peer)
	}
	r.cl.mu.Unlock()
	return nil
}

// Reserve reserves a slot on the relay at relayAddr (its /p2p/ID is required), dialling
// it if there is no session with it, and keeps the reservation fresh until the
// Reservation or the Client is closed. A second Reserve on the same relay replaces the
// first. Refusals wrap ErrReservationRefused or ErrRateLimited; ctx bounds this first
// reservation only.
func (cl *Client) Reserve(ctx context.Context, relayAddr tendril.Addr) (*Reservation, error) {
	if relayAddr.Peer.IsZero() {
		return nil, fmt.Errorf("%w: relay address %s has no /p2p/ID", ErrInvalidCircuit, relayAddr)
	}
	g, sess, err := cl.reserveOnce(ctx, relayAddr)
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(cl.ctx)
	r := &Reservation{cl: cl, relay: relayAddr, expires: time.Now().Add(g.ttl), limits: g.limits, stop: stop}
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		stop()
		return nil, ErrClosed
	}
	if old := cl.res[relayAddr.Peer]; old != nil {
		old.stop()
	}
	cl.res[relayAddr.Peer] = r
	cl.wg.Add(1)
	cl.mu.Unlock()
	go func() {
		defer cl.wg.Done()
		cl.refresh(rctx, r, sess, g.ttl)
	}()
	return r, nil
}

// reserveOnce asks the relay for a reservation over a session with it.
func (cl *Client) reserveOnce(ctx context.Context, relayAddr tendril.Addr) (grant, *tendril.Session, error) {
	if err := ensureOpener(cl.svc, HopProtocol); err != nil {
		return grant{}, nil, fmt.Errorf("relay: %w", err)
	}
	sess, err := cl.svc.Dial(ctx, relayAddr)
	if err != nil {
		return grant{}, nil, fmt.Errorf("relay: reserve on %s: %w", relayAddr, err)
	}
	st, _, err := sess.OpenStream(ctx, HopProtocol)
	if err != nil {
		return grant{}, nil, fmt.Errorf("relay: reserve on %s: %w", relayAddr, err)
	}
	defer st.Close()
	stopWake := deadlineFrom(ctx, st, cl.cfg.RequestTimeout)
	defer stopWake()
	var g grant
	err = writeMsg(st, appendHopRequest(nil, hopRequest{typ: msgReserve}))
	if err == nil {
		var body []byte
		if body, err = readMsg(bufio.NewReaderSize(st, 64)); err == nil {
			g, err = parseReserveAnswer(body)
		}
	}
	if err != nil {
		return grant{}, nil, fmt.Errorf("relay: reserve on %s: %w", relayAddr, ctxErr(ctx, err))
	}
	return g, sess, nil
}

// refresh keeps r fresh: again when three quarters of its lifetime have passed, at once
// on a new session if its session closes, and after failures with doubling waits.
func (cl *Client) refresh(ctx context.Context, r *Reservation, sess *tendril.Session, ttl time.Duration) {
	retry := time.Duration(0)
	wait := ttl * 3 / 4
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		var closed <-chan struct{}
		if sess != nil {
			closed = sess.Done()
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-closed:
			sess = nil
			timer.Stop()
		}
		rctx, cancel := context.WithTimeout(ctx, cl.cfg.RequestTimeout)
		g, s, err := cl.reserveOnce(rctx, r.relay)
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.err = err
		if err == nil {
			r.expires, r.limits = time.Now().Add(g.ttl), g.limits
		}
		r.mu.Unlock()
		if err != nil {
			cl.stats.refreshFailed.Add(1)
			retry = nextRetry(retry, cl.cfg.RetryInterval, cl.cfg.MaxRetryInterval)
			cl.log.Debug("relay: refresh failed", "relay", r.relay, "retry", retry, "err", err)
			wait = retry
		} else {
			sess, retry, wait = s, 0, g.ttl*3/4
		}
		timer.Reset(wait)
	}
}

// nextRetry returns the wait after a failure that followed a wait of prev: first, then
// doubling up to max.
func nextRetry(prev, first, max time.Duration) time.Duration {
	if prev == 0 {
		return first
	}
	return min(2*prev, max)
}

// admitCircuit decides on a stop request from relay: a reservation with it (unless
// AnyRelay), the Accept policy, room under MaxCircuits. On nil, the caller holds a
// circuit slot and gives it back with releaseCircuit.
func (cl *Client) admitCircuit(relay, dialer secio.PeerID) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	switch {
	case cl.closed:
		return ErrRefused
	case !cl.cfg.AnyRelay && cl.res[relay] == nil:
		return fmt.Errorf("%w: no reservation with relay %s", ErrRefused, relay)
	case cl.circuits >= cl.cfg.MaxCircuits:
		return ErrResourceLimit
	}
	if cl.cfg.Accept != nil && !cl.cfg.Accept(dialer, relay) {
		return fmt.Errorf("%w: by policy", ErrRefused)
	}
	cl.circuits++
	return nil
}

func (cl *Client) releaseCircuit() {
	cl.mu.Lock()
	cl.circuits--
	cl.mu.Unlock()
}

// serveStop serves a relay's stop request: if the circuit is admitted, it runs the
// listener's side of a Service session on it and holds the stream until that session,
// the relay's session or the Client ends.
func (cl *Client) serveStop(c *tendril.Context, _ string, st net.Conn) {
	relay := c.Peer()
	if relay.IsZero() {
		return
	}
	st.SetDeadline(time.Now().Add(cl.cfg.RequestTimeout))
	br := bufio.NewReaderSize(st, readBuffer)
	body, err := readMsg(br)
	var req stopRequest
	if err == nil {
		req, err = parseStopRequest(body)
	}
	if err != nil {
		if errors.Is(err, ErrMalformed) {
			cl.stats.refused.Add(1)
			writeMsg(st, []byte{byte(StatusMalformed)})
		}
		return
	}
	if err := cl.admitCircuit(relay, req.dialer); err != nil {
		cl.stats.refused.Add(1)
		cl.log.Debug("relay: circuit refused", "relay", relay, "dialer", req.dialer, "err", err)
		writeMsg(st, []byte{byte(statusOf(err))})
		return
	}
	defer cl.releaseCircuit()
	if err := writeMsg(st, []byte{byte(StatusOK)}); err != nil {
		return
	}
	st.SetDeadline(time.Time{})
	rs := c.Session()
	conn := newConn(st, br, relay, req.dialer, req.limits,
		circuitMultiaddr(rs.LocalAddr().Transport), circuitMultiaddr(rs.RemoteAddr().Transport))
	cl.stats.accepted.Add(1)
	sess, err := cl.svc.ServeConn(cl.ctx, conn, tendril.Inbound)
	if err != nil {
		cl.log.Debug("relay: relayed handshake failed", "relay", relay, "dialer", req.dialer, "err", err)
		return
	}
	if sess.Peer() != req.dialer {
		// The relay named someone else: the Accept policy judged the wrong peer.
		cl.stats.mismatched.Add(1)
		conn.Close()
		<-sess.Done()
		return
	}
	select {
	case <-sess.Done():
	case <-c.Done():
	case <-cl.ctx.Done():
	}
	conn.Close() // ends the session if the relay's session or the Client went first
}
