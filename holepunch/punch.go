package holepunch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/internal/ratelimit"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/reach"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport/tcp"
)

// ProtocolName and ProtocolVersion are what a Puncher registers on the Service (raw mode).
const (
	ProtocolName    = "/tendril/holepunch"
	ProtocolVersion = "1"
)

// reconcileInterval is how often the Puncher looks for relayed sessions it missed (its
// subscription may drop events).
const reconcileInterval = 5 * time.Second

// Puncher runs hole punches on a Service: as initiator on each relayed session this node
// accepted, as responder when the other end asks. Create it with New; Close it before or
// with its Service. All methods are safe for concurrent use.
type Puncher struct {
	svc  *tendril.Service
	id   *identify.Identify
	cfg  Config
	log  *slog.Logger
	tcp  *tcp.Transport
	sub  *tendril.Subscription
	now  func() time.Time
	slot chan struct{} // MaxConcurrent tokens: punches in flight, both roles

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the event loop and the punches in flight
	once   sync.Once

	mu      sync.Mutex
	limit   *limiter                     // guarded by mu: the attempts peers ask for
	global  ratelimit.Bucket             // guarded by mu: all attempts, both roles (AttemptRate)
	reports map[secio.PeerID]*PeerReport // guarded by mu: peers with a session
	punched map[uint64]struct{}          // guarded by mu: relayed sessions already punched or being punched
	closed  bool                         // guarded by mu

	stats struct {
		attempts, punched, failed, served, refused, dials atomic.Uint64
	}
}

// New registers the hole-punching protocol on svc and starts punching relayed sessions.
// id supplies this node's observed addresses (the default Config.Addrs) and what its
// peers observe of its NAT.
func New(svc *tendril.Service, id *identify.Identify, cfg Config) (*Puncher, error) {
	if svc == nil || id == nil {
		return nil, fmt.Errorf("%w: a Service and an Identify are required", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &Puncher{
		svc:     svc,
		id:      id,
		cfg:     cfg,
		log:     cfg.Logger,
		tcp:     tcp.New(&tcp.Config{KeepAlive: -1}),
		now:     time.Now,
		slot:    make(chan struct{}, cfg.MaxConcurrent),
		limit:   newLimiter(cfg.MaxAttempts, cfg.AttemptWindow),
		reports: make(map[secio.PeerID]*PeerReport),
		punched: make(map[uint64]struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	err := svc.AddProtocol(tendril.Protocol{
		Name:          ProtocolName,
		Versions:      []string{ProtocolVersion},
		StreamHandler: tendril.StreamHandlerFunc(p.serve),
	})
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("holepunch: %w", err)
	}
	p.sub = svc.Subscribe(0)
	p.wg.Add(1)
	go p.run()
	return p, nil
}

// Close stops punching, waits for the punches in flight to end, and removes the protocol.
func (p *Puncher) Close() error {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.cancel()
		p.sub.Close()
		_ = p.svc.RemoveProtocol(ProtocolName)
	})
	p.wg.Wait()
	return nil
}

// run starts a punch for each relayed session this node accepts, and keeps the reports
// of peers whose sessions come and go.
func (p *Puncher) run() {
	defer p.wg.Done()
	tick := time.NewTicker(reconcileInterval)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-p.sub.C():
			if !ok {
				return
			}
			switch ev.Type {
			case tendril.EventSessionOpened:
				if s := p.svc.Session(ev.Peer); s != nil && s.ID() == ev.SessionID {
					p.consider(s)
				}
			case tendril.EventSessionClosed:
				p.forget(ev.Peer, ev.SessionID)
			}
		case <-tick.C:
			sessions := p.svc.Sessions()
			for _, s := range sessions {
				p.consider(s)
			}
			p.sweep(sessions)
		case <-p.ctx.Done():
			return
		}
	}
}

