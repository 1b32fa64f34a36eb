package mdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Service announces one instance of a DNS-SD service type on the LAN and browses for the
// others. Create it with New, run it with Start, stop it with Close.
type Service struct {
	cfg   Config
	names names
	log   *slog.Logger
	ctr   counters

	// mu guards the fields below it.
	mu      sync.Mutex
	state   serviceState
	payload []byte
	links   map[linkKey]*link
	table   *table

	// conns is set by Start, before any goroutine reads it, and not changed after.
	conns []*mconn

	// reportMu serializes OnFound calls.
	reportMu sync.Mutex

	wake chan struct{} // tells run that a send was scheduled; buffered 1
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// serviceState is a Service's life: new, then running, then closed (from either).
type serviceState uint8

const (
	stateNew serviceState = iota
	stateRunning
	stateClosed
)

// linkKey names one interface and family: each has its own socket membership, query
// schedule and rate limit.
type linkKey struct {
	index int
	fam   family
}

type link struct {
	info  ifaceInfo
	query querySchedule
	send  sender
}

// New validates cfg and returns a Service that has not started.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		cfg:     c,
		names:   newNames(c),
		log:     log.With("instance", c.Instance),
		payload: c.Payload,
		links:   map[linkKey]*link{},
		table:   newTable(c.MaxInstances, c.TTL, c.RefreshInterval),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}, nil
}

// Instance returns this Service's instance label.
func (s *Service) Instance() string { return s.cfg.Instance }

// Start opens the sockets (IPv4 and IPv6, each optional, at least one must open), joins the
// group on every usable interface, and starts querying and announcing. The Service runs
// until Close, or until ctx is done (then Close still has to be called to wait for it).
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateClosed:
		return ErrClosed
	case stateRunning:
		return ErrStarted
	}
	var errs []error
	for _, fam := range []family{v4, v6} {
		if (fam == v4 && s.cfg.DisableIPv4) || (fam == v6 && s.cfg.DisableIPv6) {
			continue
		}
		c, err := listen(ctx, fam)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fam, err))
			s.log.Warn("mdns: cannot open socket", "family", fam.String(), "err", err)
			continue
		}
		s.conns = append(s.conns, c)
	}
	if len(s.conns) == 0 {
		return fmt.Errorf("%w: %w", ErrNoSocket, errors.Join(errs...))
	}
	s.state = stateRunning
	s.rescanLocked(time.Now())
	for _, c := range s.conns {
		s.wg.Go(func() { s.receive(c) })
	}
	s.wg.Go(func() { s.run(ctx) })
	return nil
}

// Close says goodbye (records with TTL 0, so peers forget this instance at once), leaves
// the groups, closes the sockets and waits for the Service's goroutines to end. It is
// idempotent; it must not be called from OnFound.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.state != stateClosed {
		s.state = stateClosed
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// SetPayload replaces the announced payload and announces it again on every link (still no
// more than one multicast per second per link). The payload is copied.
func (s *Service) SetPayload(p []byte) error {
	if err := checkPayload(p); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stateClosed {
		return ErrClosed
	}
	s.payload = append([]byte(nil), p...)
	now := time.Now()
	for _, l := range s.links {
		l.send.announce(now, s.cfg.Announcements)
	}
	s.poke()
	return nil
}

// Stats returns a snapshot of the counters.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	instances, links, evicted := len(s.table.entries), len(s.links), s.table.evicted
	s.mu.Unlock()
	c := &s.ctr
	return Stats{
		PacketsReceived: c.received.Load(), ForeignInterface: c.foreign.Load(),
		Oversized: c.oversized.Load(), TooManyRecords: c.tooMany.Load(), Malformed: c.malformed.Load(),
		QueriesForUs: c.queries.Load(), AnswersMerged: c.merged.Load(), RecordsSkipped: c.skipped.Load(),
		Reports: c.reports.Load(), Evicted: evicted, BadSourcePort: c.badPort.Load(),
		QueriesSent: c.queriesSent.Load(), ResponsesSent: c.responsesSent.Load(), SendErrors: c.sendErrors.Load(),
		Instances: instances, Links: links,
	}
}

// poke wakes run without blocking: one pending wake is as good as many.
func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// jitter returns a random delay in [20ms, 120ms): RFC 6762 sections 5.2 and 6 spread the
// first query and answers to shared records so that hosts do not all speak at once.
func jitter() time.Duration {
	return 20*time.Millisecond + rand.N(100*time.Millisecond)
}

