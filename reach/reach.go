package reach

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/internal/ratelimit"
	"github.com/tendril-p2p/tendril/secio"
)

// ProtocolName and ProtocolVersion are what Reach registers on the Service (request mode).
const (
	ProtocolName    = "/tendril/reach"
	ProtocolVersion = "1"
)

// Reach runs reachability checks on a Service, both ways: it serves its peers'
// dial-back requests, and it has its own candidate addresses dialled back by its peers
// until each is known Public or Private. Create it with New; Close it before or with its
// Service. All methods are safe for concurrent use.
type Reach struct {
	svc *tendril.Service
	id  *identify.Identify
	cfg Config
	log *slog.Logger
	srv *server
	sub *tendril.Subscription
	now func() time.Time

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	kick   chan struct{} // capacity 1: candidates or sessions changed, or an answer came
	events chan Event
	wg     sync.WaitGroup // the loop and the requests in flight
	once   sync.Once

	mu      sync.Mutex
	addrs   []*addrState                  // guarded by mu: the candidates, likeliest first
	mapped  []ma.Multiaddr                // guarded by mu: AddCandidate's
	servers map[secio.PeerID]*serverState // guarded by mu: peers asked lately
	state   State                         // guarded by mu: the node's, from addrs
	closed  bool                          // guarded by mu

	dropped atomic.Uint64
	stats   struct {
		requests, malformed, refused, rateLimited, busy, dialledOK, dialledFailed atomic.Uint64
		asked, answered, askFailed                                                atomic.Uint64
	}
}

// addrState is what is known of one candidate.
type addrState struct {
	candidate
	ip          string                      // its IP, to match servers' observations
	results     map[addrbook.Group]result   // each group's last answer
	pending     map[addrbook.Group]struct{} // groups asked, their answer not in yet
	state       State
	lastChecked time.Time
	lastOK      time.Time // when a dial-back last reached it
	// epoch counts the times its answers were voided (a mapping made or removed there):
	// an answer to a request sent in an earlier epoch is dropped.
	epoch uint64
}

// serverState is a peer as a dial-back server: the pace of this node's requests to it
// (the server's own default limit), whether one is in flight, and the session on which
// it did not serve the protocol.
type serverState struct {
	pace        ratelimit.Bucket
	inFlight    bool
	unsupported *tendril.Session
}

// maxResultsPerAddr bounds the groups' answers kept per address (the oldest go first).
const maxResultsPerAddr = 16

// Event reports a change of state: of one address (Addr set), or of the node's overall
// reachability (Addr nil).
type Event struct {
	Addr    ma.Multiaddr
	State   State
	Prev    State
	Removed bool // the address is no longer a candidate (State is then Unknown)
	Time    time.Time
}

// String formats the event for logs.
func (e Event) String() string {
	what := "node"
	if e.Addr != nil {
		what = e.Addr.String()
	}
	if e.Removed {
		return fmt.Sprintf("%s removed (was %s)", what, e.Prev)
	}
	return fmt.Sprintf("%s %s -> %s", what, e.Prev, e.State)
}

// AddrState is what dial-backs have said of one candidate address.
type AddrState struct {
	Addr   ma.Multiaddr
	State  State
	Source Source
	// Confirmations and Failures count the groups whose last answer (not older than
	// Config.MaxResultAge) was a successful or failed dial-back.
	Confirmations, Failures int
	// LastChecked is when the last answer about it came; zero if none did.
	LastChecked time.Time
	// LastReached is when a dial-back last reached this node at the address (the last
	// inbound connection proven to work there); zero if none did while it was tracked.
	LastReached time.Time
	// Observers is how many address groups observe this node at the address's IP (0 for
	// addresses not from observations).
	Observers int
}

// Stats are a Reach's counters since New.
type Stats struct {
	// As a server.
	Requests      uint64 // well-formed requests received
	Malformed     uint64 // requests refused as malformed
	Refused       uint64 // candidates not dialled: not at the requester's IP, or no transport
	RateLimited   uint64 // requests refused for their requester's rate
	Busy          uint64 // requests refused because no dial-back could start
	DialledOK     uint64 // dial-backs that reached the requester
	DialledFailed uint64 // dial-backs that did not
	// As a client.
	Asked     uint64 // requests sent
	Answered  uint64 // requests answered with results
	AskFailed uint64 // requests that failed, or were refused (rate, busy)
}

