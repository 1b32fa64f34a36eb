package tendril

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
)

// Direction says which side dialled a session.
type Direction uint8

// The two directions of a session.
const (
	Inbound  Direction = iota + 1 // the remote dialled this node
	Outbound                      // this node dialled the remote
)

// String returns "inbound" or "outbound".
func (d Direction) String() string {
	switch d {
	case Inbound:
		return "inbound"
	case Outbound:
		return "outbound"
	}
	return "unknown"
}

// Service is a tendril node: it listens, dials, keeps sessions with peers, runs the
// registered protocols on them and reports what happens on Events. All methods are safe for
// concurrent use. Close it to stop everything it started.
type Service struct {
	cfg      Config
	key      *secio.PrivateKey
	id       secio.PeerID
	log      *slog.Logger
	registry *protocol.Registry // the protocols, for negotiation
	secioCfg secio.Config
	memory   *mux.Budget // MaxMemory: every session's receive windows

	protoMu    sync.RWMutex         // guards protocols and protoOrder (protocols.go)
	protocols  map[string]*Protocol // by name
	protoOrder []*Protocol          // in registration order, for OpenOnConnect

	// ctx is cancelled by Close; it aborts dials and handshakes in progress. Sessions have
	// their own contexts, so that Shutdown can close them gracefully.
	ctx    context.Context
	cancel context.CancelFunc

	events        chan Event
	eventsMu      sync.RWMutex
	eventsClosed  bool
	droppedEvents atomic.Uint64

	coalesce coalescer // repeated failure events (event.go)

	mu        sync.Mutex
	closed    bool
	listeners map[*listener]struct{}
	sessions  map[uint64]*Session
	byPeer    map[secio.PeerID]*Session
	adm       admission // what admission counted (admission.go)

	// For Stats (stats.go): the counters of the sessions that have closed, sessions
	// established by Direction, and handshakes.
	closedStats   SessionStats
	sessionTotals [Outbound + 1]uint64
	handshakes    handshakeCounters

	nextID    uint64
	keepAlive time.Duration // ping period for every session; <= 0: none
	pinging   bool          // the keepalive timer is armed
	kaTimer   *time.Timer   // runs keepAliveTick; created on the first session
	wg        sync.WaitGroup
	done      chan struct{}
}

type listener struct {
	ln     net.Listener
	addr   Addr
	legacy bool
}

