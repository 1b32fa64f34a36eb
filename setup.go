package tendril

// From a connection to a registered session: the handshake, the mux, the duplicate rule,
// and the session's removal when it ends.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
)

// setup turns a raw connection into a registered session. The caller has admitted it (ad);
// setup gives back what ad holds on every path where no session comes of it. to is the
// address dialled (outbound): its peer ID is verified in the handshake, and its multiaddr
// is the session's remote address if raw's own cannot be told.
func (s *Service) setup(ctx context.Context, raw net.Conn, ad admitted, to Addr, legacy bool) (*Session, error) {
	dir := ad.dir
	if tc, ok := raw.(lingerer); ok && s.cfg.ResetOnClose {
		_ = tc.SetLinger(0)
	}
	expect := to.Peer
	remote := Addr{Transport: transport.RemoteMultiaddr(raw), Peer: expect}
	if remote.Transport == nil {
		remote.Transport = to.Transport
	}
	local := Addr{Transport: transport.LocalMultiaddr(raw)}
	var (
		sc  *secio.Conn
		err error
	)
	// The connection's record buffers are charged to the Service's memory budget, as a
	// child of its own: a newcomer there (see mux.Budget) while it holds little.
	records := mux.NewBudget(s.recordBudget(), s.memory)
	if legacy {
		sc, err = secio.LegacyTEA(raw, s.cfg.LegacyTEA.Key, &secio.LegacyConfig{MaxFrameSize: s.cfg.MaxFrameSize, Memory: records})
	} else {
		cfg := s.secioCfg
		cfg.ExpectedPeer = expect
		cfg.Memory = records
		// secio bounds the handshake by cfg.HandshakeTimeout (set from Config) and reports
		// its expiry as secio.ErrHandshakeTimeout; a timer of our own would fire first and
		// turn that into a bare context.DeadlineExceeded.
		if dir == Outbound {
			sc, err = secio.Client(ctx, raw, &cfg)
		} else {
			// Admission hears when the dialer's first message has arrived (helloConn).
			sc, err = secio.Server(ctx, s.watchHello(raw, &ad), &cfg)
		}
	}
	if err != nil {
		s.release(&ad)
		abortConn(raw)
		if dir == Inbound {
			return nil, s.inboundFailed(remote, ad.ip(), legacy, err)
		}
		return nil, s.handshakeFailed(Event{Addr: remote, Peer: expect, Direction: dir, Secure: !legacy}, err)
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
	// The handshake's round trip is the session's first RTT estimate (Session.RTT): it is
	// known from the start, and costs the wire nothing.
	ms.SeedRTT(sc.HandshakeRTT())
	sess := newSession(s, sc, ms, dir, local, remote)
	sess.rconn = rc
	sess.adm = ad
	sess.relayed = transport.IsRelayed(raw)
	return s.register(sess)
}

// inboundFailed reports an inbound connection that came to no session before or during
// its handshake (from ip, zero if it is not IP), coalesced per address, and returns the
// error.
func (s *Service) inboundFailed(remote Addr, ip netip.Addr, legacy bool, err error) error {
	return s.handshakeFailedFrom(Event{Addr: remote, Direction: Inbound, Secure: !legacy}, ip, true, err)
}

// handshakeFailed reports an outbound handshake that failed, and returns the error.
func (s *Service) handshakeFailed(ev Event, err error) error {
	return s.handshakeFailedFrom(ev, netip.Addr{}, false, err)
}

func (s *Service) handshakeFailedFrom(ev Event, ip netip.Addr, coalesce bool, err error) error {
	ev.Type = EventHandshakeFailed
	switch {
	case errors.Is(err, ErrConnectionLimit):
		// Refused by admission when its first message arrived (the subnet's handshake
		// rate) or when a trusted proxy named the client: a refusal, as at accept, not a
		// failed handshake.
		ev.Type = EventLimitReached
	case errors.Is(err, ErrGated):
		ev.Type = EventGated
	case errors.Is(err, secio.ErrPeerIDMismatch):
		ev.Type = EventPeerIDMismatch
	}
	if ev.Type == EventHandshakeFailed || ev.Type == EventPeerIDMismatch {
		s.handshakes.failed(err)
	}
	err = fmt.Errorf("tendril: handshake with %s: %w", ev.Addr.Transport, err)
	if s.logs(slog.LevelDebug) {
		s.log.Debug("handshake failed", "addr", ev.Addr, "dir", ev.Direction.String(), "err", err)
	}
	ev.Err = err
	if coalesce {
		s.emitRepeat(ev, ip)
	} else {
		s.emit(ev)
	}
	return err
}

// recordBudget is the most a connection's record buffers may hold: a record of the
// largest size while the chunks it arrived in are copied into it, and the 64 KiB secio
// reads ahead (see secio.MemoryBudget).
func (s *Service) recordBudget() int64 { return 2*int64(s.cfg.MaxFrameSize) + 256<<10 }

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
		s.log.Debug("duplicate session replaced", "peer", sess.peer, "relayed", replaced.relayed)
		if replaced.relayed && !sess.relayed {
			// An upgrade (a hole punch, a direct dial): what the relayed session carries
			// may finish, while everything new goes to the direct one. Close is bounded
			// by ShutdownTimeout, and by the Service's own Close.
			replaced.setErr(ErrDuplicateSession)
			go replaced.Close()
		} else {
			replaced.abort(ErrDuplicateSession)
		}
	}
	sess.start()
	if sess.dir == Inbound {
		s.trim()
	}
	return sess, nil
}

// keepNew decides between two sessions with the same peer so that both peers decide alike:
// a direct session over a relayed one (both ends see that a relay carries it); then the one
// dialled by the peer with the smaller ID; if the same peer dialled both, the newer one,
// since a peer redials only when it considers the old connection gone (it restarted, or
// the old connection died without either side noticing yet).
func (s *Service) keepNew(old, cur *Session) bool {
	if old.relayed != cur.relayed {
		return old.relayed
	}
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