// New starts reachability on svc beside id (identify on the same Service, whose observed
// addresses give the candidates): it registers ProtocolName and starts asking peers to dial
// this node back as sessions and candidates come. Errors wrap ErrInvalidConfig, or the
// Service's (tendril.ErrInvalidProtocol if reach is registered already).
func New(svc *tendril.Service, id *identify.Identify, cfg Config) (*Reach, error) {
	if svc == nil || id == nil {
		return nil, fmt.Errorf("%w: a Service and its Identify are required", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	r := &Reach{
		svc: svc, id: id, cfg: cfg, log: cfg.Logger, now: time.Now,
		kick:    make(chan struct{}, 1),
		events:  make(chan Event, cfg.EventBuffer),
		servers: make(map[secio.PeerID]*serverState),
	}
	r.srv = &server{r: r, lim: newServeLimiter(&r.cfg)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.sub = svc.Subscribe(64)
	err := svc.AddProtocol(tendril.Protocol{
		Name:           ProtocolName,
		Versions:       []string{ProtocolVersion},
		RequestHandler: r.srv,
	})
	if err != nil {
		r.sub.Close()
		r.cancel()
		return nil, err
	}
	r.wg.Add(1)
	go r.run()
	return r, nil
}

// Close stops serving and asking: it unregisters the protocol, ends the requests in
// flight and the dial-backs it serves, and closes Events. It is idempotent.
func (r *Reach) Close() error {
	r.once.Do(func() {
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.cancel()
		_ = r.svc.RemoveProtocol(ProtocolName) // fails only if the Service closed first
		r.sub.Close()
		r.wg.Wait()
		close(r.events)
	})
	return nil
}

// Events returns the channel of state changes, closed by Close. Events that find it full
// are dropped and counted (DroppedEvents); Status and Reachability always tell the
// current state.
func (r *Reach) Events() <-chan Event { return r.events }

// DroppedEvents returns how many events were dropped because Events was full.
func (r *Reach) DroppedEvents() uint64 { return r.dropped.Load() }

// Reachability returns the node's state: Public if any candidate address is, else
// Private if any is, else Unknown.
func (r *Reach) Reachability() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Status returns the candidate addresses and what is known of each, likeliest first.
func (r *Reach) Status() []AddrState {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]AddrState, 0, len(r.addrs))
	for _, a := range r.addrs {
		ok, failed := tallyResults(a.results, now, r.cfg.MaxResultAge)
		out = append(out, AddrState{
			Addr: a.addr, State: a.state, Source: a.source, Confirmations: ok, Failures: failed,
			LastChecked: a.lastChecked, LastReached: a.lastOK, Observers: a.observers,
		})
	}
	return out
}

// AddCandidate adds an address to have dialled back, as a port mapping learns its
// external address: an /ip4 or /ip6 multiaddr without /p2p/, at most MaxAddrLen bytes.
// It is checked from then on, before the candidates observed. If the address was tracked
// already (observed), what dial-backs said of it is voided and it is checked afresh: a
// mapping changes what a dial there meets, so answers from before it no longer tell.
func (r *Reach) AddCandidate(addr ma.Multiaddr) error {
	if _, ok := ipOf(addr); !ok || len(addr.Bytes()) > MaxAddrLen {
		return fmt.Errorf("%w: candidate %s: want an /ip4 or /ip6 address of at most %d bytes", ErrInvalidConfig, addr, MaxAddrLen)
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	var evs []Event
	if !duplicate(r.mapped, addr) {
		if len(r.mapped) >= r.cfg.MaxAddrs {
			r.mu.Unlock()
			return fmt.Errorf("%w: more than MaxAddrs (%d) candidates added", ErrInvalidConfig, r.cfg.MaxAddrs)
		}
		r.mapped = append(r.mapped, addr)
		evs = r.voidLocked(addr, r.now())
	}
	r.poke()
	r.mu.Unlock()
	r.emit(evs)
	return nil
}

// RemoveCandidate removes an address AddCandidate added (a mapping that was removed). If
// the address stays a candidate (observed), what dial-backs said of it is voided, as
// AddCandidate does: they went through the mapping that is gone.
func (r *Reach) RemoveCandidate(addr ma.Multiaddr) {
	r.mu.Lock()
	var evs []Event
	for i, a := range r.mapped {
		if a.Equal(addr) {
			r.mapped = append(r.mapped[:i], r.mapped[i+1:]...)
			evs = r.voidLocked(addr, r.now())
			r.poke()
			break
		}
	}
	r.mu.Unlock()
	r.emit(evs)
}

// voidLocked forgets the answers about addr, if it is tracked, so that it is asked about
// again at once; answers to requests in flight are dropped when they come (epoch). It
// returns the events of the states that changed.
func (r *Reach) voidLocked(addr ma.Multiaddr, now time.Time) []Event {
	st := r.findLocked(addr)
	if st == nil {
		return nil
	}
	st.epoch++
	clear(st.results)
	st.lastChecked = time.Time{}
	if st.state == Unknown {
		return nil
	}
	evs := []Event{{Addr: st.addr, Prev: st.state, State: Unknown, Time: now}}
	st.state = Unknown
	return append(evs, r.overallLocked(now)...)
}

// Stats returns the counters.
func (r *Reach) Stats() Stats {
	s := &r.stats
	return Stats{
		Requests: s.requests.Load(), Malformed: s.malformed.Load(), Refused: s.refused.Load(),
		RateLimited: s.rateLimited.Load(), Busy: s.busy.Load(), DialledOK: s.dialledOK.Load(),
		DialledFailed: s.dialledFailed.Load(), Asked: s.asked.Load(), Answered: s.answered.Load(),
		AskFailed: s.askFailed.Load(),
	}
}

// poke wakes the loop.
func (r *Reach) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// emit sends events without blocking.
func (r *Reach) emit(evs []Event) {
	for _, e := range evs {
		select {
		case r.events <- e:
		default:
			r.dropped.Add(1)
		}
	}
}

func (r *Reach) debug(msg string, args ...any) {
	if r.log != nil && r.log.Enabled(context.Background(), slog.LevelDebug) {
		r.log.Debug("reach: "+msg, args...)
	}
}