// New validates cfg and returns a Service. It starts nothing: call Listen or Dial.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	key := cfg.PrivateKey
	if key == nil {
		var err error
		if key, err = secio.GenerateKey(); err != nil {
			return nil, fmt.Errorf("tendril: generating identity: %w", err)
		}
	}
	s := &Service{
		cfg:       cfg,
		key:       key,
		id:        key.PeerID(),
		log:       cfg.Logger,
		protocols: make(map[string]*Protocol, len(cfg.Protocols)),
		registry:  protocol.NewRegistry(),
		events:    make(chan Event, cfg.EventBuffer),
		listeners: make(map[*listener]struct{}),
		sessions:  make(map[uint64]*Session),
		byPeer:    make(map[secio.PeerID]*Session),
		adm:       newAdmission(cfg.Admission, cfg.HandshakeTimeout),
		done:      make(chan struct{}),
	}
	for i := range cfg.Protocols {
		p := cfg.Protocols[i]
		p.Versions = slices.Clone(p.Versions)
		if err := s.addProtocolLocked(&p); err != nil {
			return nil, configError("%w", err)
		}
	}
	// The Service pings all sessions from one timer: the mux's own keepalive would cost a
	// goroutine per session, and idle sessions are what a node has most of.
	s.keepAlive = cfg.Mux.KeepAliveInterval
	muxCfg := *cfg.Mux
	muxCfg.KeepAliveInterval = -1
	s.memory = mux.NewBudget(cfg.MaxMemory, nil)
	muxCfg.Memory = s.memory
	s.cfg.Mux = &muxCfg
	s.secioCfg = secio.Config{
		PrivateKey:       key,
		Ciphers:          cfg.Ciphers,
		KeyExchanges:     cfg.KeyExchanges,
		HandshakeTimeout: cfg.HandshakeTimeout,
		MaxFrameSize:     cfg.MaxFrameSize,
		Logger:           cfg.Logger,
	}
	if err := s.secioCfg.Validate(); err != nil {
		return nil, configError("%w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// ID returns this node's peer ID.
func (s *Service) ID() secio.PeerID { return s.id }

// MemoryUsed returns the bytes reserved by all sessions' receive windows, out of
// Config.MaxMemory.
func (s *Service) MemoryUsed() int64 { return s.memory.Used() }

// PublicKey returns this node's identity public key.
func (s *Service) PublicKey() *secio.PublicKey { return s.key.Public() }

// Events returns the channel on which the Service reports what happens. It is closed by
// Close. Events that find the channel full are dropped (see DroppedEvents): read it, or
// ignore it, but a slow reader never slows the Service. Lifecycle events (listen started
// and closed, session opened and closed) may fill the whole buffer, all others only half
// of it, so no flood of failures can push them out. Failures a peer can provoke at will
// (negotiation and protocol errors, refusals, failed inbound handshakes, blocked sends) are
// coalesced per session or remote IP: a few per second pass, and one event then stands for
// the rest (Event.Count).
func (s *Service) Events() <-chan Event { return s.events }

// DroppedEvents returns how many events were dropped because the Events channel was full.
func (s *Service) DroppedEvents() uint64 { return s.droppedEvents.Load() }

// Listen starts accepting connections on addr (port 0 picks a free port) and returns the
// bound address, with /p2p/ and this node's peer ID. ctx bounds only the bind; the listener
// runs until Close.
func (s *Service) Listen(ctx context.Context, addr Addr) (Addr, error) {
	return s.listen(ctx, addr, false)
}

// ListenLegacy is Listen for the insecure TEA legacy mode (Config.LegacyTEA must be set).
// Connections accepted there speak only that mode; the returned address has no peer ID.
func (s *Service) ListenLegacy(ctx context.Context, addr Addr) (Addr, error) {
	if s.cfg.LegacyTEA == nil {
		return Addr{}, ErrLegacyDisabled
	}
	return s.listen(ctx, addr, true)
}

func (s *Service) listen(ctx context.Context, addr Addr, legacy bool) (Addr, error) {
	network, hostport, err := addr.hostPort()
	if err != nil {
		return Addr{}, err
	}
	lc := net.ListenConfig{KeepAlive: s.tcpKeepAlive()}
	ln, err := lc.Listen(ctx, network, hostport)
	if err != nil {
		return Addr{}, fmt.Errorf("tendril: listen %s: %w", addr.Transport, err)
	}
	l := &listener{ln: ln, legacy: legacy}
	if legacy {
		l.addr = addrFromNet(ln.Addr(), secio.PeerID{})
	} else {
		l.addr = addrFromNet(ln.Addr(), s.id)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return Addr{}, ErrServiceClosed
	}
	s.listeners[l] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.log.Info("listening", "addr", l.addr, "legacy", legacy)
	s.emit(Event{Type: EventListenStarted, Addr: l.addr, Secure: !legacy})
	go s.acceptLoop(l)
	return l.addr, nil
}

// Addrs returns the addresses this node listens on.
func (s *Service) Addrs() []Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Addr, 0, len(s.listeners))
	for l := range s.listeners {
		out = append(out, l.addr)
	}
	return out
}

