package identify

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/internal/ratelimit"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

// ProtocolName and ProtocolVersion are what identify registers on the Service.
const (
	ProtocolName    = "/tendril/identify"
	ProtocolVersion = "1"
)

// Identify runs the identify protocol on a Service: it tells every peer who this node is
// and learns the same of each. Create it with New; Close it before or with its Service.
// All methods are safe for concurrent use.
type Identify struct {
	svc *tendril.Service
	cfg Config
	sub *tendril.Subscription
	// One token bucket shape for both directions: received updates are checked against
	// recvRate before any parsing, and this node paces its own pushes with pushRate so
	// that they stay within what a peer with the same configuration accepts.
	recvRate, pushRate ratelimit.Rate

	mu     sync.Mutex
	local  local                      // guarded by mu
	peers  map[*tendril.Session]*peer // guarded by mu; see peer
	closed bool                       // guarded by mu

	kick     chan struct{} // capacity 1: something changed, or a send must be retried
	quit     chan struct{} // closed by Close
	loopDone chan struct{} // closed when run returns
	once     sync.Once

	stats struct {
		received, accepted, dropped, stale, verified, rejected, ignored, sent atomic.Uint64
	}
}

// local is what this node says about itself. A new gen means peers must be told again.
type local struct {
	rec       *peerrecord.Record // every advertised address
	public    *peerrecord.Record // the public ones, one sequence number below rec
	protocols []ProtoVersions
	gen       uint64
}

// peer is identify's state for one session. It exists while the session's identify
// stream does, and after a stream closed for an error until the session ends, so that a
// peer cannot reset its allowance or its error by opening the stream again; entries of
// ended sessions are swept whenever a new one is made. Fields are guarded by
// Identify.mu, except that only the session's handler goroutine writes info and lastRaw,
// so it may read them without the lock.
type peer struct {
	c     *tendril.Context // the open stream; nil once it ended
	group addrbook.Group   // of the session's remote address: the observer's group

	recv    ratelimit.Bucket // updates accepted from the peer
	dropped int              // updates dropped by recv
	err     error            // why the stream was closed; then nothing more is read

	info    Info   // the last accepted update; Record nil before the first
	lastRaw []byte // the record bytes of info, to skip verifying them again

	push    ratelimit.Bucket // this node's messages to the peer
	sentGen uint64           // the local gen the peer was last sent; 0: must be sent
}

// New starts identify on svc: it registers ProtocolName (opened by the dialling side
// of every session from now on, as Protocol.OpenOnConnect does) and pushes updates when
// svc's listeners or protocols change. cfg.PrivateKey must be svc's key. Errors wrap
// ErrInvalidConfig, or the Service's own (tendril.ErrInvalidProtocol if identify is
// registered already).
func New(svc *tendril.Service, cfg Config) (*Identify, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.PrivateKey.Public().Equal(svc.PublicKey()) {
		return nil, fmt.Errorf("%w: PrivateKey is not the Service's key", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if cfg.Addrs == nil {
		cfg.Addrs = func() []ma.Multiaddr { return DefaultAddrs(svc) }
	}
	if cfg.Public == nil {
		cfg.Public = addrbook.IsPublic
	}
	i := &Identify{
		svc:      svc,
		cfg:      cfg,
		recvRate: cfg.updateRate(),
		pushRate: cfg.pushRate(),
		peers:    make(map[*tendril.Session]*peer),
		kick:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	// Subscribe before reading the state, so that no change falls between the two.
	i.sub = svc.Subscribe(64)
	i.refresh(time.Now())
	err := svc.AddProtocol(tendril.Protocol{
		Name:          ProtocolName,
		Versions:      []string{ProtocolVersion},
		Handler:       handler{i},
		OpenOnConnect: true,
		// The Service refuses a message beyond twice the largest identify sends as its
		// length arrives (a protocol error on the stream), so no peer makes this node read
		// megabytes; those in between reach the handler, which reports ErrTooLarge.
		MaxMessageSize: min(2*MaxMessageSize, svc.MaxMessageSize()),
	})
	if err != nil {
		i.sub.Close()
		return nil, err
	}
	go i.run()
	return i, nil
}

// Close stops identify: it unregisters the protocol (its streams close) and stops
// pushing. It is idempotent and returns nil.
func (i *Identify) Close() error {
	i.once.Do(func() {
		i.mu.Lock()
		i.closed = true
		clear(i.peers)
		i.mu.Unlock()
		_ = i.svc.RemoveProtocol(ProtocolName) // fails only if the Service closed first
		i.sub.Close()
		close(i.quit)
		<-i.loopDone
	})
	return nil
}

// Info returns what the peer last said, if it has a session with an identify stream open
// and an update of it was accepted.
func (i *Identify) Info(id secio.PeerID) (Info, bool) {
	sess := i.svc.Session(id)
	if sess == nil {
		return Info{}, false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	p := i.peers[sess]
	if p == nil || p.c == nil || p.err != nil || p.info.Record == nil {
		return Info{}, false
	}
	return p.info, true
}

// Record returns this node's signed record of every advertised address, as peers that
// are not public are told it now (public peers get the record of the public addresses
// only: Config.Public).
func (i *Identify) Record() *peerrecord.Record {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.local.rec
}

// Update makes identify read Config.Addrs and the Service's protocols again, and push to
// peers what changed. Listen and protocol changes do this by themselves; call it when
// what Config.Addrs returns changed for another reason.
func (i *Identify) Update() {
	// Read at once, so that Record reflects the change when Update returns (a node hands
	// its record to mDNS right after listening); the push waits PushDelay, as for events.
	i.refresh(time.Now())
	select {
	case i.kick <- struct{}{}:
	default:
	}
}

// Stats returns identify's counters.
func (i *Identify) Stats() Stats {
	s := &i.stats
	return Stats{
		Received: s.received.Load(), Accepted: s.accepted.Load(), Dropped: s.dropped.Load(),
		Stale: s.stale.Load(), Verified: s.verified.Load(), Rejected: s.rejected.Load(),
		Ignored: s.ignored.Load(), Sent: s.sent.Load(),
	}
}