// consider starts a punch on s if it is a relayed session this node accepted, not punched
// yet.
func (p *Puncher) consider(s *tendril.Session) {
	if !s.Relayed() || s.Direction() != tendril.Inbound || s.Peer().IsZero() {
		return
	}
	p.mu.Lock()
	_, seen := p.punched[s.ID()]
	if seen || p.closed {
		p.mu.Unlock()
		return
	}
	p.punched[s.ID()] = struct{}{}
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.initiate(s)
		p.mu.Lock()
		delete(p.punched, s.ID())
		if s.Err() == nil && p.svc.Session(s.Peer()) == s {
			p.punched[s.ID()] = struct{}{} // still relayed: punched, not to be tried again
		}
		p.mu.Unlock()
	}()
}

// forget drops a closed session from those punched, and the report of a peer that has
// no session left.
func (p *Puncher) forget(peer secio.PeerID, session uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.punched, session)
	if !peer.IsZero() && p.svc.Session(peer) == nil {
		delete(p.reports, peer)
	}
}

// sweep forgets sessions and peers that are gone, should their close events have been
// dropped (a full subscription): the tables hold only what the Service holds.
func (p *Puncher) sweep(sessions []*tendril.Session) {
	ids := make(map[uint64]struct{}, len(sessions))
	var newest uint64 // session IDs only grow: a larger one came after the snapshot
	for _, s := range sessions {
		ids[s.ID()] = struct{}{}
		newest = max(newest, s.ID())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.punched {
		if _, ok := ids[id]; !ok && id < newest {
			delete(p.punched, id)
		}
	}
	for peer := range p.reports {
		if p.svc.Session(peer) == nil {
			delete(p.reports, peer)
		}
	}
}

// initiate punches s, a relayed session this node accepted, up to MaxAttempts times.
func (p *Puncher) initiate(s *tendril.Session) {
	peer := s.Peer()
	select {
	case p.slot <- struct{}{}:
		defer func() { <-p.slot }()
	case <-p.ctx.Done():
		return
	case <-s.Done():
		return
	}
	p.update(peer, func(r *PeerReport) { *r = PeerReport{Peer: peer, Role: RoleInitiator, At: p.now()} })
	for attempt := 1; attempt <= p.cfg.MaxAttempts; attempt++ {
		if p.direct(peer) {
			break
		}
		if !p.waitToken(s) {
			return
		}
		p.stats.attempts.Add(1)
		rtt, err := p.attemptAsInitiator(s)
		if err != nil && p.direct(peer) {
			err = nil // the direct session came up while the stream failed (see record)
		}
		// Each update says whose the report is: a report dropped meanwhile (the peer had no
		// session for a moment, as when its relayed session is replaced) is made anew.
		p.update(peer, func(r *PeerReport) {
			r.Role, r.Attempts, r.RelayedRTT, r.Err, r.At = RoleInitiator, attempt, rtt, err, p.now()
		})
		if err == nil {
			took := p.now().Sub(s.OpenedAt())
			p.stats.punched.Add(1)
			p.update(peer, func(r *PeerReport) { r.Punched, r.Took = true, took })
			p.log.Debug("hole punched", "peer", peer, "attempt", attempt, "took", took, "relayed_rtt", rtt)
			return
		}
		p.log.Debug("hole punch failed", "peer", peer, "attempt", attempt, "err", err)
		// No address yet (identify has not told an end how it is seen) may change by the
		// next attempt; a peer without the protocol, or one that speaks it wrong, will not.
		if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrMalformed) || errors.Is(err, ErrClosed) || s.Err() != nil {
			break
		}
		select { // the next attempt after a pause that grows
		case <-time.After(time.Duration(attempt) * time.Second):
		case <-p.ctx.Done():
			return
		case <-s.Done():
			return
		}
	}
	if !p.direct(peer) {
		p.stats.failed.Add(1)
	}
}

func (p *Puncher) rate() ratelimit.Rate {
	return ratelimit.PerSecond(p.cfg.AttemptRate, p.cfg.AttemptBurst)
}