// rescanLocked re-reads the interfaces: joins the group on new ones (which start their own
// query schedule and announcements, so an interface that comes up late is served within a
// second of the next scan), leaves vanished ones, and re-announces where addresses changed.
// It holds mu while it makes system calls; they are short, and rescans are seconds apart.
func (s *Service) rescanLocked(now time.Time) {
	ifs, err := scanInterfaces(s.cfg.Interfaces)
	if err != nil {
		s.log.Warn("mdns: cannot list interfaces", "err", err)
		return
	}
	seen := map[linkKey]bool{}
	for _, info := range ifs {
		for _, c := range s.conns {
			if !info.has(c.fam) {
				continue
			}
			k := linkKey{info.ifi.Index, c.fam}
			seen[k] = true
			if l := s.links[k]; l != nil {
				if !slices.Equal(l.info.addrs, info.addrs) {
					l.info = info
					l.send.announce(now, s.cfg.Announcements)
				}
				continue
			}
			ifi := info.ifi
			if err := c.join(&ifi); err != nil {
				s.log.Debug("mdns: cannot join group", "interface", ifi.Name, "family", c.fam.String(), "err", err)
				continue
			}
			l := &link{info: info, query: newQuerySchedule(now, jitter(), s.cfg.QueryInterval, s.cfg.MaxQueryInterval)}
			l.send.announce(now.Add(firstAnnounceDelay), s.cfg.Announcements)
			s.links[k] = l
			s.log.Debug("mdns: joined", "interface", ifi.Name, "family", c.fam.String())
		}
	}
	for k, l := range s.links {
		if !seen[k] {
			s.leaveLocked(k, l)
			delete(s.links, k)
		}
	}
}

func (s *Service) leaveLocked(k linkKey, l *link) {
	for _, c := range s.conns {
		if c.fam == k.fam {
			ifi := l.info.ifi
			if err := c.leave(&ifi); err != nil {
				s.log.Debug("mdns: cannot leave group", "interface", ifi.Name, "err", err)
			}
		}
	}
}

// outgoing is a packet run sends once it has released mu.
type outgoing struct {
	c       *mconn
	key     linkKey
	b       []byte
	isQuery bool
}