func (s *Service) acceptLoop(l *listener) {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && s.ctx.Err() == nil {
				// Out of descriptors and the like: back off rather than spin or give up.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			s.mu.Lock()
			delete(s.listeners, l)
			closed := s.closed
			s.mu.Unlock()
			if closed {
				err = nil
			}
			s.emit(Event{Type: EventListenClosed, Addr: l.addr, Err: err})
			return
		}
		delay = 0
		remote := remoteAddrPort(c)
		if err := s.gateAddr(Inbound, remote); err != nil {
			abortConn(c)
			s.emitRepeat(Event{Type: EventGated, Addr: addrFromNet(c.RemoteAddr(), secio.PeerID{}), Direction: Inbound, Err: err}, remote.Addr())
			continue
		}
		hctx, ad, err := s.admitInbound(s.ctx, remote)
		if err != nil {
			abortConn(c)
			if errors.Is(err, ErrConnectionLimit) {
				s.emitRepeat(Event{Type: EventLimitReached, Addr: addrFromNet(c.RemoteAddr(), secio.PeerID{}), Direction: Inbound, Err: err}, remote.Addr())
			}
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_, _ = s.setup(hctx, c, ad, secio.PeerID{}, l.legacy)
		}()
	}
}

// abortConn closes a TCP connection with a reset, so that refused or failed connections do
// not linger in TIME_WAIT.
func abortConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// Dial connects to addr, runs the handshake (verifying the peer ID if addr has one) and
// returns the session. If addr names a peer that already has a session, that session is
// returned without dialling. Otherwise, when the handshake reveals a peer that already has
// a session, both sides keep the same one of the two connections: the one dialled by the
// peer with the smaller ID, or, if this node dialled both, the new one.
//
// Dial returns once the protocols marked OpenOnConnect are open on both ends and this side's
// Connected handlers for them have returned (a protocol that fails to open is reported as an
// event, not by Dial), so that Send right after Dial finds them open. A Connected handler
// that blocks therefore delays Dial, up to ctx; if ctx ends first, Dial returns its error
// and the session stays registered, its protocols still opening.
func (s *Service) Dial(ctx context.Context, addr Addr) (*Session, error) {
	return s.dialReady(ctx, addr, false)
}

// dialReady dials and waits for the OpenOnConnect protocols (see Dial).
func (s *Service) dialReady(ctx context.Context, addr Addr, legacy bool) (*Session, error) {
	sess, err := s.dial(ctx, addr, legacy)
	if err != nil {
		return nil, err
	}
	if err := sess.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("tendril: dial %s: %w", addr, err)
	}
	return sess, nil
}

// DialLegacy dials a peer that speaks the insecure TEA legacy mode (Config.LegacyTEA must be
// set). The session has no peer ID and reports Secure() == false. Like Dial, it returns once
// the OpenOnConnect protocols are open.
func (s *Service) DialLegacy(ctx context.Context, addr Addr) (*Session, error) {
	if s.cfg.LegacyTEA == nil {
		return nil, ErrLegacyDisabled
	}
	return s.dialReady(ctx, addr, true)
}

func (s *Service) dial(ctx context.Context, addr Addr, legacy bool) (*Session, error) {
	network, hostport, err := addr.hostPort()
	if err != nil {
		return nil, err
	}
	if !legacy && !addr.Peer.IsZero() {
		if addr.Peer == s.id {
			return nil, fmt.Errorf("tendril: dial %s: %w", addr, secio.ErrSelfDial)
		}
		if sess := s.Session(addr.Peer); sess != nil {
			return sess, nil
		}
	}
	ad, err := s.admitOutbound()
	if err != nil {
		if errors.Is(err, ErrConnectionLimit) {
			s.emit(Event{Type: EventLimitReached, Addr: addr, Direction: Outbound, Err: err})
		}
		return nil, err
	}
	// Close aborts dials in progress, and so does the caller's ctx.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	dctx, dcancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	d := net.Dialer{KeepAlive: s.tcpKeepAlive()}
	raw, err := d.DialContext(dctx, network, hostport)
	dcancel()
	if err != nil {
		s.release(&ad)
		err = fmt.Errorf("tendril: dial %s: %w", addr, err)
		s.emit(Event{Type: EventDialFailed, Addr: addr, Peer: addr.Peer, Direction: Outbound, Err: err})
		return nil, err
	}
	ad.remote = remoteAddrPort(raw)
	if err := s.gateAddr(Outbound, ad.remote); err != nil {
		s.release(&ad)
		abortConn(raw)
		err = fmt.Errorf("tendril: dial %s: %w", addr, err)
		s.emit(Event{Type: EventGated, Addr: addr, Peer: addr.Peer, Direction: Outbound, Err: err})
		return nil, err
	}
	return s.setup(ctx, raw, ad, addr.Peer, legacy)
}