// waitToken waits for a token of the global attempt rate; false if the Puncher or s
// ended first.
func (p *Puncher) waitToken(s *tendril.Session) bool {
	for {
		p.mu.Lock()
		now := p.now()
		ok := p.global.Allow(now, p.rate())
		next := p.global.Next(p.rate())
		p.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-time.After(next.Sub(now)):
		case <-p.ctx.Done():
			return false
		case <-s.Done():
			return false
		}
	}
}

// attemptAsInitiator runs one attempt on a new stream of s; it returns the relayed round
// trip it measured.
func (p *Puncher) attemptAsInitiator(s *tendril.Session) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.StreamTimeout+p.cfg.AttemptTimeout)
	defer cancel()
	own := p.ownConnect()
	if len(own.addrs) == 0 {
		return 0, fmt.Errorf("%w: this node knows no address of its own (no listener, or no peer has said how it sees this node)", ErrNoAddrs)
	}
	st, _, err := s.OpenStream(ctx, ProtocolName)
	if err != nil {
		return 0, p.streamErr(err)
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	st.SetDeadline(p.now().Add(p.cfg.StreamTimeout))
	br := bufio.NewReaderSize(st, 256)
	start := time.Now()
	if _, err := st.Write(appendConnect(nil, own, p.cfg.MaxAddrs)); err != nil {
		return 0, p.streamErr(err)
	}
	body, err := readMsg(br)
	if err != nil {
		return 0, p.streamErr(err)
	}
	rtt := time.Since(start)
	theirs, err := parseConnect(body, p.cfg.MaxAddrs)
	if err != nil {
		return rtt, err
	}
	addrs := p.dialable(theirs.addrs)
	if len(addrs) == 0 {
		return rtt, fmt.Errorf("%w: the peer gave none that may be dialled (%d given)", ErrNoAddrs, len(theirs.addrs))
	}
	// This end's connection attempts are under way (their SYNs sent) before SYNC goes,
	// and the other end dials when SYNC reaches it: its attempts meet a connecting socket
	// here, never the listener, whatever the scheduler does to this goroutine.
	attempts := p.startAll(addrs)
	if _, err := st.Write(appendMsg(nil, []byte{msgSync})); err != nil {
		closeAll(attempts)
		return rtt, p.streamErr(err)
	}
	err = p.connect(s.Peer(), attempts, tendril.Outbound)
	return rtt, explain(err, own.rewritesPorts, theirs.rewritesPorts)
}

