package tendril

// Dialling: the outbound side, up to the handshake, and Dial's wait for OpenOnConnect.

import (
	"context"
	"errors"
	"fmt"

	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
)

// Dial connects to addr, runs the handshake and returns the session. If addr ends with
// /p2p/ID, the handshake fails unless the peer proves that identity (secio.ErrPeerIDMismatch)
// before this side reveals its own; an address without /p2p/ is not verified at all: the
// session is with whoever answers at that address (Session.Peer says who). Set
// Config.RequirePeerID to refuse such addresses (ErrInvalidAddr). If addr names a peer that
// already has a direct session, that session is returned without dialling (a relayed one
// is not: the direct session replaces it, see Session.Relayed). Otherwise, when the
// handshake reveals a peer that already has a session, both sides keep the same one of the
// two connections: a direct one over a relayed one, then the one dialled by the peer with
// the smaller ID, or, if this node dialled both, the new one.
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
	t, err := s.transportFor(addr)
	if err != nil {
		return nil, err
	}
	if !legacy && addr.Peer.IsZero() && s.cfg.RequirePeerID {
		return nil, fmt.Errorf("%w: %s has no /p2p/ part, and Config.RequirePeerID is set", ErrInvalidAddr, addr)
	}
	if !legacy && !addr.Peer.IsZero() {
		if addr.Peer == s.id {
			return nil, fmt.Errorf("tendril: dial %s: %w", addr, secio.ErrSelfDial)
		}
		if sess := s.Session(addr.Peer); sess != nil && !sess.relayed {
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
	raw, err := t.Dial(dctx, addr.Transport)
	dcancel()
	if err != nil {
		s.release(&ad)
		err = fmt.Errorf("tendril: dial %s: %w", addr, err)
		s.emit(Event{Type: EventDialFailed, Addr: addr, Peer: addr.Peer, Direction: Outbound, Err: err})
		return nil, err
	}
	if err := s.gateAddr(Outbound, transport.RemoteAddrPort(raw)); err != nil {
		s.release(&ad)
		abortConn(raw)
		err = fmt.Errorf("tendril: dial %s: %w", addr, err)
		s.emit(Event{Type: EventGated, Addr: addr, Peer: addr.Peer, Direction: Outbound, Err: err})
		return nil, err
	}
	return s.setup(ctx, raw, ad, addr, legacy)
}