// tcpKeepAlive is the TCP keepalive setting for net.Dialer and net.ListenConfig: off (-1)
// while the Service's own keepalive pings every session, which also covers the secure and
// mux layers; the operating system's default (0) otherwise.
func (s *Service) tcpKeepAlive() time.Duration {
	if s.keepAlive > 0 {
		return -1
	}
	return 0
}

// setup turns a raw connection into a registered session. The caller has admitted it (ad);
// setup gives back what ad holds on every path where no session comes of it.
func (s *Service) setup(ctx context.Context, raw net.Conn, ad admitted, expect secio.PeerID, legacy bool) (*Session, error) {
	dir := ad.dir
	if dir == Inbound {
		// The Service's own bound on an inbound handshake, whatever secio's timers do: a
		// little after HandshakeTimeout, so that secio's typed timeout normally comes first.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.cfg.HandshakeTimeout+handshakeSlack, secio.ErrHandshakeTimeout)
		defer cancel()
	}
	if tc, ok := raw.(*net.TCPConn); ok && s.cfg.ResetOnClose {
		_ = tc.SetLinger(0)
	}
	remote := addrFromNet(raw.RemoteAddr(), expect)
	local := addrFromNet(raw.LocalAddr(), secio.PeerID{})
	var (
		sc  *secio.Conn
		err error
	)
	if legacy {
		sc, err = secio.LegacyTEA(raw, s.cfg.LegacyTEA.Key, &secio.LegacyConfig{MaxFrameSize: s.cfg.MaxFrameSize})
	} else {
		cfg := s.secioCfg
		cfg.ExpectedPeer = expect
		// secio bounds the handshake by cfg.HandshakeTimeout (set from Config) and reports
		// its expiry as secio.ErrHandshakeTimeout; a timer of our own would fire first and
		// turn that into a bare context.DeadlineExceeded.
		if dir == Outbound {
			sc, err = secio.Client(ctx, raw, &cfg)
		} else {
			sc, err = secio.Server(ctx, raw, &cfg)
		}
	}
	if err != nil {
		s.handshakes.failed(err)
		s.release(&ad)
		abortConn(raw)
		typ := EventHandshakeFailed
		if errors.Is(err, secio.ErrPeerIDMismatch) {
			typ = EventPeerIDMismatch
		}
		err = fmt.Errorf("tendril: handshake with %s: %w", remote.Transport, err)
		if s.logs(slog.LevelDebug) {
			s.log.Debug("handshake failed", "addr", remote, "dir", dir.String(), "err", err)
		}
		ev := Event{Type: typ, Addr: remote, Peer: expect, Direction: dir, Secure: !legacy, Err: err}
		if dir == Inbound {
			s.emitRepeat(ev, ad.ip())
		} else {
			s.emit(ev)
		}
		return nil, err
	}
	s.handshakes.completed.Add(1)
	var ms *mux.Session
	rc := newReadErrConn(sc)
	if dir == Outbound {
		ms, err = mux.Client(rc, s.cfg.Mux)
	} else {
		ms, err = mux.Server(rc, s.cfg.Mux)
	}
	if err != nil {
		s.release(&ad)
		sc.Close()
		return nil, fmt.Errorf("tendril: mux: %w", err)
	}
	sess := newSession(s, sc, ms, dir, local, remote)
	sess.rconn = rc
	sess.adm = ad
	return s.register(sess)
}