// run is the Service's clock: it rescans interfaces, expires instances, and sends the
// queries and responses that the schedules say are due. Only run sends, so the number of
// packets sent is set by the schedules and rate limits, never by what arrives.
func (s *Service) run(ctx context.Context) {
	defer s.shutdown()
	timer := time.NewTimer(0)
	defer timer.Stop()
	nextRescan := time.Now().Add(s.cfg.RescanInterval)
	for {
		now := time.Now()
		s.mu.Lock()
		if !now.Before(nextRescan) {
			s.rescanLocked(now)
			s.table.expire(now)
			nextRescan = now.Add(s.cfg.RescanInterval)
		}
		out := s.dueLocked(now)
		s.mu.Unlock()
		failed := s.sendAll(out)
		s.mu.Lock()
		s.markSentLocked(time.Now(), out, failed)
		next := nextRescan
		for _, l := range s.links {
			next = earliest(next, l.query.next)
			next = earliest(next, l.send.next())
		}
		s.mu.Unlock()
		timer.Reset(max(0, time.Until(next)))
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case <-timer.C:
		case <-s.wake:
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if b.IsZero() || a.Before(b) {
		return a
	}
	return b
}

// dueLocked collects the packets due at now; markSentLocked advances the schedules once
// they went out (only run does either, so nothing is collected twice in between).
func (s *Service) dueLocked(now time.Time) []outgoing {
	var out []outgoing
	conn := func(f family) *mconn {
		for _, c := range s.conns {
			if c.fam == f {
				return c
			}
		}
		return nil
	}
	for k, l := range s.links {
		if l.query.due(now) {
			known := append([]knownAnswer{{instance: s.names.instance, ttl: s.cfg.TTL}},
				s.table.known(now, s.names, maxKnownAnswers-1)...)
			if b, err := buildQuery(s.names, known); err == nil {
				out = append(out, outgoing{conn(k.fam), k, b, true})
			}
		}
		if l.send.due(now) {
			if b, err := buildResponse(s.names, s.announcementLocked(l, s.cfg.TTL)); err == nil {
				out = append(out, outgoing{conn(k.fam), k, b, false})
			} else {
				s.log.Warn("mdns: cannot pack response", "err", err)
			}
		}
	}
	return out
}

func (s *Service) markSentLocked(now time.Time, out []outgoing, failed []bool) {
	for i, o := range out {
		l := s.links[o.key]
		switch {
		case l == nil:
		case o.isQuery && failed[i]:
			l.query.failed(now)
		case o.isQuery:
			l.query.sent(now)
		case failed[i]:
			l.send.failed(now)
		default:
			l.send.sent(now)
		}
	}
}

func (s *Service) announcementLocked(l *link, ttl time.Duration) announcement {
	return announcement{port: uint16(s.cfg.Port), payload: s.payload, addrs: l.info.addrs, ttl: ttl}
}

// sendAll sends out and reports which sends failed.
func (s *Service) sendAll(out []outgoing) []bool {
	failed := make([]bool, len(out))
	for i, o := range out {
		if err := o.c.write(o.b, o.key.index); err != nil {
			failed[i] = true
			s.ctr.sendErrors.Add(1)
			s.log.Debug("mdns: send failed", "family", o.c.fam.String(), "interface", o.key.index, "err", err)
			continue
		}
		if o.isQuery {
			s.ctr.queriesSent.Add(1)
		} else {
			s.ctr.responsesSent.Add(1)
		}
	}
	return failed
}

// shutdown runs when run ends: goodbyes, group leaves, sockets closed (which ends the
// receivers).
func (s *Service) shutdown() {
	s.mu.Lock()
	s.state = stateClosed
	var out []outgoing
	for k, l := range s.links {
		if b, err := buildResponse(s.names, s.announcementLocked(l, 0)); err == nil {
			for _, c := range s.conns {
				if c.fam == k.fam {
					out = append(out, outgoing{c, k, b, false})
				}
			}
		}
	}
	s.mu.Unlock()
	s.sendAll(out)
	s.mu.Lock()
	for k, l := range s.links {
		s.leaveLocked(k, l)
		delete(s.links, k)
	}
	s.mu.Unlock()
	for _, c := range s.conns {
		c.c.Close()
	}
}

// receive reads one socket until it is closed. One goroutine per socket, whatever arrives.
func (s *Service) receive(c *mconn) {
	buf := make([]byte, maxPacket+1) // one more than allowed, to see truncation
	for {
		n, index, src, err := c.read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Not expected on an unconnected UDP socket; pause so that a persistent
			// error cannot spin a core.
			s.log.Debug("mdns: read failed", "err", err)
			select {
			case <-s.stop:
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		s.handle(c.fam, buf[:n], index, src)
	}
}

// handle processes one datagram.
func (s *Service) handle(fam family, b []byte, index int, src netip.AddrPort) {
	s.ctr.received.Add(1)
	k := linkKey{index, fam}
	s.mu.Lock()
	l := s.links[k]
	var ifname string
	if l != nil {
		ifname = l.info.ifi.Name
	}
	s.mu.Unlock()
	if l == nil {
		s.ctr.foreign.Add(1)
		return
	}
	p, err := parse(s.names, b, s.cfg.TTL/2)
	switch {
	case errors.Is(err, errTooLarge):
		s.ctr.oversized.Add(1)
		return
	case errors.Is(err, errTooManyRecords):
		s.ctr.tooMany.Add(1)
		return
	case err != nil:
		s.ctr.malformed.Add(1)
		return
	}
	s.ctr.skipped.Add(uint64(p.skipped))
	if len(p.instances) > 0 && src.Port() != mdnsPort {
		// RFC 6762 section 6: responses from another port are not mDNS responses.
		s.ctr.badPort.Add(1)
		return
	}
	now := time.Now()
	if p.query {
		s.ctr.queries.Add(1)
		s.mu.Lock()
		if l := s.links[k]; l != nil && l.send.answer(now, jitter()) {
			s.poke()
		} else {
			s.ctr.merged.Add(1)
		}
		s.mu.Unlock()
		return
	}
	if len(p.instances) == 0 {
		return
	}
	var reports []Found
	s.mu.Lock()
	for _, in := range p.instances {
		if s.table.observe(now, in) {
			reports = append(reports, Found{
				Instance:  in.label,
				Payload:   in.payload,
				Addrs:     foundAddrs(in.addrs, src.Addr(), ifname),
				Port:      in.port,
				Interface: ifname,
			})
		}
	}
	s.mu.Unlock()
	if s.cfg.OnFound == nil || len(reports) == 0 {
		return
	}
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	for _, f := range reports {
		s.ctr.reports.Add(1)
		s.cfg.OnFound(f)
	}
}

// foundAddrs returns the announced addresses (without the unspecified and multicast ones,
// which no one can dial), IPv6 link-local ones zoned with the
// receiving interface (a peer's zone means nothing here), then the source if new.
func foundAddrs(announced []netip.Addr, src netip.Addr, ifname string) []netip.Addr {
	out := make([]netip.Addr, 0, len(announced)+1)
	for i := 0; i <= len(announced); i++ {
		a := src.Unmap()
		if i < len(announced) {
			a = announced[i]
		}
		if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
			continue
		}
		if a.Is6() && a.IsLinkLocalUnicast() {
			a = a.WithZone(ifname)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
