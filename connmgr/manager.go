package connmgr

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	tendril "github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/secio"
)

// minRoundGap spaces the rounds that wake-ups trigger: each runs a Select over the
// whole book, and dials that fail at once would otherwise run rounds back to back.
// It bounds book dials to MaxDialing per gap.
const minRoundGap = 50 * time.Millisecond

// Manager keeps a node's outbound sessions up; see the package documentation. Its
// methods are safe for concurrent use.
type Manager struct {
	svc  *tendril.Service
	book *addrbook.Book
	cfg  Config
	log  *slog.Logger
	self secio.PeerID
	sub  *tendril.Subscription

	ctx    context.Context // ended by Close; every dial runs under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop and the dials
	wake   chan struct{}  // capacity 1: a round is wanted

	events  chan Event // closed by Close once every goroutine has ended
	dropped atomic.Uint64

	state struct {
		sync.Mutex
		closed  bool
		rng     *rand.Rand
		peers   peerTable
		kept    map[secio.PeerID]*keptPeer
		dialing map[secio.PeerID]*dialInfo
		tracked map[uint64]*tracked // outbound sessions this Manager dialled, by session ID
		// As of the last round, for Select's exclude and for Status:
		conn      map[secio.PeerID]*tendril.Session
		slots     *slots
		limitedAt time.Time // when a dial last met the outbound admission share
		pruned    time.Time // when pruneLocked last ran
	}
}

// dialInfo is a dial in progress.
type dialInfo struct {
	addr    ma.Multiaddr
	key     string
	group   addrbook.Group
	kept    bool
	started time.Time
}

// tracked is an outbound session the Manager dialled, watched so that one that ends
// before it is stable counts as a failure of its address.
type tracked struct {
	sess   *tendril.Session
	peer   secio.PeerID
	addr   ma.Multiaddr
	key    string
	prior  int // the address's failures before the dial succeeded
	opened time.Time
	kept   bool
}

