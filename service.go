package tendril

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
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
	// transports dial and listen, the first that handles an address (Config.Transports).
	transports []transport.Transport
	memory     *mux.Budget // MaxMemory: what every connection buffers (see MemoryUsed)

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
	subs          map[*Subscription]struct{} // Subscribe; guarded by eventsMu

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

	// overdue is closed when Shutdown's ctx ends: from then on, sessions ending wait for
	// their handlers only briefly (handlerGrace), so that Shutdown returns in time.
	overdue chan struct{}

	nextID    uint64
	keepAlive time.Duration // ping period for every session; <= 0: none
	pinging   bool          // the keepalive timer is armed
	kaTimer   *time.Timer   // runs keepAliveTick; created on the first session
	wg        sync.WaitGroup
	done      chan struct{}
}

type listener struct {
	ln     transport.Listener
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
		adm:       newAdmission(cfg.Admission, cfg.HandshakeTimeout, cfg.TrustedProxies),
		done:      make(chan struct{}),
		overdue:   make(chan struct{}),
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
	// The Service's Serve handler only negotiates (what serves a stream then runs on a
	// goroutine of its own): that is all the concurrency a peer may cost it per session.
	muxCfg.ServeConcurrency = maxNegotiating
	s.transports = cfg.Transports
	if s.transports == nil {
		s.transports = s.defaultTransports()
	}
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

// maxNegotiating is how many streams a peer opens may negotiate at once in a session (the
// mux's ServeConcurrency for the Service).
const maxNegotiating = 32

// ID returns this node's peer ID.
func (s *Service) ID() secio.PeerID { return s.id }

// MemoryUsed returns the bytes reserved, out of Config.MaxMemory, by every connection:
// what its streams have received and not yet read, the windows of streams that grew, and
// its record buffers (see mux.Budget and secio.MemoryBudget).
func (s *Service) MemoryUsed() int64 { return s.memory.Used() }

// PublicKey returns this node's identity public key.
func (s *Service) PublicKey() *secio.PublicKey { return s.key.Public() }

// Events returns the channel on which the Service reports what happens. It is closed by
// Close. Events that find the channel full are dropped (see DroppedEvents): read it, or
// ignore it, but a slow reader never slows the Service. Lifecycle events (listen started
// and closed, session opened and closed, protocol added and removed) may fill the whole
// buffer, all others only half
// of it, so no flood of failures can push them out. Failures a peer can provoke at will
// (negotiation and protocol errors, refusals, failed inbound handshakes, blocked sends) are
// coalesced per session or remote IP: a few per second pass, and one event then stands for
// the rest (Event.Count). Events has one reader, the application; code that runs beside it
// on the Service takes a Subscription of its own (Subscribe).
func (s *Service) Events() <-chan Event { return s.events }

// DroppedEvents returns how many events were dropped because the Events channel was full.
func (s *Service) DroppedEvents() uint64 { return s.droppedEvents.Load() }

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

// Close shuts the Service down gracefully within Config.ShutdownTimeout, then forcibly: it
// returns within ShutdownTimeout and a fraction of a second. See Shutdown. It is
// idempotent.
func (s *Service) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	return s.Shutdown(ctx)
}

// Shutdown stops listening, aborts dials and handshakes in progress, closes every session
// gracefully (queued messages are sent and streams closed in order) until ctx is done, then
// closes what is left, waits for every goroutine of the Service (handlers included) and
// closes the Events channel. Handlers still running Config.HandlerExitTimeout after their
// session ended, or a fraction of a second after ctx is done if that comes first, are
// logged and abandoned (their Contexts are done): Shutdown does not wait for them. It
// returns ctx's error if the graceful part was cut short.
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
	stopOverdue := context.AfterFunc(ctx, func() { close(s.overdue) })
	defer stopOverdue()
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
	s.closeSubscriptionsLocked()
	s.eventsMu.Unlock()
	close(s.done)
	s.log.Info("service closed")
	return ctx.Err()
}
