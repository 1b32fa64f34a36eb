package tendril

// The transports a Service dials and listens with, and sessions on connections the
// application supplies (ServeConn, DialConn).

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/tcp"
	"github.com/tendril-p2p/tendril/transport/ws"
)

// defaultTransports is what a Service uses when Config.Transports is nil.
func (s *Service) defaultTransports() []transport.Transport {
	return []transport.Transport{
		tcp.New(&tcp.Config{KeepAlive: s.tcpKeepAlive()}),
		ws.New(&ws.Config{KeepAlive: s.tcpKeepAlive()}),
	}
}

// ServeConn runs the handshake and a session on conn, a connection the application
// supplies (a relayed stream, a Unix socket, one end of a net.Pipe), in the given
// direction: Outbound runs the dialer's side of the handshake, Inbound the listener's.
// It is admitted as Dial and Listen admit theirs: an Inbound connection by its remote
// address (a connection whose address is not IP counts only against the global limits),
// takes a handshake slot and may be evicted while silent; an Outbound one takes an
// outbound slot. The peer is not verified (DialConn verifies it); ctx bounds the
// handshake, not the session. ServeConn returns once the session is registered, or the
// error; conn is closed on every path where no session comes of it.
func (s *Service) ServeConn(ctx context.Context, conn net.Conn, dir Direction) (*Session, error) {
	switch dir {
	case Inbound:
		ctx, stop := s.bound(ctx)
		defer stop()
		hctx, ad, err := s.admitConn(ctx, conn, false)
		if err != nil {
			return nil, err
		}
		return s.serveInbound(hctx, nil, conn, ad, false)
	case Outbound:
		return s.dialConn(ctx, conn, Addr{Transport: transport.RemoteMultiaddr(conn)})
	}
	conn.Close()
	return nil, fmt.Errorf("tendril: ServeConn: direction %d is neither Inbound nor Outbound", dir)
}

// DialConn is Dial on a connection the application has made to addr (a relayed stream,
// say): it runs the dialer's side of the handshake on conn, verifying addr's /p2p/ peer
// ID if it has one (Config.RequirePeerID applies), and, like Dial, returns once the
// OpenOnConnect protocols are open. addr is what Session.RemoteAddr reports if conn does
// not say (transport.Addressed). conn is closed on every path where no session comes of it.
func (s *Service) DialConn(ctx context.Context, conn net.Conn, addr Addr) (*Session, error) {
	if addr.Peer.IsZero() && s.cfg.RequirePeerID {
		conn.Close()
		return nil, fmt.Errorf("%w: %s has no /p2p/ part, and Config.RequirePeerID is set", ErrInvalidAddr, addr)
	}
	if addr.Peer == s.id {
		conn.Close()
		return nil, fmt.Errorf("tendril: dial %s: %w", addr, secio.ErrSelfDial)
	}
	sess, err := s.dialConn(ctx, conn, addr)
	if err != nil {
		return nil, err
	}
	if err := sess.waitReady(ctx); err != nil {
		return nil, fmt.Errorf("tendril: dial %s: %w", addr, err)
	}
	return sess, nil
}

// dialConn runs the outbound side on conn, within an outbound slot.
func (s *Service) dialConn(ctx context.Context, conn net.Conn, addr Addr) (*Session, error) {
	ad, err := s.admitOutbound()
	if err != nil {
		conn.Close()
		if errors.Is(err, ErrConnectionLimit) {
			s.emit(Event{Type: EventLimitReached, Addr: addr, Direction: Outbound, Err: err})
		}
		return nil, err
	}
	ctx, stop := s.bound(ctx)
	defer stop()
	return s.setup(ctx, conn, ad, addr, false)
}

// bound returns ctx, ended also by Close.
func (s *Service) bound(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}
