package tendril

// Probe: a reachability check of one address, without a session.

import (
	"context"
	"fmt"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
)

// Probe checks that the peer addr names answers at addr's transport address: it dials a
// new connection with the Service's transports (whether or not a session with that peer
// exists: the point is to test this address), runs the dialer's side of the handshake
// until the peer has proven addr.Peer's identity, and closes the connection without
// revealing this node's identity and without registering a session (see secio.Probe).
// The peer's handshake then fails where this node's identity was due, so no duplicate
// session ever replaces the one the two may have already.
//
// addr must have a peer ID (else an error wrapping ErrInvalidAddr). Config.DialTimeout
// bounds the connect and Config.HandshakeTimeout the handshake, within ctx; Close aborts
// a probe in progress. The Admission Gater is asked about the address as for a Dial.
// Probe takes no session slot, since it never makes a session, and emits no events: it
// is a question its caller asks, whose answer is the error (nil: the peer is there).
// Callers that probe on behalf of others bound how many probes run at once (package
// reach does).
func (s *Service) Probe(ctx context.Context, addr Addr) error {
	if addr.Peer.IsZero() {
		return fmt.Errorf("%w: probe %s: no /p2p/ part", ErrInvalidAddr, addr)
	}
	if addr.Peer == s.id {
		return fmt.Errorf("tendril: probe %s: %w", addr, secio.ErrSelfDial)
	}
	t, err := s.transportFor(addr)
	if err != nil {
		return err
	}
	if s.ctx.Err() != nil {
		return ErrServiceClosed
	}
	ctx, stop := s.bound(ctx)
	defer stop()
	dctx, dcancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	raw, err := t.Dial(dctx, addr.Transport)
	dcancel()
	if err != nil {
		return fmt.Errorf("tendril: probe %s: %w", addr, err)
	}
	if tc, ok := raw.(lingerer); ok && s.cfg.ResetOnClose {
		_ = tc.SetLinger(0)
	}
	if err := s.gateAddr(Outbound, transport.RemoteAddrPort(raw)); err != nil {
		abortConn(raw)
		return fmt.Errorf("tendril: probe %s: %w", addr, err)
	}
	cfg := s.secioCfg
	cfg.ExpectedPeer = addr.Peer
	cfg.Memory = mux.NewBudget(s.recordBudget(), s.memory)
	if _, err := secio.Probe(ctx, raw, &cfg); err != nil {
		return fmt.Errorf("tendril: probe %s: %w", addr, err)
	}
	return nil
}