// New starts a Manager that keeps svc connected to peers from book. It subscribes to
// svc's events and dials from its own goroutine until Close. Set svc's
// Config.Admission.Protect to the Manager's Protect (before tendril.New) to spare kept
// peers' inbound sessions from trimming.
func New(svc *tendril.Service, book *addrbook.Book, cfg Config) (*Manager, error) {
	if svc == nil || book == nil {
		return nil, fmt.Errorf("%w: nil Service or Book", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	src := c.Rand
	if src == nil {
		var seed [32]byte
		crand.Read(seed[:])
		src = rand.NewChaCha8(seed)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		svc: svc, book: book, cfg: c, log: log, self: svc.ID(),
		wake:   make(chan struct{}, 1),
		events: make(chan Event, c.EventBuffer),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	st := &m.state
	st.rng = rand.New(src)
	// Beyond the book's peers the Manager has nobody to remember, save kept ones.
	st.peers = peerTable{m: make(map[secio.PeerID]*peerState), max: book.Config().MaxPeers}
	st.kept = make(map[secio.PeerID]*keptPeer)
	st.dialing = make(map[secio.PeerID]*dialInfo)
	st.tracked = make(map[uint64]*tracked)
	st.conn = make(map[secio.PeerID]*tendril.Session)
	st.slots = newSlots(c.Target, c.MaxPerGroup)
	m.sub = svc.Subscribe(64)
	m.wg.Add(1)
	go m.run()
	return m, nil
}

// Close stops the Manager: its dials in progress are cancelled, and Close returns once
// every goroutine it started has ended. Sessions stay up. The Events channel is closed.
func (m *Manager) Close() error {
	m.state.Lock()
	if m.state.closed {
		m.state.Unlock()
		return nil
	}
	m.state.closed = true
	m.state.Unlock()
	m.cancel()
	m.sub.Close()
	m.wg.Wait()
	close(m.events)
	return nil
}

// Events returns the Manager's event channel. Like the Service's, it is lossy: an event
// that finds it full is dropped and counted (Dropped), so a slow reader never slows the
// Manager. It is closed by Close.
func (m *Manager) Events() <-chan Event { return m.events }

// Dropped returns how many events were dropped because the channel was full.
func (m *Manager) Dropped() uint64 { return m.dropped.Load() }

// emitLocked delivers an event without blocking; the state lock is held, so that no event
// is sent after Close closed the channel.
func (m *Manager) emitLocked(e Event) {
	if m.state.closed {
		return
	}
	select {
	case m.events <- e:
	default:
		m.dropped.Add(1)
	}
}

// wakeUp asks for a round soon.
func (m *Manager) wakeUp() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// run is the Manager's loop: a round on every wake-up, every Interval, and when the
// next backoff ends.
func (m *Manager) run() {
	defer m.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	events := m.sub.C()
	var last time.Time
	for {
		select {
		case <-m.ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return // the Service closed: nothing left to dial with
			}
			if !m.relevant(ev) {
				continue
			}
		case <-m.wake:
		case <-timer.C:
		}
		if gap := minRoundGap - time.Since(last); gap > 0 {
			select {
			case <-m.ctx.Done():
				return
			case <-time.After(gap):
			}
		}
		last = time.Now()
		wait := m.round()
		timer.Reset(wait)
	}
}

// relevant reports whether a Service event calls for a round: an outbound session, or
// a kept peer's, ended. Inbound churn does not, so peers connecting in cannot make the
// Manager run rounds.
func (m *Manager) relevant(ev tendril.Event) bool {
	if ev.Type != tendril.EventSessionClosed {
		return false
	}
	if ev.Direction == tendril.Outbound {
		return true
	}
	m.state.Lock()
	defer m.state.Unlock()
	return m.state.kept[ev.Peer] != nil
}

// round reconciles with the Service's sessions and starts the dials that are due. It
// returns how long until the next round is needed.
func (m *Manager) round() time.Duration {
	sessions := m.svc.Sessions()
	now := m.cfg.Now()
	st := &m.state
	st.Lock()
	defer st.Unlock()
	if st.closed {
		return m.cfg.Interval
	}
	m.reapLocked(now)

	conn := make(map[secio.PeerID]*tendril.Session, len(sessions))
	sl := newSlots(m.cfg.Target, m.cfg.MaxPerGroup)
	for _, s := range sessions {
		if !s.Secure() {
			continue // a legacy session has no peer ID
		}
		if prev := conn[s.Peer()]; prev == nil || s.Direction() == tendril.Outbound {
			conn[s.Peer()] = s
		}
		if s.Direction() == tendril.Outbound && st.kept[s.Peer()] == nil {
			sl.take(addrbook.GroupOf(s.RemoteAddr().Transport))
		}
	}
	bookDials := 0
	for _, d := range st.dialing {
		if !d.kept {
			sl.take(d.group)
			bookDials++
		}
	}
	st.conn, st.slots = conn, sl

	if now.Sub(st.pruned) >= pruneEvery {
		st.pruned = now
		m.pruneLocked(now)
	}
	wake := now.Add(m.cfg.Interval)
	m.keptRoundLocked(now, &wake)

	room := min(m.cfg.MaxDialing-bookDials, m.cfg.Target-sl.used)
	// A dial met the outbound admission share since the last Interval: the Service has
	// no slot; wait for the tick rather than dial into the same refusal.
	if !st.limitedAt.IsZero() && now.Sub(st.limitedAt) < m.cfg.Interval {
		room = 0
	}
	exclude := func(p secio.PeerID) bool {
		if p == m.self || conn[p] != nil || st.dialing[p] != nil || st.kept[p] != nil {
			return true
		}
		ps := st.peers.m[p]
		return ps != nil && ps.notBefore.After(now)
	}
	states := func(p secio.PeerID) map[string]*addrState {
		if ps := st.peers.m[p]; ps != nil {
			return ps.addrs
		}
		return nil
	}
	later := func(p secio.PeerID, at time.Time) bool {
		ps := m.peerLocked(p)
		if ps == nil {
			return false
		}
		ps.notBefore = at
		return true
	}
	for _, d := range pick(now, m.book, sl, room, m.cfg.Backoff, exclude, states, later) {
		m.startDialLocked(now, d.peer, d.choice, false)
	}

	for p, ps := range st.peers.m {
		if ps.notBefore.After(now) && ps.notBefore.Before(wake) && conn[p] == nil {
			wake = ps.notBefore
		}
	}
	return max(wake.Sub(now), 0)
}

// pruneEvery is how often the Manager forgets what the book forgot.
const pruneEvery = time.Minute

// pruneLocked drops the states of addresses the book no longer has, and of peers left
// with none, save kept peers' and those being dialled or connected: the book's bounds
// then bound the Manager's memory as well as the table's cap does.
func (m *Manager) pruneLocked(now time.Time) {
	st := &m.state
	for p, ps := range st.peers.m {
		if st.kept[p] != nil || st.dialing[p] != nil || st.conn[p] != nil {
			continue
		}
		entries := m.book.Addrs(now, p)
		if len(entries) == 0 {
			delete(st.peers.m, p)
			continue
		}
		keep := make(map[string]bool, len(entries))
		for _, e := range entries {
			keep[string(e.Addr.Bytes())] = true
		}
		for k := range ps.addrs {
			if !keep[k] {
				delete(ps.addrs, k)
			}
		}
	}
}

// peerLocked returns peer's state, made if missing; nil if the table is full of states
// that must stay.
func (m *Manager) peerLocked(peer secio.PeerID) *peerState {
	st := &m.state
	return st.peers.get(peer, func(p secio.PeerID) bool {
		return st.kept[p] != nil || st.dialing[p] != nil
	})
}

// backoffFor returns the backoff that applies to peer.
func (m *Manager) backoffFor(kept bool) BackoffConfig {
	if kept {
		return m.cfg.KeptBackoff
	}
	return m.cfg.Backoff
}

// reapLocked handles the watched sessions that ended: one that ended before
// StableAfter, leaving the peer without a session, counts as one more failure of its
// address than it had before the dial.
func (m *Manager) reapLocked(now time.Time) {
	st := &m.state
	for id, t := range st.tracked {
		select {
		case <-t.sess.Done():
		default:
			continue
		}
		delete(st.tracked, id)
		lived := now.Sub(t.opened)
		if lived >= m.cfg.StableAfter || m.svc.Session(t.peer) != nil {
			continue // stable, or replaced (the duplicate rule): the address is fine
		}
		ps := m.peerLocked(t.peer)
		if ps == nil {
			continue
		}
		as := ps.addr(t.key)
		as.failures = t.prior
		next := as.fail(now, m.backoffFor(t.kept), st.rng.Float64())
		ps.notBefore = time.Time{}
		err := fmt.Errorf("session ended after %v, before it was stable (%v): %w", lived.Round(time.Millisecond), m.cfg.StableAfter, t.sess.Err())
		ps.record(Attempt{Addr: t.addr, Time: now, Err: err})
		m.log.Debug("short session", "peer", t.peer, "addr", t.addr, "lived", lived, "next", next)
	}
}

// startDialLocked starts a dial of peer at ch on a goroutine of its own.
func (m *Manager) startDialLocked(now time.Time, peer secio.PeerID, ch choice, kept bool) {
	st := &m.state
	d := &dialInfo{addr: ch.addr, key: ch.key, group: ch.group, kept: kept, started: now}
	st.dialing[peer] = d
	m.book.Attempt(now, peer, ch.addr)
	m.emitLocked(Event{Type: EventDialStarted, Time: now, Peer: peer, Addr: ch.addr, Kept: kept})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.ctx, m.cfg.DialTimeout)
		dial := m.svc.Dial
		if m.cfg.Dial != nil {
			dial = m.cfg.Dial
		}
		sess, err := dial(ctx, tendril.Addr{Transport: ch.addr, Peer: peer})
		cancel()
		m.finish(peer, d, sess, err)
		m.wakeUp()
	}()
}