// handshakeSlack is how long after HandshakeTimeout the Service aborts an inbound
// handshake itself.
const handshakeSlack = 500 * time.Millisecond

// register adds a handshaken session, resolving duplicates by authenticated peer ID, and
// starts it. It returns the session that is kept for that peer.
func (s *Service) register(sess *Session) (*Session, error) {
	if err := s.gatePeer(sess); err != nil {
		s.release(&sess.adm)
		sess.abortUnstarted()
		ev := sess.event(EventGated, err)
		if sess.dir == Inbound {
			s.emitRepeat(ev, sess.adm.ip())
		} else {
			s.emit(ev)
		}
		return nil, err
	}
	if sess.dir == Inbound {
		s.trim() // at the high watermark: make room before counting this one
	}
	s.mu.Lock()
	if s.closed {
		s.releaseLocked(&sess.adm)
		s.mu.Unlock()
		sess.abortUnstarted()
		return nil, ErrServiceClosed
	}
	if err := s.admitSessionLocked(&sess.adm); err != nil {
		s.releaseLocked(&sess.adm)
		s.mu.Unlock()
		sess.abortUnstarted()
		s.emitRepeat(sess.event(EventLimitReached, err), sess.adm.ip())
		return nil, err
	}
	var replaced *Session
	if sess.secure {
		if old := s.byPeer[sess.peer]; old != nil {
			if !s.keepNew(old, sess) {
				s.releaseLocked(&sess.adm)
				s.mu.Unlock()
				s.log.Debug("duplicate session closed", "peer", sess.peer)
				sess.abortUnstarted()
				return old, nil
			}
			replaced = old
		}
		s.byPeer[sess.peer] = sess
	}
	s.nextID++
	sess.id = s.nextID
	s.sessions[sess.id] = sess
	s.sessionTotals[sess.dir]++
	s.armIdleLocked(sess)
	s.wg.Add(1)
	if s.keepAlive > 0 && !s.pinging {
		s.pinging = true
		if s.kaTimer == nil {
			s.kaTimer = time.AfterFunc(s.keepAlive, s.keepAliveTick)
		} else {
			s.kaTimer.Reset(s.keepAlive)
		}
	}
	s.mu.Unlock()

	if replaced != nil {
		s.log.Debug("duplicate session replaced", "peer", sess.peer)
		replaced.closeWith(ErrDuplicateSession)
	}
	sess.start()
	if sess.dir == Inbound {
		s.trim()
	}
	return sess, nil
}

// keepNew decides between two sessions with the same peer so that both peers decide alike:
// keep the one dialled by the peer with the smaller ID; if the same peer dialled both, keep
// the newer one, since a peer redials only when it considers the old connection gone (it
// restarted, or the old connection died without either side noticing yet).
func (s *Service) keepNew(old, cur *Session) bool {
	dialer := func(x *Session) secio.PeerID {
		if x.dir == Outbound {
			return s.id
		}
		return x.peer
	}
	do, dn := dialer(old), dialer(cur)
	if do == dn {
		return true
	}
	return dn.Compare(do) < 0
}

// keepAliveTick pings every session; a session whose ping is not answered within the mux's
// ConnectionWriteTimeout is closed. It runs on the timer's goroutine every keepAlive period
// while the Service has sessions: no goroutine of the Service waits in between.
func (s *Service) keepAliveTick() {
	s.mu.Lock()
	if s.closed || len(s.sessions) == 0 {
		s.pinging = false
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	for _, sess := range s.Sessions() {
		sess.ping(s.cfg.Mux.ConnectionWriteTimeout)
	}
	s.mu.Lock()
	if s.closed {
		s.pinging = false
	} else {
		s.kaTimer.Reset(s.keepAlive)
	}
	s.mu.Unlock()
}

func (s *Service) unregister(sess *Session) {
	st := sess.Stats()
	st.StreamsOpen = 0
	s.mu.Lock()
	s.closedStats.add(st)
	s.releaseLocked(&sess.adm)
	delete(s.sessions, sess.id)
	if sess.secure && s.byPeer[sess.peer] == sess {
		delete(s.byPeer, sess.peer)
	}
	s.mu.Unlock()
}

// Sessions returns the open sessions.
func (s *Service) Sessions() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		out = append(out, sess)
	}
	return out
}