// serve is the responder: the other end of a relayed session asks for an attempt.
func (p *Puncher) serve(c *tendril.Context, _ string, st net.Conn) {
	peer := c.Peer()
	if !c.Session().Relayed() || peer.IsZero() {
		p.stats.refused.Add(1)
		return // nothing to punch: the stream closes
	}
	p.mu.Lock()
	now := p.now()
	ok := !p.closed && p.global.Next(p.rate()).Compare(now) <= 0 && p.limit.take(peer, now)
	if ok {
		p.global.Allow(now, p.rate())
	}
	p.mu.Unlock()
	if !ok {
		p.stats.refused.Add(1)
		return
	}
	defer func() {
		p.mu.Lock()
		p.limit.done(peer)
		p.mu.Unlock()
	}()
	select {
	case p.slot <- struct{}{}:
		defer func() { <-p.slot }()
	default:
		p.stats.refused.Add(1)
		return
	}
	p.stats.served.Add(1)
	stop := context.AfterFunc(p.ctx, func() { st.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	st.SetDeadline(p.now().Add(p.cfg.StreamTimeout))
	br := bufio.NewReaderSize(st, 256)
	body, err := readMsg(br)
	var theirs connectMsg
	if err == nil {
		theirs, err = parseConnect(body, p.cfg.MaxAddrs)
	}
	if err != nil {
		p.record(peer, RoleResponder, c.Session().OpenedAt(), err)
		return
	}
	own := p.ownConnect()
	if _, err := st.Write(appendConnect(nil, own, p.cfg.MaxAddrs)); err != nil {
		return
	}
	body, err = readMsg(br)
	if err == nil && (len(body) != 1 || body[0] != msgSync) {
		err = fmt.Errorf("%w: want SYNC", ErrMalformed)
	}
	if err != nil {
		p.record(peer, RoleResponder, c.Session().OpenedAt(), err)
		return
	}
	addrs := p.dialable(theirs.addrs)
	if len(addrs) == 0 {
		p.record(peer, RoleResponder, time.Time{}, fmt.Errorf("%w: the peer gave none that may be dialled (%d given)", ErrNoAddrs, len(theirs.addrs)))
		return
	}
	err = explain(p.connect(peer, p.startAll(addrs), tendril.Inbound), own.rewritesPorts, theirs.rewritesPorts)
	p.record(peer, RoleResponder, c.Session().OpenedAt(), err)
}

// record notes the outcome of an attempt this node answered.
//
// A direct session with the peer makes it a success whatever the stream said: the
// initiator's attempt can reach this node's listener and replace the relayed session,
// closing the stream, before SYNC is read here.
func (p *Puncher) record(peer secio.PeerID, role Role, relayedSince time.Time, err error) {
	if err != nil && p.direct(peer) {
		err = nil
	}
	p.update(peer, func(r *PeerReport) {
		if r.Role != role {
			*r = PeerReport{Peer: peer, Role: role}
		}
		r.Attempts++
		r.Err, r.At = err, p.now()
		if err == nil {
			r.Punched = true
			if !relayedSince.IsZero() {
				r.Took = p.now().Sub(relayedSince)
			}
		}
	})
}

// attempt is a connection attempt from a listen port to addr, started by startAll.
type attempt struct {
	addr ma.Multiaddr
	from netip.AddrPort
	tcp  *tcp.Attempt // nil if it could not start (err)
	err  error
}

// startAll starts a connection attempt to each of addrs from the listen port of its
// family, and returns once each has sent its SYN (or failed to start).
func (p *Puncher) startAll(addrs []ma.Multiaddr) []*attempt {
	out := make([]*attempt, len(addrs))
	for i, a := range addrs {
		at := &attempt{addr: a}
		var ok bool
		if at.from, ok = p.listenPort(a); !ok {
			at.err = fmt.Errorf("no TCP listener of the family of %s to dial from", a)
		} else {
			p.stats.dials.Add(1)
			at.tcp, at.err = p.tcp.StartDialFrom(at.from, a)
		}
		out[i] = at
	}
	return out
}

func closeAll(attempts []*attempt) {
	for _, at := range attempts {
		if at.tcp != nil {
			at.tcp.Close()
		}
	}
}

// connect completes the attempts and runs the handshake in the role dir on each
// connection that comes up. It returns nil once a direct session with peer exists (also
// one that came in through a listener), or why not after AttemptTimeout.
func (p *Puncher) connect(peer secio.PeerID, attempts []*attempt, dir tendril.Direction) error {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.AttemptTimeout)
	defer cancel()
	errs := make(chan error, len(attempts))
	for _, at := range attempts {
		go func() { errs <- p.complete(ctx, peer, at, dir) }()
	}
	var first error
	pending := len(attempts)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.direct(peer) {
			cancel()
			for ; pending > 0; pending-- {
				<-errs
			}
			return nil
		}
		select {
		case err := <-errs:
			pending--
			if first == nil && err != nil {
				first = err
			}
			continue
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		for ; pending > 0; pending-- {
			if err := <-errs; first == nil && err != nil {
				first = err
			}
		}
		if p.direct(peer) {
			return nil
		}
		if p.ctx.Err() != nil {
			return ErrClosed
		}
		if first == nil || errors.Is(first, context.DeadlineExceeded) || errors.Is(first, context.Canceled) {
			return fmt.Errorf("%w (%s)", ErrTimedOut, p.cfg.AttemptTimeout)
		}
		return fmt.Errorf("%w: %w", ErrTimedOut, first)
	}
}

// complete waits for at's connection and runs the handshake on it.
func (p *Puncher) complete(ctx context.Context, peer secio.PeerID, at *attempt, dir tendril.Direction) error {
	var conn net.Conn
	err := at.err
	for err == nil {
		conn, err = at.tcp.Wait(ctx)
		at.tcp = nil
		// A NAT or host that answers the first SYN with a reset: try again while the
		// attempt lasts, so that a socket here is connecting when the other end's arrives.
		if err == nil || ctx.Err() != nil || !isRefused(err) {
			break
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		p.stats.dials.Add(1)
		at.tcp, err = p.tcp.StartDialFrom(at.from, at.addr)
	}
	if err != nil {
		return err
	}
	if dir == tendril.Outbound {
		_, err = p.svc.DialConn(ctx, conn, tendril.Addr{Transport: at.addr, Peer: peer})
		return err
	}
	s, err := p.svc.ServeConn(ctx, conn, tendril.Inbound)
	if err != nil {
		return err
	}
	if s.Peer() != peer { // someone else answered at the address the peer gave
		s.Close()
		return fmt.Errorf("holepunch: %s answered at %s, not %s", s.Peer(), at.addr, peer)
	}
	return nil
}

// listenPort returns the address to dial a from: a plain TCP listen address of a's
// family (its IP may be unspecified).
func (p *Puncher) listenPort(a ma.Multiaddr) (netip.AddrPort, bool) {
	want := a[0].Protocol().Code
	for _, l := range p.svc.Addrs() {
		t := l.Transport
		if len(t) != 2 || t[0].Protocol().Code != want || t[1].Protocol().Code != ma.P_TCP {
			continue
		}
		ip, err := netip.ParseAddr(t[0].Value())
		port, perr := strconv.ParseUint(t[1].Value(), 10, 16)
		if err != nil || perr != nil {
			continue
		}
		return netip.AddrPortFrom(ip, uint16(port)), true
	}
	return netip.AddrPort{}, false
}

// dialable keeps the plain TCP addresses on IPs that Allow accepts, each once, at most
// MaxAddrs.
func (p *Puncher) dialable(addrs []ma.Multiaddr) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range addrs {
		if len(a) != 2 || a[1].Protocol().Code != ma.P_TCP {
			continue
		}
		if c := a[0].Protocol().Code; c != ma.P_IP4 && c != ma.P_IP6 {
			continue
		}
		if !p.cfg.Allow(a) || contains(out, a) || len(out) == p.cfg.MaxAddrs {
			continue
		}
		out = append(out, a)
	}
	return out
}

func contains(list []ma.Multiaddr, a ma.Multiaddr) bool {
	for _, b := range list {
		if b.Equal(a) {
			return true
		}
	}
	return false
}

// ownConnect is what this node tells the other end: its candidate addresses, and whether
// its NAT keeps ports.
func (p *Puncher) ownConnect() connectMsg {
	var addrs []ma.Multiaddr
	if p.cfg.Addrs != nil {
		addrs = p.cfg.Addrs()
	} else {
		var listen []ma.Multiaddr
		for _, a := range p.svc.Addrs() {
			listen = append(listen, a.Transport)
		}
		addrs = reach.Candidates(p.id.ObservedAddrs(), listen, nil, p.cfg.MaxAddrs)
	}
	return connectMsg{addrs: p.dialable(addrs), rewritesPorts: p.rewritesPorts()}
}

// direct reports whether this node has a direct session with peer.
func (p *Puncher) direct(peer secio.PeerID) bool {
	s := p.svc.Session(peer)
	return s != nil && !s.Relayed()
}

// streamErr names a refusal of the protocol as ErrUnsupported.
func (p *Puncher) streamErr(err error) error {
	if errors.Is(err, protocol.ErrUnknownProtocol) || errors.Is(err, protocol.ErrNoCommonVersion) {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	if p.ctx.Err() != nil {
		return ErrClosed
	}
	return err
}

func (p *Puncher) update(peer secio.PeerID, f func(*PeerReport)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	r := p.reports[peer]
	if r == nil {
		if p.svc.Session(peer) == nil || len(p.reports) >= maxTrackedPeers {
			return
		}
		r = &PeerReport{Peer: peer}
		p.reports[peer] = r
	}
	f(r)
}