// Session returns the session with the given peer, or nil.
func (s *Service) Session(id secio.PeerID) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byPeer[id]
}

// Disconnect closes the session with the peer, gracefully: queued messages are sent first,
// within Config.ShutdownTimeout. Like Session.Close, it may be called from a handler of that
// session, and then does not wait for that handler.
func (s *Service) Disconnect(id secio.PeerID) error {
	sess := s.Session(id)
	if sess == nil {
		return ErrNotConnected
	}
	return sess.Close()
}

// OpenProtocol opens the named protocol with the peer, negotiating the version; see
// Session.OpenProtocol.
func (s *Service) OpenProtocol(ctx context.Context, id secio.PeerID, name string) error {
	sess := s.Session(id)
	if sess == nil {
		return ErrNotConnected
	}
	return sess.OpenProtocol(ctx, name)
}

// Send queues msg for the peer on the named protocol without blocking. It returns
// ErrSessionBlocked if the session's send queue is full.
func (s *Service) Send(id secio.PeerID, name string, msg []byte) error {
	sess := s.Session(id)
	if sess == nil {
		return ErrNotConnected
	}
	return sess.Send(name, msg)
}

// Broadcast queues msg on the named protocol for every session that has it open and that
// filter accepts (nil: all). It returns how many sessions took the message, and the errors
// of those that did not (for example ErrSessionBlocked), joined. A name not registered on
// this Service is an error wrapping ErrUnknownProtocol.
func (s *Service) Broadcast(name string, msg []byte, filter func(*Session) bool) (int, error) {
	if s.protocol(name) == nil {
		// As Send says: a misspelt name is a mistake to report, not "nobody has it open".
		return 0, fmt.Errorf("%w: %q", ErrUnknownProtocol, name)
	}
	var (
		n    int
		errs []error
	)
	for _, sess := range s.Sessions() {
		if filter != nil && !filter(sess) {
			continue
		}
		ps := sess.stream(name)
		if ps == nil {
			continue
		}
		if err := ps.send(context.Background(), msg, false); err != nil {
			errs = append(errs, fmt.Errorf("session %d: %w", sess.id, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Close shuts the Service down gracefully within Config.ShutdownTimeout, then forcibly. See
// Shutdown. It is idempotent.
func (s *Service) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown stops listening, aborts dials and handshakes in progress, closes every session
// gracefully (queued messages are sent and streams closed in order) until ctx is done, then
// closes what is left, waits for every goroutine of the Service (handlers included) and
// closes the Events channel. Handlers abandoned after Config.HandlerExitTimeout are not
// waited for. It returns ctx's error if the graceful part was cut short.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	if s.kaTimer != nil {
		s.kaTimer.Stop()
	}
	if s.adm.idleTimer != nil {
		s.adm.idleTimer.Stop()
	}
	listeners := make([]*listener, 0, len(s.listeners))
	for l := range s.listeners {
		listeners = append(listeners, l)
	}
	s.mu.Unlock()

	s.cancel()
	s.stopCoalescing()
	for _, l := range listeners {
		l.ln.Close()
	}
	var wg sync.WaitGroup
	for _, sess := range s.Sessions() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess.shutdown(ctx)
		}()
	}
	wg.Wait()
	s.wg.Wait()

	s.eventsMu.Lock()
	s.eventsClosed = true
	close(s.events)
	s.eventsMu.Unlock()
	close(s.done)
	s.log.Info("service closed")
	return ctx.Err()
}
